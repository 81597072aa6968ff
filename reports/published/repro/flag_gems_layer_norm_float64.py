#!/usr/bin/env python3
"""FlagGems 5.0.2: native_layer_norm and native_layer_norm_backward compute float64 inputs
in float32.

layer_norm_persistent_kernel(_multiline), layer_norm_loop_kernel, layer_norm_backward_kernel
and weight_bias_backward_kernel load every input `.to(tl.float32)`: float64 results carry
float32 rounding (and, for rows with a large mean, float32's cancellation: y is off by
1.6 for rows shifted by 2^27), against torch.testing's float64 bound (rtol 1e-7, atol 1e-7).

Suite examples (float64): forward, shape (1, 1023), values 'wide_range', seed 1941: y
out=4.64499545657947, ref=4.644996547534835 (|out-ref|=1.09e-06); backward, shape (1,),
values 'normal', seed 0: dx=4.6172007728273456e-07 where the exact gradient is 0 (a row
of one element).

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
    eps = 1e-5
    rtol, atol = TOLERANCE[torch.float64]
    # forward: the suite's (1, 1023) wide-range row, weight and bias from seed + 1
    seed = 1941
    x = suite_values((1, 1023), torch.float64, "wide_range", seed)
    gen = torch.Generator().manual_seed(seed + 1)
    w = torch.randn(1023, generator=gen, dtype=torch.float64)
    b = torch.randn(1023, generator=gen, dtype=torch.float64)
    ref = torch.native_layer_norm(x, (1023,), w, b, eps)
    y, mean, rstd = ops.layer_norm(x.cuda(), (1023,), w.cuda(), b.cuda(), eps)
    bad = compare("layer_norm y", y, ref[0], rtol, atol)
    bad |= compare("layer_norm rstd", rstd.reshape(-1), ref[2].reshape(-1), rtol, atol)
    # backward: the suite's one-element row (dx is exactly 0)
    seed = 0
    x = suite_values((1,), torch.float64, "normal", seed)
    gen = torch.Generator().manual_seed(seed + 1)
    w = torch.randn(1, generator=gen, dtype=torch.float64)
    b = torch.randn(1, generator=gen, dtype=torch.float64)
    dy = torch.randn(1, generator=gen, dtype=torch.float64)
    _, mean, rstd = torch.native_layer_norm(x, (1,), w, b, eps)
    xr, wr, br = (t.clone().requires_grad_() for t in (x, w, b))
    refs = torch.autograd.grad(torch.nn.functional.layer_norm(xr, (1,), wr, br, eps), (xr, wr, br), dy)
    outs = ops.layer_norm_backward(dy.cuda(), x.cuda(), (1,), mean.reshape(-1).cuda(),
                                   rstd.reshape(-1).cuda(), w.cuda(), b.cuda(),
                                   output_mask=[True, True, True])
    for name, out, r in zip(("dx", "dweight", "dbias"), outs, refs):
        bad |= compare(f"layer_norm_backward {name}", out, r, rtol, atol)
    print("REPRODUCED: float64 layer norm carries float32 rounding" if bad else "NOT REPRODUCED")
    return bad


if __name__ == "__main__":
    run(main)
