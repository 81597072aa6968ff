"""The interpreter-defect probes agree with what real kernels see, and only the inputs a
detected defect affects are left out of interpreter-mode checks."""
import pytest
import torch

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
        reason = modes._interpreter_blocker()
        assert (reason is not None) == blocked, (triton_v, numpy_v, reason)
        if blocked:
            assert "numpy 2.5.2" in reason and "numpy<2.5" in reason
