#!/usr/bin/env python3
"""FlagGems 5.0.2: cross_entropy_loss has no gradient for non-contiguous logits.

`CrossEntropyLoss.forward` replaces its input by `inp.contiguous()` and saves it only
`if inp.requires_grad`: for logits that are not contiguous (a transposed view, the
logits of a tied embedding read column-major), the copy made inside the autograd
function does not require grad, nothing is saved, and `backward` raises "ValueError: not
enough values to unpack (expected 3, got 0)". Contiguous logits of the same values work.

Suite example (H100): test_matches_reference[cross_entropy-flag_gems], float16, bfloat16
and float32, shape (211, 207) 'tiny' layout 'transposed'.

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
    base = torch.randn(64, 128, generator=gen).cuda()
    labels = torch.randint(0, 64, (128,), generator=gen).cuda()
    want = base.t().double().requires_grad_()
    torch.nn.functional.cross_entropy(want, labels).backward()
    found = False
    for name, logits in (("contiguous", base.t().contiguous()), ("transposed view", base.t())):
        x = logits.clone().requires_grad_() if name == "contiguous" else \
            base.clone().requires_grad_()
        inp = x if name == "contiguous" else x.t()
        try:
            fused.cross_entropy_loss(inp, labels).backward()
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - the finding
            print(f"  {name} (128, 64) logits, backward: {type(exc).__name__}: {exc}")
            found = True
            continue
        grad = x.grad if name == "contiguous" else x.grad.t()
        found |= compare(f"{name} (128, 64) logits, gradient", grad, want.grad,
                         *TOLERANCE[torch.float32])
    print("REPRODUCED: no gradient for non-contiguous logits" if found else "NOT REPRODUCED")
    return found


if __name__ == "__main__":
    run(main)
