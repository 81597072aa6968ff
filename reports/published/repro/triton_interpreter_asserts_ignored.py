#!/usr/bin/env python3
"""Triton (3.6.0 and 3.9.0, the CPU interpreter): `tl.device_assert` and the int32 overflow
sanitizer never fire under `TRITON_INTERPRET=1`, even with `TRITON_DEBUG=1`.

`semantic.device_assert` emits the assert only where the builder's `options.debug` is set;
the interpreter's builder is made with `InterpreterOptions()`, whose `debug` is False, and
nothing sets it from `TRITON_DEBUG` (or from `@triton.jit(debug=True)`). The overflow
sanitizer (`InterpreterOptions.sanitize_overflow`, on by default) still builds an int64
range test for every integer add, sub and mul and hands it to that assert: its cost is
paid and nothing is checked. Compiled for a GPU, `TRITON_DEBUG=1` turns device asserts on
(triton-lang/triton#1448).

The script runs, on the CPU, a kernel that asserts its input is negative (it is not) and
adds 2147483000 to int32 values of 1000 (it wraps), with TRITON_DEBUG=1.

Suite: found while profiling the interpreter checks; tests/test_interpreter_defects.py
keeps watch.

Exit status: 1 if the finding reproduces, 0 if not, 2 if this machine cannot run it.
"""

import os
import platform
import sys

os.environ["TRITON_INTERPRET"] = "1"
os.environ["TRITON_DEBUG"] = "1"


def main():
    try:
        import torch
        import triton
        import triton.language as tl
    except ImportError as exc:
        print(f"cannot run: {exc}")
        return 2
    print(f"python {platform.python_version()}, torch {torch.__version__}, triton "
          f"{triton.__version__}; TRITON_INTERPRET=1 TRITON_DEBUG=1, CPU only")

    @triton.jit
    def kernel(X, N: tl.constexpr):
        offs = tl.arange(0, N)
        x = tl.load(X + offs)
        tl.device_assert(x < 0, "x must be negative")
        tl.store(X + offs, x + 2147483000)  # int32: 1000 + 2147483000 wraps

    x = torch.full((4,), 1000, dtype=torch.int32)
    try:
        kernel[(1,)](x, 4)
    except Exception as exc:  # noqa: BLE001 - an assert that fired is the expected behaviour
        print(f"the interpreter raised {type(exc).__name__}: {exc}")
        print("not reproduced: the assert (or the overflow check) fired")
        return 0
    print(f"no assert fired; the stored values wrapped: {x.tolist()}")
    print("reproduced: tl.device_assert and the overflow sanitizer are inert in the interpreter")
    return 1


if __name__ == "__main__":
    sys.exit(main())
