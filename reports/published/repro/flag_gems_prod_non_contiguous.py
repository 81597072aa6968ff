#!/usr/bin/env python3
"""FlagGems 5.0.2: prod (over all elements) is wrong for a tensor with gaps between its
elements.

flag_gems.ops.prod passes the input straight to prod_kernel_mid, which reads
`inp + offset` for offset in 0 .. numel - 1 as if the tensor were contiguous: for a
strided view (every other column, a slice) it multiplies the wrong elements. (prod.dim_int
goes through dim_compress, which copies, and is not affected; nor is a transposed but
dense tensor, whose elements are all there.) torch.prod(view) under flag_gems.enable()
returns the same wrong value.

Found by a direct check (the suite's prod inputs were rebuilt contiguous; the suite now
keeps the drawn layout): x[:, ::2] of an (8, 64) float32 tensor of factors near 1: flag_gems
1.1854, torch 1.3803.

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
    import flag_gems
    environment("flag_gems")
    from flag_gems import ops
    base = torch.exp(0.01 * torch.randn(8, 64, generator=torch.Generator().manual_seed(0)))
    view = base[:, ::2]
    ref = torch.prod(view.double())
    out = ops.prod(base.cuda()[:, ::2])
    bad = compare("prod(x[:, ::2])", out, ref, *TOLERANCE[torch.float32])
    compare("prod(x[:, ::2].contiguous())", ops.prod(base.cuda()[:, ::2].contiguous()), ref,
            *TOLERANCE[torch.float32])
    try:
        with flag_gems.use_gems():
            via_torch = torch.prod(base.cuda()[:, ::2])
        compare("torch.prod(x[:, ::2]) under flag_gems.use_gems()", via_torch, ref,
                *TOLERANCE[torch.float32])
    except Exception as exc:  # noqa: BLE001 - informational
        print(f"  (torch.prod under flag_gems.use_gems() did not run: {type(exc).__name__}: {exc})")
    print("REPRODUCED: the product of a strided view multiplies the wrong elements" if bad
          else "NOT REPRODUCED")
    return bad


if __name__ == "__main__":
    run(main)
