#!/usr/bin/env python3
"""FlagGems 5.0.2: cross_entropy_loss fails for more than 65535 rows.

`flag_gems.fused.cross_entropy_loss` launches its kernels on the grid
(cdiv(D, BLOCK_D), N): the N rows (tokens) go on grid axis 1, whose limit on CUDA is
65535. A batch of 16 sequences of 4096 tokens is 65536 rows: the launch fails with
"Triton Error [CUDA]: invalid argument". torch.nn.functional.cross_entropy computes it.

Suite example (H100): test_matches_reference_at_profile_boundaries[cross_entropy-flag_gems]
at `many_short_rows` (2097153 rows of 4 classes) and `grid_capped` (65536 rows), every
dtype.

Exit status: 1 if the finding reproduces, 0 if not, 2 if this machine cannot run it.
"""

import platform
import sys
import traceback

import torch

#: torch.testing.assert_close's default (rtol, atol) per dtype.
TOLERANCE = {torch.float16: (1e-3, 1e-5), torch.bfloat16: (1.6e-2, 1e-5),
             torch.float32: (1.3e-6, 1e-5), torch.float64: (1e-7, 1e-7)}


def environment(library):
    """Print the versions and the GPU; the library's import error ends the run (exit 2)."""
    import importlib
    from importlib import metadata

    import triton
    module = importlib.import_module(library)
    dist = {"flag_gems": "flag-gems", "liger_kernel": "liger-kernel"}[library]
    try:
        version = metadata.version(dist)
    except metadata.PackageNotFoundError:
        version = getattr(module, "__version__", "unknown")
    cap = "".join(map(str, torch.cuda.get_device_capability()))
    print(f"python {platform.python_version()}, torch {torch.__version__}, triton "
          f"{triton.__version__}, {dist} {version}")
    print(f"device: {torch.cuda.get_device_name()} (sm_{cap})")
    return module


def compare(name, out, ref, rtol, atol):
    """Print the largest |out - ref| and the worst element against assert_close's bound
    atol + rtol * |ref| (NaN must be NaN, inf the same inf); return whether any element is
    outside it."""
    got, want = out.detach().cpu().double(), ref.detach().cpu().double()
    if got.shape != want.shape:
        print(f"  {name}: shape {tuple(got.shape)}, expected {tuple(want.shape)}")
        return True
    ok = torch.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    finite = torch.isfinite(got) & torch.isfinite(want)
    err = torch.where(finite, (got - want).abs(), torch.zeros_like(got))
    bad = int((~ok).sum())
    line = (f"  {name}: max |out - ref| = {float(err.max()) if err.numel() else 0.0:.3g}; "
            f"{bad} of {want.numel()} elements outside atol + rtol*|ref| "
            f"(rtol={rtol:g}, atol={atol:g})")
    if bad:
        excess = torch.where(ok, torch.full_like(err, -1.0),
                             torch.where(finite, err - (atol + rtol * want.abs()),
                                         torch.full_like(err, float("inf"))))
        i = int(torch.argmax(excess.reshape(-1)))
        o, r = got.reshape(-1)[i].item(), want.reshape(-1)[i].item()
        idx = tuple(int(v) for v in torch.unravel_index(torch.tensor(i), want.shape)) if want.dim() else ()
        line += (f"; worst at {idx}: out={o!r}, ref={r!r}, |out-ref|={abs(o - r):.3g} > "
                 f"{atol + rtol * abs(r):.3g}")
    print(line)
    return bad > 0


def run(main):
    """Exit 1 if the finding reproduces, 0 if not, 2 if this machine cannot run it."""
    if not torch.cuda.is_available():
        print("no CUDA device: cannot run")
        sys.exit(2)
    try:
        sys.exit(1 if main() else 0)
    except SystemExit:
        raise
    except ImportError as exc:
        print(f"cannot import the library: {exc}")
        sys.exit(2)
    except Exception:  # noqa: BLE001 - an unexpected failure is not a reproduction
        traceback.print_exc()
        sys.exit(2)


def main():
    environment("flag_gems")
    from flag_gems import fused
    found = False
    for rows in (65535, 65536):  # 65536 = 16 sequences x 4096 tokens
        gen = torch.Generator().manual_seed(0)
        logits = torch.randn(rows, 32, generator=gen).cuda()
        labels = torch.randint(0, 32, (rows,), generator=gen).cuda()
        ref = torch.nn.functional.cross_entropy(logits.double(), labels)
        try:
            out = fused.cross_entropy_loss(logits, labels)
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - the finding
            print(f"  {rows} rows: {type(exc).__name__}: {' '.join(str(exc).split())[:160]}")
            found = True
            continue
        found |= compare(f"{rows} rows, mean loss", out, ref, *TOLERANCE[torch.float32])
    print("REPRODUCED: fails past 65535 rows; torch computes it" if found else "NOT REPRODUCED")
    return found


if __name__ == "__main__":
    run(main)
