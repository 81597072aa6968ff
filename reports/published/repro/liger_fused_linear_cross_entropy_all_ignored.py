#!/usr/bin/env python3
"""Liger-Kernel 0.8.5: the fused linear cross-entropy's "mean" over a batch in which
every token is ignored returns a loss of 0 where torch returns NaN (0 / 0).

torch defines the mean over the tokens not ignored, so a batch with none gives NaN (and
gradients of 0); Liger's `fused_linear_cross_entropy_forward` gives 0.0. A training loop
that takes Liger's loss for torch's sees a perfect batch instead of an empty one.

Suite example (H100, seed 13): fused_linear_cross_entropy, float16 and bfloat16, x of
(31, 32769), one class, labels all 0 with ignore_index = 0, label smoothing 0.1, reduction
"mean" (`test_matches_reference_at_profile_boundaries[...-fused_limit_plus_1]`): out=0.0,
ref=nan.

Exit status: 1 if the finding reproduces, 0 if not, 2 if this machine cannot run it.
"""
import platform
import sys
import traceback

import torch

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
    from liger_kernel.ops.fused_linear_cross_entropy import fused_linear_cross_entropy_forward
    F = torch.nn.functional
    gen = torch.Generator().manual_seed(0)
    tokens, hidden, classes = 31, 4096, 8
    x = torch.randn(tokens, hidden, generator=gen).cuda().half()
    w = (torch.randn(classes, hidden, generator=gen) / hidden ** 0.5).cuda().half()
    labels = torch.full((tokens,), -100, dtype=torch.int64).cuda()  # every token ignored
    loss = fused_linear_cross_entropy_forward(x, w, labels, ignore_index=-100,
                                              reduction="mean")[0]
    ref = F.cross_entropy(x.double() @ w.double().t(), labels, ignore_index=-100,
                          reduction="mean")
    print(f"  loss: liger {loss.item()!r}, torch (float64) {ref.item()!r}")
    differs = not (torch.isnan(loss).item() and torch.isnan(ref).item())
    print("REPRODUCED: liger's mean over no tokens is not torch's NaN" if differs
          else "NOT REPRODUCED")
    return differs


if __name__ == "__main__":
    run(main)
