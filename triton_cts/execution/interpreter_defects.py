"""Known defects of Triton's CPU interpreter, each detected by a probe rather than a version
table, so the suite stops working around a defect as soon as the installed Triton fixes it.

A defect here is a wrong answer the interpreter gives for correct kernels. Interpreter-mode
checks do not draw the inputs a defect affects (a kernel cannot be judged on them), and the
report states which inputs were left out and why.
"""
from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from triton_cts.execution import launches


@triton.jit
def _cast_roundtrip_kernel(X, UP, DOWN, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(X + offs)
    up = x.to(tl.float32)
    tl.store(UP + offs, up)
    tl.store(DOWN + offs, up.to(DOWN.dtype.element_ty))


@functools.cache
def _bf16_subnormals_convert_exactly() -> bool:
    """Whether bf16 subnormals survive bf16 -> float32 -> bf16 in the interpreter.

    Triton's interpreter converts between float formats bit by bit and normalises a
    subnormal input even when the output format has the same exponent range (bf16 and
    float32 do), which scrambles the value (7.5e-39 comes back as 1.5e-39)."""
    tiny = torch.finfo(torch.bfloat16).tiny
    x = torch.tensor([tiny * f for f in (0.5, 0.25, 0.75, 0.125, -0.5, 0.0, 1.0, 2.0)],
                     dtype=torch.bfloat16)
    up = torch.empty(x.shape, dtype=torch.float32)
    down = torch.empty_like(x)
    with launches.interpreted():
        _cast_roundtrip_kernel[(1,)](x, up, down, x.numel())
    return torch.equal(up, x.float()) and torch.equal(down, x)


def excluded_value_kinds(dtype: torch.dtype) -> dict[str, str]:
    """Value kinds (see ``suites.strategies.VALUE_KINDS``) the interpreter cannot be judged
    on for ``dtype``, each with the reason."""
    if dtype is torch.bfloat16 and not _bf16_subnormals_convert_exactly():
        return {"tiny": f"the interpreter of triton {triton.__version__} converts bf16 "
                        "subnormals to float32 wrongly"}
    return {}


def innermost(exc: BaseException) -> BaseException:
    """The first exception of ``exc``'s chain of causes. Triton's interpreter wraps an
    error in an ``InterpreterError`` once per JIT-function level, each quoting the one
    below with ``repr``, so the original message is found intact only at the bottom."""
    seen = {id(exc)}
    while (below := exc.__cause__ or exc.__context__) is not None and id(below) not in seen:
        seen.add(id(below))
        exc = below
    return exc


def raised_in_interpreter(exc: BaseException) -> bool:
    """Whether the deepest Triton frame under ``exc``'s innermost error is the
    interpreter's own code (``triton/runtime/interpreter.py``: its builder or its
    emulation of an op), rather than the language frontend refusing the kernel (whose
    errors hold on a GPU too) or the kernel itself."""
    import traceback
    frames = traceback.extract_tb(innermost(exc).__traceback__)
    deepest = [f.filename.replace("\\", "/") for f in frames
               if "/triton/" in f.filename.replace("\\", "/")]
    return bool(deepest) and deepest[-1].endswith("triton/runtime/interpreter.py")


def interpreter_failure(exc: BaseException, what: str) -> str | None:
    """The gap a probe kernel's failure shows, "the interpreter of triton X fails
    ``what`` (error)", where the interpreter's own code raised ``exc``; None where the
    language frontend or the kernel did (that holds on a GPU too, and is the check's)."""
    if not raised_in_interpreter(exc):
        return None
    return f"the interpreter of triton {triton.__version__} fails {what} ({innermost(exc)!r})"


def known_defect(exc: BaseException) -> str | None:
    """Why ``exc``, raised while interpreting a kernel, is a defect of the interpreter
    rather than of the kernel, or None. Triton 3.6's interpreter cannot build bfloat16
    constants (its builder has no ``get_bf16``), so any kernel that makes one fails; its
    own ``to_ir`` has no type for AMD's float8 formats (fp8e4b8, fp8e5b16), so any kernel
    that computes in one fails; and its ``tl.max``/``tl.min`` with indices reduce with
    numpy's ``nanargmax``, which raises on a row holding only NaN."""
    inner = innermost(exc)
    if isinstance(inner, AttributeError) and "InterpreterBuilder" in str(inner) \
            and "get_bf16" in str(inner):
        return (f"the interpreter of triton {triton.__version__} cannot build bfloat16 "
                "constants (InterpreterBuilder.get_bf16 is missing)")
    if isinstance(inner, ValueError) and str(inner) == "All-NaN slice encountered" \
            and raised_in_interpreter(exc):
        return (f"the interpreter of triton {triton.__version__} raises on an arg-max or "
                "arg-min over a row of NaN only (it reduces with numpy's nanargmax)")
    if isinstance(inner, ValueError) and str(inner).startswith("fail to convert ") \
            and str(inner).endswith(" to ir type") and raised_in_interpreter(exc):
        return (f"the interpreter of triton {triton.__version__} has no IR type for "
                f"{str(inner).removeprefix('fail to convert ').removesuffix(' to ir type')}")
    return None
