#!/usr/bin/env python3
"""FlagGems 5.0.2: the fused LLM ops compute float64 in float32.

`flag_gems.fused.silu_and_mul` and `gelu_and_mul` (SwiGLU, GEGLU) return float64 for
float64 inputs but compute in float32: errors around 1e-6 where float64 gives 1e-16, out
of torch's float64 tolerance (rtol 1e-7, atol 1e-7). `cross_entropy_loss` writes its loss
into a float32 buffer for float64 logits. Same family as F2, F4, F5, F7, F8 and F12.

Suite example (H100): test_matches_reference[swiglu-flag_gems-float64] (1, 75, 64, 185)
'normal', 2527 of 8388612 elements out at many_short_rows; geglu, swiglu_backward,
geglu_backward and cross_entropy the same.

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
    gen = torch.Generator().manual_seed(0)
    a, b = (torch.randn(2044, 513, generator=gen, dtype=torch.float64).cuda() for _ in "ab")
    found = False
    found |= compare("silu_and_mul float64", fused.silu_and_mul(a, b),
                     torch.nn.functional.silu(a) * b, *TOLERANCE[torch.float64])
    found |= compare("gelu_and_mul float64 (tanh)", fused.gelu_and_mul(a, b, approximate="tanh"),
                     torch.nn.functional.gelu(a, approximate="tanh") * b, *TOLERANCE[torch.float64])
    labels = torch.randint(0, 513, (2044,), generator=gen).cuda()
    loss = fused.cross_entropy_loss(a * 8, labels, reduction="none")
    print(f"  cross_entropy_loss float64 logits: loss dtype {loss.dtype}")
    found |= compare("cross_entropy_loss float64, per row", loss,
                     torch.nn.functional.cross_entropy(a * 8, labels, reduction="none"),
                     *TOLERANCE[torch.float64])
    print("REPRODUCED: float64 computed in float32" if found else "NOT REPRODUCED")
    return found


if __name__ == "__main__":
    run(main)
