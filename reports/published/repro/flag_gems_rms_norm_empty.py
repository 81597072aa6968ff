#!/usr/bin/env python3
"""FlagGems 5.0.2: the RMS norm forward and backward fail to compile for an empty last dim.

rms_norm_forward and rms_norm_backward size the block as triton.next_power_of_2(N), which
is 0 for N = 0, and launch rms_norm_kernel / rms_norm_grad_dx_kernel anyway:
tl.arange(0, 0) fails with "CompilationError: ... arange's end argument must be greater
than the start argument". torch.nn.functional.rms_norm returns an empty tensor.

Suite example (test_empty_tensors[rms_norm-flag_gems-...] and [rms_norm_backward-...]):
shape (0,), float32.

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
    from flag_gems.ops.rms_norm import rms_norm_backward, rms_norm_forward
    eps, failing = 1e-6, []
    for shape in ((0,), (3, 0)):
        x = torch.empty(shape, device="cuda")
        w = torch.empty(0, device="cuda")
        want = torch.nn.functional.rms_norm(x, (0,), w, eps)
        try:
            y, inv_rms = rms_norm_forward(x, (0,), w, eps)
            print(f"  rms_norm_forward on {shape}: y of shape {tuple(y.shape)} (torch: {tuple(want.shape)})")
        except Exception as exc:  # noqa: BLE001 - the finding
            print(f"  rms_norm_forward on {shape}: {type(exc).__name__}: "
                  f"{' '.join(str(exc).split())[-160:]}; torch returns shape {tuple(want.shape)}")
            failing.append(f"forward {shape}")
        try:
            inv = torch.empty(x.shape[:-1], device="cuda").reshape(-1)
            dx, dw = rms_norm_backward(torch.empty_like(x), x, inv, (0,), w, eps)
            print(f"  rms_norm_backward on {shape}: dx of shape {tuple(dx.shape)}")
        except Exception as exc:  # noqa: BLE001 - the finding
            print(f"  rms_norm_backward on {shape}: {type(exc).__name__}: "
                  f"{' '.join(str(exc).split())[-160:]}")
            failing.append(f"backward {shape}")
    if failing:
        print(f"REPRODUCED: {', '.join(failing)} raise on an empty last dim")
    else:
        print("NOT REPRODUCED")
    return bool(failing)


if __name__ == "__main__":
    run(main)
