#!/usr/bin/env python3
"""FlagGems 5.0.2: float64 softmax and RMS norm fail to compile once a row no longer fits
one block.

The looped kernels (rows longer than the fused block) start their running max / row
accumulator as float32 and assign float64 values to it inside the loop; Triton rejects
that: "CompilationError: Loop-carried variable m has initial type fp32 but is
re-assigned to fp64 in loop". torch handles float64 rows of any length.

Suite examples (H100, device run at the profile boundaries): softmax float64 rows of
2097153 elements (`long_rows`); rms_norm float64 rows of 8192 elements (`fused_limit`,
(128, 8192)).

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
    from flag_gems import ops
    from flag_gems.ops.rms_norm import rms_norm_forward
    gen = torch.Generator().manual_seed(0)
    cases = [("softmax", n, lambda x: ops.softmax(x, -1),
              lambda x: torch.softmax(x, -1)) for n in (4096, 65537, 2097153)]
    cases += [("rms_norm", n, lambda x: rms_norm_forward(x, (x.shape[-1],), torch.ones(
              x.shape[-1], dtype=x.dtype, device=x.device), 1e-6)[0],
              lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))
              for n in (4096, 8192, 16384)]
    failing = []
    for name, n, call, ref in cases:
        x = torch.randn(2, n, generator=gen, dtype=torch.float64).cuda()
        try:
            err = (call(x) - ref(x)).abs().max().item()
            print(f"  {name} float64 rows of {n}: ok (max |out - ref| = {err:.3g})")
        except Exception as exc:  # noqa: BLE001 - the finding
            text = " ".join(str(exc).split())
            print(f"  {name} float64 rows of {n}: {type(exc).__name__}: {text[:300]}")
            failing.append(f"{name}/{n}")
    print(("REPRODUCED: " + ", ".join(failing) + " raise; torch computes them")
          if failing else "NOT REPRODUCED")
    return bool(failing)

if __name__ == "__main__":
    run(main)
