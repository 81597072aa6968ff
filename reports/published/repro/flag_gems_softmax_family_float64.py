#!/usr/bin/env python3
"""FlagGems 5.0.2: log_softmax and _softmax_backward_data compute float64 inputs in float32.

log_softmax_kernel loads `.to(tl.float32)` (its source says "TODO: consider float64") and
the softmax backward kernels load output and grad_output `.to(tl.float32)`: float64
results carry float32 rounding, beyond torch.testing's float64 bound (rtol 1e-7, atol
1e-7). (softmax itself keeps float64.)

Seen once the 0-d failure no longer hid the rest: log_softmax, shape (1, 5), values
'large_offset' (seed 1001): out=-1.50718355178833, ref=-1.506929068263625; softmax
backward, shape (1, 291, 5), values 'wide_range' (seed 5002): out=0.0012381563428789377,
ref=0.0012379311712513435.

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


def suite_values(shape, dtype, kind, seed):
    """The conformance suite's input values of this kind (normal, large_offset: mean 1e3 to
    1e4 with spread 0.1, wide_range: magnitudes 1e-4 to 1e4, ties), made in float64 from
    the seed and rounded to dtype."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=gen, dtype=torch.float64)
    if kind == "large_offset":
        x = 1e3 * (1 + 9 * torch.rand((), generator=gen, dtype=torch.float64)) + x * 1e-1
    elif kind == "wide_range":
        x = x * torch.pow(10.0, torch.empty(shape, dtype=torch.float64).uniform_(-4, 4, generator=gen))
    elif kind == "ties":
        x = torch.round(x.clamp(-2.5, 2.5))
    finfo = torch.finfo(dtype)
    return x.clamp(-finfo.max, finfo.max).to(dtype)


def main():
    environment("flag_gems")
    from flag_gems import ops
    rtol, atol = TOLERANCE[torch.float64]
    x = suite_values((1, 5), torch.float64, "large_offset", 1001)
    bad = compare("log_softmax", ops.log_softmax(x.cuda(), -1), torch.log_softmax(x, -1), rtol, atol)
    seed, shape = 5002, (1, 291, 5)
    x = suite_values(shape, torch.float64, "wide_range", seed)
    y = torch.softmax(x, -1)
    dy = torch.randn(shape, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64)
    ref = y * (dy - (dy * y).sum(-1, keepdim=True))
    bad |= compare("softmax_backward", ops.softmax_backward(dy.cuda(), y.cuda(), -1, y.dtype), ref,
                   rtol, atol)
    compare("softmax (for comparison: float64 kept)", ops.softmax(x.cuda(), -1), y, rtol, atol)
    print("REPRODUCED: float64 results carry float32 rounding" if bad else "NOT REPRODUCED")
    return bad


if __name__ == "__main__":
    run(main)
