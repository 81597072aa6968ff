#!/usr/bin/env python3
"""FlagGems 5.0.2: prod and prod.dim_int compute float64 inputs in float32.

prod_kernel_mid / prod_kernel_result / prod_kernel load the input `.to(tl.float32)` and
multiply in float32, so a float64 product carries float32 rounding: about 1e-6 relative
for 1023 factors, ten times torch.testing's float64 bound (rtol 1e-7).

Suite example (test_matches_reference[prod_all-flag_gems-...-float64]): shape (1, 1023),
values 'wide_range', seed 1941, mapped to factors near 1 whose product stays finite:
out=0.2897127568721771, ref=0.28971251158589556, |out-ref|=2.45e-07 > 1.29e-07;
prod.dim_int, shape (4, 1025), values 'normal', seed 3000: out=5.584517002105713,
ref=5.584522946076052.

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


def suite_factors(x, gen, dim):
    """The suite's prod inputs: exp(s * (z - mean) + L / n) for x standardised to z, with
    s = min(1/4, 10/sqrt(n)) and L ~ N(0, 1) per reduced slice (finite x only)."""
    z = x.double()
    spread = z.std(unbiased=False)
    z = ((z - z.mean()) / (spread if spread > 0 else 1.0)).clamp(-6.0, 6.0)
    if dim is None:
        n, mean = z.numel(), z.sum() / z.numel()
        level = torch.randn((), generator=gen, dtype=torch.float64)
    else:
        n = z.shape[dim]
        mean = z.sum(dim, keepdim=True) / n
        level = torch.randn(mean.shape, generator=gen, dtype=torch.float64)
    return torch.exp(min(0.25, 10.0 / n ** 0.5) * (z - mean) + level / n).to(x.dtype)


def main():
    environment("flag_gems")
    from flag_gems import ops
    seed = 1941
    x = suite_values((1, 1023), torch.float64, "wide_range", seed)
    rtol, atol = TOLERANCE[torch.float64]
    factors = suite_factors(x, torch.Generator().manual_seed(seed + 1), None).cuda()
    bad = compare("prod(x)", ops.prod(factors), torch.prod(factors.cpu()), rtol, atol)
    # prod.dim_int: shape (4, 1025), values 'normal', seed 3000
    x = suite_values((4, 1025), torch.float64, "normal", 3000)
    rows = suite_factors(x, torch.Generator().manual_seed(3001), -1).cuda()
    bad |= compare("prod_dim(x, -1)", ops.prod_dim(rows, -1), torch.prod(rows.cpu(), -1),
                   rtol, atol)
    print("torch's own CUDA prod, for comparison:")
    compare("torch.prod(x)", torch.prod(factors), torch.prod(factors.cpu()), rtol, atol)
    print("REPRODUCED: float64 products carry float32 rounding" if bad else "NOT REPRODUCED")
    return bad


if __name__ == "__main__":
    run(main)
