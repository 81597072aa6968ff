#!/usr/bin/env python3
"""Liger-Kernel 0.8.5: the layer-norm backward's dweight/dbias over millions of rows err
beyond the float32 bound and far beyond torch's float32 error.

The weight and bias gradients sum one term per row. Over 2097153 rows of 4 columns
(float32), Liger's sums miss the float64 sum by more than the suite's float32 bound,
about 15x what torch's own float32 layer-norm backward errs on the same input.

Suite example (H100, seeds 3 and 4): layer_norm_backward float32, shape (2097153, 4),
`many_short_rows` boundary: dbias[3] = -355.82434 against -355.82660, 1.54x the bound;
torch's float32 result 0.095x.

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
    environment("liger_kernel")
    from liger_kernel.ops.layer_norm import layer_norm_backward, layer_norm_forward
    gen = torch.Generator().manual_seed(0)
    rows, n = 2097153, 4
    x, dy = (torch.randn(rows, n, generator=gen).cuda() for _ in range(2))
    w, b = (torch.randn(n, generator=gen).cuda() for _ in range(2))
    _, _, mean, rstd, _, _ = layer_norm_forward(x, w, b, 1e-6)
    _, dw, db = layer_norm_backward(dy, x, w, b, mean.view(-1), rstd.view(-1))
    xhat = (x.double() - mean.double().view(-1, 1)) * rstd.double().view(-1, 1)
    dw_ref, db_ref = (dy.double() * xhat).sum(0), dy.double().sum(0)
    dw_torch, db_torch = (dy * ((x - mean.view(-1, 1)) * rstd.view(-1, 1))).sum(0), dy.sum(0)
    worse = False
    for name, ours, theirs, ref in (("dweight", dw, dw_torch, dw_ref), ("dbias", db, db_torch, db_ref)):
        e_ours = (ours.double() - ref).abs().max().item()
        e_torch = (theirs.double() - ref).abs().max().item()
        print(f"  {name}: liger errs by {e_ours:.3g}, torch's float32 sum by {e_torch:.3g} "
              f"(|ref| up to {ref.abs().max().item():.4g})")
        worse |= e_ours > 2 * e_torch and e_ours > 1.3e-6 * ref.abs().max().item()
    print("REPRODUCED: liger's float32 sums err by more than twice torch's and the float32 "
          "rtol" if worse else "NOT REPRODUCED")
    return worse

if __name__ == "__main__":
    run(main)
