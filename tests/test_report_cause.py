"""The whole cause of a failure in its record: the full exception message (Triton's
multi-line CompilationError body included), the last frames of the traceback, and a reason
that names the error rather than its location."""
import json

import pytest

from tests.helpers import needs_interpreter, run_pytest
from triton_cts.results.status import (MESSAGE_LIMIT, TRACEBACK_FRAMES, TRACEBACK_LIMIT,
                                       Status, bounded, cause_line, classify_phase,
                                       failure_message, traceback_tail)

# the message of the tl.topk compile failure on Triton 3.6 (F24), as pytest's crash line
TOPK = ("triton.compiler.errors.CompilationError: at 7:29:\n"
        "def _topk_kernel(X, Y, K: tl.constexpr, M: tl.constexpr, N: tl.constexpr):\n"
        "    x = tl.load(X + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :])\n"
        "    y = tl.topk(x, K, dim=1)\n"
        "                             ^\n"
        "AttributeError(\"'dtype' object has no attribute 'numel'\")\n"
        "while checking tl_topk[reference] on nvidia-sm90 (device), float16\n"
        "reproduce: pytest 'suites/test_language_ops.py::test_sort_and_topk_exact[...]'")


def test_a_compilation_error_reason_names_the_error_after_its_location():
    status, reason = classify_phase("call", "failed", TOPK, TOPK)
    assert status is Status.FAIL
    assert reason == ("triton.compiler.errors.CompilationError: at 7:29: "
                      "AttributeError(\"'dtype' object has no attribute 'numel'\")")
    # other messages keep their first line, whole up to the reason limit
    numeric = "AssertionError: gelu[x] " + "worst at index (1, 2): out=1.5 " * 40
    assert cause_line(numeric + "\nmore") == numeric.strip() and len(numeric) > 1000
    assert cause_line("RuntimeError: PassManager::run failed") == \
        "RuntimeError: PassManager::run failed"


class CompilationError(Exception):
    """Triton's, as raised on an H200 (Triton 3.6): the location and source only, raised
    from the frontend's error."""


def _compile_topk():
    try:
        raise AttributeError("'dtype' object has no attribute 'numel'")
    except AttributeError as exc:
        raise CompilationError(
            "at 4:65:\ndef k(X, OUT, R: tl.constexpr, C: tl.constexpr, K: tl.constexpr):\n"
            "    tl.store(OUT + rows[:, None] * K, tl.topk(x, K, dim=1))\n"
            "                                      ^") from exc


def test_a_compilation_error_keeps_the_error_it_was_raised_from():
    try:
        _compile_topk()
    except CompilationError as exc:
        info = pytest.ExceptionInfo.from_exception(exc)
    longrepr = info.getrepr(style="long", chain=True)
    message = failure_message(longrepr, longrepr.reprcrash.message)
    assert message.splitlines()[0].endswith("CompilationError: at 4:65:")
    assert message.endswith("\ncaused by: AttributeError: 'dtype' object has no attribute 'numel'")
    status, reason = classify_phase("call", "failed", message, str(longrepr))
    assert reason.endswith("CompilationError: at 4:65: AttributeError: 'dtype' object has no "
                           "attribute 'numel'")


def _boom(depth):
    if depth == 0:
        raise RuntimeError("PassManager::run failed\nin ConvertTritonGPUToLLVM")
    _boom(depth - 1)


@pytest.mark.parametrize("style", ["long", "short", "native"])
def test_the_traceback_keeps_the_last_frames_with_their_source(style):
    try:
        _boom(20)
    except RuntimeError as exc:
        info = pytest.ExceptionInfo.from_exception(exc)
    tb = traceback_tail(info.getrepr(style=style, chain=True))
    assert tb is not None and len(tb) <= TRACEBACK_LIMIT
    if style == "native":
        assert tb.count("_boom(depth - 1)") >= 1 and "raise RuntimeError" in tb
    else:
        frames = [ln for ln in tb.splitlines() if not ln.startswith("    ")]
        assert len(frames) == TRACEBACK_FRAMES
        assert all("test_report_cause.py:" in f for f in frames)
        assert frames[-1].endswith(": RuntimeError") or style == "short"
        assert "raise RuntimeError(" in tb.splitlines()[-1]
    assert traceback_tail("a crash report's plain text") is None


def test_long_messages_and_tracebacks_are_bounded_saying_so():
    text = "x" * (MESSAGE_LIMIT + 500)
    cut = bounded(text, MESSAGE_LIMIT)
    assert cut.startswith("x" * MESSAGE_LIMIT) and cut.endswith("(500 characters left out)\n")
    assert bounded("short", MESSAGE_LIMIT) == "short"
    tail = bounded("a" * 10 + "b" * 100, 100, keep="tail")
    assert tail.startswith("... (10 characters left out)") and tail.endswith("b" * 100)


@needs_interpreter
def test_a_failing_check_keeps_its_whole_message_and_traceback(tmp_path):
    out = tmp_path / "r.json"
    result = run_pytest("-p", "no:xdist", "suites/test_numerics.py", "-k",
                        "test_matches_reference and not fuzzed and not covering and float32",
                        "--op", "gelu",
                        "--vendor", "nvidia-sm90", "--mode", "interpreter",
                        "--hypothesis-profile", "ci", "--impl",
                        "gelu=tests.planted.gelu_faults:gelu_wrong_coefficient",
                        "--report-json", str(out))
    assert result.returncode == 1, result.stdout + result.stderr
    (rec,) = [r for r in json.loads(out.read_text())["records"] if r["status"] == "fail"]
    assert rec["message"].splitlines()[0].strip() == rec["reason"]  # the reason is not cut
    assert len(rec["message"].splitlines()) > 2 and not rec["reason"].endswith("...")
    assert "reproduce: pytest" in rec["message"]  # the lines after the first stay
    assert "suites/test_numerics.py:" in rec["traceback"]
    passed = [r for r in json.loads(out.read_text())["records"] if r["status"] != "fail"]
    assert all(r["message"] is None and r["traceback"] is None for r in passed)
