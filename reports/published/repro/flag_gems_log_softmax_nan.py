#!/usr/bin/env python3
"""FlagGems 5.0.2: log_softmax ignores NaN in the row's maximum and sum.

torch.log_softmax returns NaN for every element of a row that holds a NaN. flag_gems'
log_softmax_kernel keeps its running maximum with tl.maximum, which drops NaN, and its
running sum with tl.where(m_new == -inf, ...): only the NaN element itself comes out NaN,
the rest of the row is finite (softmax, by contrast, propagates NaN).

Seen once the 0-d failure no longer hid the rest: every dtype, on the suite's
'with_specials' values, e.g. shape (3, 33) float32: 32 of 99 elements finite where torch
gives NaN (out=-2.3368, ref=nan).

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
    bad = False
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        x = torch.tensor([[0.5, float("nan"), 1.0, -2.0], [0.1, 0.2, 0.3, 0.4]], dtype=dtype,
                         device="cuda")
        out = ops.log_softmax(x, -1)
        want = torch.log_softmax(x.double().cpu(), -1)
        print(f"{str(dtype).removeprefix('torch.')}: flag_gems row 0 {out[0].tolist()}; torch "
              f"{want[0].tolist()}")
        bad |= compare("log_softmax", out, want, *TOLERANCE[dtype])
    print("REPRODUCED: rows with a NaN come out finite" if bad else "NOT REPRODUCED")
    return bad


if __name__ == "__main__":
    run(main)
