"""The interpreter-defect probes agree with what real kernels see, and only the inputs a
detected defect affects are left out of interpreter-mode checks."""
import pytest
import torch
import triton
import triton.language as tl

from suites import strategies as hh
from triton_cts.execution import interpreter_defects, launches
from triton_cts.profiles import load_profile
from tests.helpers import CHECKOUT
from kernels.reductions import max_dim


def test_bf16_probe_matches_a_real_kernel():
    """max of a single bf16 subnormal is the value itself: the probe must report a defect
    exactly when the interpreter gets this wrong."""
    profile = load_profile(CHECKOUT / "vendor_profiles" / "nvidia-sm90.toml")
    x = hh.make_values((33, 1), torch.bfloat16, "tiny", seed=33885194)
    with launches.interpreted():
        values, _ = max_dim(x, profile=profile)
    kernel_correct = torch.equal(values, x[:, 0])
    excluded = interpreter_defects.excluded_value_kinds(torch.bfloat16)
    assert ("tiny" in excluded) == (not kernel_correct), excluded


def test_only_known_kinds_are_excluded():
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int32):
        excluded = interpreter_defects.excluded_value_kinds(dtype)
        assert set(excluded) <= set(hh.VALUE_KINDS)
        assert all(reason for reason in excluded.values())
    assert interpreter_defects.excluded_value_kinds(torch.float32) == {}


def _raised_through(levels: int, innermost: BaseException) -> BaseException:
    """``innermost`` wrapped as Triton 3.6's interpreter does: an ``InterpreterError``
    quoting the one below with ``repr``, raised from it, ``levels`` times (one per
    JIT-function call between the kernel and the failing builder call)."""
    from triton.runtime.errors import InterpreterError
    exc = innermost
    for _ in range(levels):
        try:
            raise InterpreterError(repr(exc)) from exc
        except InterpreterError as wrapped:
            exc = wrapped
    return exc


@pytest.mark.parametrize("levels", [1, 2, 3])
def test_missing_bf16_builder_is_an_interpreter_defect(levels):
    """At two levels (a kernel calling a JIT helper that makes a bf16 constant, as the
    max/prod reductions do) the quoted message is escaped twice: the check must find the
    innermost error, not match text."""
    missing = AttributeError("'InterpreterBuilder' object has no attribute 'get_bf16'")
    exc = _raised_through(levels, missing)
    assert "bfloat16 constants" in interpreter_defects.known_defect(exc)


def _raised_in(filename: str, exc: BaseException) -> BaseException:
    """``exc`` raised by a function whose code lives in ``filename`` (as Triton's frames do)."""
    namespace: dict = {}
    exec(compile("def fail(e):\n    raise e\n", filename, "exec"), namespace)
    try:
        namespace["fail"](exc)
    except type(exc) as raised:
        return raised


@pytest.mark.parametrize("where, defect", [("triton/runtime/interpreter.py", True),
                                           ("triton/language/semantic.py", False)])
def test_a_missing_ir_type_is_a_defect_only_inside_the_interpreter(where, defect):
    """Triton 3.6's interpreter has its own ``to_ir`` without AMD's float8 types; the same
    message from the language frontend would hold on a GPU too."""
    inner = _raised_in(f"/site-packages/{where}", ValueError("fail to convert fp8e4b8 to ir type"))
    exc = _raised_through(2, inner)
    assert interpreter_defects.raised_in_interpreter(exc) == defect
    why = interpreter_defects.known_defect(exc)
    assert (why is not None and "no IR type for fp8e4b8" in why) == defect


