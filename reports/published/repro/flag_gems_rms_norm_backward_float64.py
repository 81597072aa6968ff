#!/usr/bin/env python3
"""FlagGems 5.0.2: the RMS norm backward (flag_gems.ops.rms_norm.rms_norm_backward, behind
torch.nn.functional.rms_norm's gradient) computes float64 inputs in float32.

rms_norm_grad_dx_kernel and rms_norm_grad_dw_kernel load x, dy and inv_rms `.to(tl.float32)`
and dweight is summed in a float32 partial buffer: float64 gradients carry float32
rounding, beyond torch.testing's float64 bound (rtol 1e-7, atol 1e-7). (The forward keeps
float64 for y, but returns inv_rms in float32 for every input dtype.)

Suite example (test_matches_reference[rms_norm_backward-flag_gems-...-float64]): shape
(1, 291, 5), values 'large_offset', strided: dweight out=-12.101482391357422,
ref=-12.101478455738539 (|out-ref|=3.94e-06).

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
    from flag_gems.ops.rms_norm import rms_norm_backward
    eps, seed, shape = 1e-6, 15694869, (1, 291, 5)
    x = suite_values(shape, torch.float64, "large_offset", seed)
    gen = torch.Generator().manual_seed(seed + 1)
    w = torch.randn(shape[-1], generator=gen, dtype=torch.float64)
    dy = torch.randn(shape, generator=gen, dtype=torch.float64)
    rstd = torch.rsqrt(x.pow(2).mean(-1) + eps)
    xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
    y = xr * torch.rsqrt(xr.pow(2).mean(-1, keepdim=True) + eps) * wr
    refs = torch.autograd.grad(y, (xr, wr), dy)
    outs = rms_norm_backward(dy.cuda(), x.cuda(), rstd.reshape(-1).cuda(), (shape[-1],),
                             w.cuda(), eps)
    rtol, atol = TOLERANCE[torch.float64]
    bad = False
    for name, out, r in zip(("dx", "dweight"), outs, refs):
        bad |= compare(name, out, r, rtol, atol)
    print("REPRODUCED: float64 RMS norm gradients carry float32 rounding" if bad else "NOT REPRODUCED")
    return bad


if __name__ == "__main__":
    run(main)
