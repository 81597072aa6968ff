#!/usr/bin/env python3
"""Triton (3.6.0 on sm_90): two language primitives that do not compile.

1. `tl.topk(x, 1, dim=1)` on a [1, 4] block fails in the frontend: `reshape` to [1, 1]
   raises "AttributeError: 'dtype' object has no attribute 'numel'" (CompilationError at
   the topk call). The script also tries k = 2 and a [2, 4] block to show where it holds.
2. `tl.fdiv(x, y)` on float16 and bfloat16 blocks crashes the NVIDIA backend:
   "RuntimeError: PassManager::run failed" in ConvertTritonGPUToLLVM. float32 compiles.

Suite examples (H100, seed 5): test_sort_and_topk_exact[tl_topk-...-float16] with x of
shape (1, 4), k = 1 (every dtype); test_ulp_within_profile_bound[tl_fdiv-...-float16]
and bfloat16. The CPU interpreter of Triton 3.9 runs both.

Exit status: 1 if the finding reproduces, 0 if not, 2 if this machine cannot run it.
"""

import platform
import sys
import traceback

import torch


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
    import triton
    import triton.language as tl
    print(f"python {platform.python_version()}, torch {torch.__version__}, triton "
          f"{triton.__version__}; device: {torch.cuda.get_device_name()}")

    @triton.jit
    def topk_kernel(X, OUT, R: tl.constexpr, C: tl.constexpr, K: tl.constexpr):
        rows, cols = tl.arange(0, R), tl.arange(0, C)
        x = tl.load(X + rows[:, None] * C + cols[None, :])
        tl.store(OUT + rows[:, None] * K + tl.arange(0, K)[None, :], tl.topk(x, K, dim=1))

    @triton.jit
    def fdiv_kernel(X, Y, OUT, N: tl.constexpr):
        offs = tl.arange(0, N)
        tl.store(OUT + offs, tl.fdiv(tl.load(X + offs), tl.load(Y + offs)))

    found = False
    for rows, k in ((1, 1), (1, 2), (2, 1)):
        x = torch.tensor([[-0.0, -3.0, 1.0, -0.0]] * rows, device="cuda")
        out = torch.empty(rows, k, device="cuda")
        try:
            topk_kernel[(1,)](x, out, R=rows, C=4, K=k)
            torch.cuda.synchronize()
            want = torch.topk(x, k, dim=1).values
            print(f"  tl.topk, [{rows}, 4] block, k={k}: {out.tolist()} (torch {want.tolist()})")
        except Exception as exc:  # noqa: BLE001 - the finding
            print(f"  tl.topk, [{rows}, 4] block, k={k}: {type(exc).__name__}: "
                  f"{' '.join(str(exc).split())[-160:]}")
            found = True
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        x, y = (torch.linspace(1, 2, 16, device="cuda", dtype=dtype) for _ in "xy")
        out = torch.empty_like(x)
        try:
            fdiv_kernel[(1,)](x, y, out, N=16)
            torch.cuda.synchronize()
            print(f"  tl.fdiv {dtype}: compiles, max |out - 1| = {float((out.float() - 1).abs().max()):.3g}")
        except Exception as exc:  # noqa: BLE001 - the finding
            print(f"  tl.fdiv {dtype}: {type(exc).__name__}: {' '.join(str(exc).split())[:120]}")
            found = True
    print("REPRODUCED: a primitive fails to compile" if found else "NOT REPRODUCED")
    return found


if __name__ == "__main__":
    run(main)