def test_an_arg_max_over_a_row_of_nan_is_an_interpreter_defect():
    """Triton's interpreter reduces ``tl.max`` with indices through numpy's nanargmax,
    which raises on a row holding only NaN: the size-1 reduction meets it on any NaN."""
    from kernels.language.scans import size1_reduce
    profile = load_profile(CHECKOUT / "vendor_profiles" / "nvidia-sm90.toml")
    x = torch.tensor([1.0, float("nan"), 2.0])
    try:
        with launches.interpreted():
            size1_reduce(x, profile=profile)
    except Exception as exc:  # noqa: BLE001 - the interpreter's error is what is judged
        why = interpreter_defects.known_defect(exc)
        assert why is not None and "row of NaN only" in why, repr(exc)
    else:
        pytest.skip(f"triton {triton.__version__}'s interpreter reduces a row of NaN")
    # the same message raised outside the interpreter (numpy called by a kernel's host
    # code, say) is the caller's
    outside = _raised_through(2, _raised_in("/site-packages/numpy/lib/_nanfunctions_impl.py",
                                            ValueError("All-NaN slice encountered")))
    assert interpreter_defects.known_defect(outside) is None


def test_other_errors_are_not_interpreter_defects():
    assert interpreter_defects.known_defect(ValueError("wrong answer")) is None
    assert interpreter_defects.known_defect(
        _raised_through(2, AttributeError("'Tensor' object has no attribute 'get_bf16x'"))) \
        is None
    # the text alone, quoted in a message, is not the defect
    assert interpreter_defects.known_defect(
        RuntimeError("'InterpreterBuilder' object has no attribute 'get_bf16'")) is None


def test_a_scalar_tensor_indexes_from_a_one_element_array():
    """Triton's interpreter up to 3.6 made ``tensor.__index__`` ``int(data)`` on a
    one-element array, which numpy 2.5 refuses (every kernel with a tensor-valued loop
    bound failed); the harness's patch squeezes the array first, inside Triton's scope."""
    import operator
    import types
    import warnings

    import numpy as np
    from triton.runtime.interpreter import _LangPatchScope

    class Tensor:
        pass

    def triton_36_patch(tensor, scope):
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data))
    scope = _LangPatchScope()
    launches._index_squeezed(triton_36_patch)(Tensor, scope)
    t = Tensor()
    t.handle = types.SimpleNamespace(data=np.array([7], dtype=np.int32))
    with warnings.catch_warnings():  # numpy 2.4 warns where 2.5 raises
        warnings.simplefilter("error", DeprecationWarning)
        assert operator.index(t) == 7 and list(range(t)) == list(range(7))
    scope.restore()
    assert not hasattr(Tensor, "__index__")


def test_interpreter_mode_is_blocked_only_where_it_was_not_verified(monkeypatch):
    """Triton 3.6 runs the interpreter with numpy 2.4 (the index patch above); numpy 2.5
    is reported as not supported with it, later Triton with either."""
    import numpy
    import triton

    from triton_cts.execution import modes
    for triton_v, numpy_v, blocked in (("3.6.0", "2.4.6", False), ("3.6.0", "2.5.2", True),
                                       ("3.9.0", "2.5.2", False)):
        monkeypatch.setattr(triton, "__version__", triton_v)
        monkeypatch.setattr(numpy, "__version__", numpy_v)
        reason = modes.interpreter_blocker()
        assert (reason is not None) == blocked, (triton_v, numpy_v, reason)
        if blocked:
            assert "numpy 2.5.2" in reason and "numpy<2.5" in reason


# ---- the language primitives' probes agree with the checked kernels ----------------------
_SM90 = CHECKOUT / "vendor_profiles" / "nvidia-sm90.toml"
_FLOATS = [torch.bfloat16, torch.float16, torch.float32, torch.float64]


@pytest.mark.parametrize("function", ["fma", "fdiv"])
@pytest.mark.parametrize("dtype", _FLOATS, ids=str)
def test_math_probe_matches_the_checked_kernel(function, dtype):
    """The probe reports a gap exactly when the checked launcher, interpreted, gets the
    probe's inputs (whose answers are exact) wrong."""
    from kernels.language import math as kmath
    from triton_cts.ops.language import math as lm
    columns, want = lm._PROBES[function](dtype)
    inputs = [torch.tensor(c, dtype=dtype) for c in columns]
    with launches.interpreted():
        out = getattr(kmath, function)(*inputs, profile=load_profile(_SM90))
    kernel_correct = out.double().tolist() == want
    assert (lm.interpreter_gap(function, dtype) is None) == kernel_correct


