#!/usr/bin/env python3
"""Triton (3.6.0, AMD targets): a float32 `tl.atomic_cas` does not compile.

The AMD backend lowers it to `llvm.cmpxchg` on f32 operands, which LLVM refuses ("'llvm.cmpxchg'
op operand #1 must be signless integer or LLVM pointer type, but got 'f32'"), and compilation
fails with "RuntimeError: PassManager::run failed" in ConvertTritonAMDGPUToLLVM. The same
kernel on int32 compiles. No AMD GPU is needed: the script compiles for gfx942 (and the other
AMD targets) on any machine with Triton's HIP backend.

Suite: test_compiles_within_limits[tl_atomic_cas-reference-amd-gfx942-compile] (and gfx90a,
gfx950, gfx1100, gfx1201) under triton 3.6.0; triton 3.9.0 compiles it.

Exit status: 1 if the finding reproduces, 0 if not, 2 if this machine cannot run it.
"""

import platform
import sys
import traceback


def main():
    import torch
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    print(f"python {platform.python_version()}, torch {torch.__version__}, triton "
          f"{triton.__version__}; compiled for AMD targets, no GPU used")

    @triton.jit
    def cas_kernel(P, CMP, V, OUT, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        old = tl.atomic_cas(P + offs, tl.load(CMP + offs), tl.load(V + offs))
        tl.store(OUT + offs, old)

    found = False
    for arch, warp in (("gfx942", 64), ("gfx90a", 64), ("gfx1100", 32)):
        for dtype in ("fp32", "i32"):
            src = ASTSource(fn=cas_kernel, signature={"P": f"*{dtype}", "CMP": f"*{dtype}",
                                                      "V": f"*{dtype}", "OUT": f"*{dtype}",
                                                      "BLOCK": "constexpr"},
                            constexprs={"BLOCK": 64})
            try:
                triton.compile(src, target=GPUTarget("hip", arch, warp))
                print(f"{arch} {dtype}: compiles")
            except Exception as exc:  # noqa: BLE001 - the compile failure is the finding
                message = " ".join(str(exc).split())[:160]
                print(f"{arch} {dtype}: FAILS: {type(exc).__name__}: {message}")
                found |= dtype == "fp32"
    return found


if __name__ == "__main__":
    try:
        sys.exit(1 if main() else 0)
    except ImportError as exc:
        print(f"cannot import triton's HIP backend: {exc}")
        sys.exit(2)
    except Exception:  # noqa: BLE001 - an unexpected failure is not a reproduction
        traceback.print_exc()
        sys.exit(2)