@pytest.mark.parametrize("dtype", [torch.int32, torch.uint32, torch.int64], ids=str)
def test_umulhi_probe_matches_the_checked_kernel(dtype):
    from kernels.language import integers as kint
    from triton_cts.ops.language import integers as li
    low = torch.iinfo(dtype).min
    x = torch.tensor([li.wrap(-1, dtype), low, 12345], dtype=dtype)
    y = torch.tensor([1, 2, -7 if dtype != torch.uint32 else 7], dtype=dtype)
    try:
        with launches.interpreted():
            high = kint.umulhi(x, y, profile=load_profile(_SM90))
    except Exception as exc:  # noqa: BLE001 - an interpreter failure counts as wrong
        if not interpreter_defects.raised_in_interpreter(exc):
            raise
        kernel_correct = False
    else:
        kernel_correct = high.tolist() == [li.umulhi(a, b, dtype)
                                           for a, b in zip(x.tolist(), y.tolist())]
    assert (li.interpreter_gap("umulhi", dtype) is None) == kernel_correct


@pytest.mark.parametrize("op", ["add", "max", "min", "xchg"])
@pytest.mark.parametrize("dtype", [torch.int32, torch.float32, torch.float64], ids=str)
def test_atomic_probe_matches_the_checked_kernel(op, dtype):
    """33 lanes of negative values on a negative slot, as the suite's case that found
    Triton 3.6's float64 atomic_min defect."""
    from kernels.language import atomics as katom
    from triton_cts.ops.language import atomics as la
    values = -torch.arange(1, 34, dtype=torch.float64).mul(1.5).to(dtype)
    initial = torch.tensor([-7], dtype=dtype)
    try:
        with launches.interpreted():
            final, old = katom.atomic(values, initial, op=op, profile=load_profile(_SM90))
    except Exception as exc:  # noqa: BLE001 - an interpreter failure counts as wrong
        if not interpreter_defects.raised_in_interpreter(exc):
            raise
        kernel_correct = False
    else:
        kernel_correct = la.linearization_problem(
            la.AtomicPrimitive(op, la._apply(op)), initial.item(), final[0][0].item(),
            values.tolist(), old[0].tolist(), None, dtype) is None
    assert (la.interpreter_gap(op, dtype) is None) == kernel_correct


def test_a_refusal_of_the_language_is_not_an_interpreter_gap():
    """The frontend refuses int8 atomics on every target (a GPU too): that is no gap of
    the interpreter, so the check runs and reports it, where the interpreter's own
    'Unsupported data type' for bf16 atomic_add is one."""
    from triton_cts.ops.language import atomics as la
    assert la.interpreter_gap("add", torch.int8) is None
    assert "Unsupported data type" in la.interpreter_gap("add", torch.bfloat16)


@triton.jit
def _add_scalar_kernel(X, OFFSET, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(X + offs, tl.load(X + offs) + OFFSET)


def test_the_interpreter_overflow_sanitizer_reports_nothing_so_it_is_off():
    """Triton's interpreter builds an int64 range test for every int32 add, but the
    assert it feeds never checks there (its builder's ``options.debug`` is False): with
    Triton's own options, sanitizer on, an add that wraps runs without an error. So the
    harness turns the sanitizer off (launches._without_overflow_sanitizer) and loses no
    detection; a Triton whose sanitizer does report fails this test."""
    from triton.runtime import interpreter as triton_interpreter
    builder = triton_interpreter.interpreter_builder
    assert builder.options.sanitize_overflow is False
    ours = builder.options
    builder.options = triton_interpreter.InterpreterOptions()
    assert builder.options.sanitize_overflow
    x = torch.full((4,), 1000, dtype=torch.int32)
    try:
        with launches.interpreted():
            _add_scalar_kernel[(1,)](x, 2**31 - 648, 4)
    finally:
        builder.options = ours
    assert x.tolist() == [1000 + 2**31 - 648 - 2**32] * 4  # wrapped, and not reported
