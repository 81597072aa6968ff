"""The third-party library adapters, on machines without the libraries: registration,
signature mapping (against stand-in libraries in tests/fake_libs with the real API names,
computed with torch), the not-installed reason, and a planted wrong result that the
suites must catch."""
import importlib
import importlib.util
import inspect
import os
import subprocess
import sys

import pytest
import torch

from suites import assertions as ah
from suites import runner
from triton_cts import CHECKOUT, adapters
from triton_cts.execution.modes import Mode
from triton_cts.ops.catalog import ALL_OPS
from triton_cts.targets import CheckTarget
from triton_cts.profiles import load_profiles
from triton_cts.ops.implementation import Implementation
from triton_cts.targets import default_registry

FAKE_LIBS = CHECKOUT / "tests" / "fake_libs"
OPS = {op.name: op for op in ALL_OPS}
ADAPTED = [(lib, op, fn) for lib in adapters.LIBRARIES
           for op, fn in importlib.import_module(lib.adapter).OPS.items()]


def _adapter_id(param):
    return f"{param[0].name}-{param[1]}" if isinstance(param, tuple) else None


def _run_suite(*args, env=None):
    environ = {**os.environ, "PYTHONPATH": str(FAKE_LIBS), **(env or {})}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                           "suites/test_numerics.py::test_matches_reference", "--vendor",
                           "nvidia-sm90", "--mode", "interpreter", "--hypothesis-profile",
                           "ci", "-rfs", *args],
                          cwd=CHECKOUT, capture_output=True, text=True, timeout=600,
                          env=environ)


@pytest.fixture
def fake_libs(monkeypatch):
    """The stand-in libraries importable in this process; unloaded afterwards."""
    for lib in adapters.LIBRARIES:
        if importlib.util.find_spec(lib.module) is not None:
            pytest.skip(f"the real {lib.distribution} is installed here; the stand-ins would "
                        f"not be the ones imported")
    before = set(sys.modules)
    monkeypatch.syspath_prepend(str(FAKE_LIBS))
    adapters.import_problem.cache_clear()
    yield
    for name in set(sys.modules) - before:
        if name.split(".")[0] in ("liger_kernel", "flag_gems", "_fake_lib_fault"):
            del sys.modules[name]
    adapters.import_problem.cache_clear()


def test_every_library_is_registered_under_its_name_for_the_ops_it_has():
    registry = default_registry()
    for lib in adapters.LIBRARIES:
        ops = {op for op, impls in registry.implementations.items()
               for i in impls if i.name == lib.name}
        assert ops == set(importlib.import_module(lib.adapter).OPS), lib.name
    # ops a library has no kernel for are not registered (no torch fallback)
    assert "layer_norm_residual_dropout" not in {op for lib, op, _ in ADAPTED}
    assert {i.op for i in registry.select(["liger"])} == {
        op for lib, op, _ in ADAPTED if lib.name == "liger"}


def test_an_adapter_mapping_an_unknown_op_is_an_error(monkeypatch):
    liger = importlib.import_module("triton_cts.adapters.liger")
    monkeypatch.setitem(liger.OPS, "layer_norm2", "layer_norm")
    with pytest.raises(ValueError, match="maps unknown op 'layer_norm2'"):
        default_registry()


@pytest.mark.parametrize("entry", ADAPTED, ids=_adapter_id)
def test_adapter_takes_the_arguments_make_args_builds(entry):
    lib, op_name, function = entry
    fn = getattr(importlib.import_module(lib.adapter), function)
    op = OPS[op_name]
    x = torch.randn((3, 5) if op.min_ndim <= 2 <= op.max_ndim else (5,) * op.min_ndim)
    args, kwargs = op.make_args(x, torch.Generator().manual_seed(0))
    inspect.signature(fn).bind(*args, **kwargs)  # raises TypeError on a mismatch
    impl = Implementation(lib.name, op_name, f"{lib.adapter}:{function}")
    assert not impl.takes_profile(fn)  # libraries are not handed the profile


def test_absent_library_is_reported_as_not_installed_with_the_install_command():
    lib = adapters.Library("nolib", "no_such_module_here", "no-such-dist", ">=1,<2",
                           "triton_cts.adapters.liger")
    assert lib.unsupported("gelu", "interpreter", None) == (
        "no-such-dist is not installed (pip install 'no-such-dist>=1,<2')")


@pytest.mark.parametrize("entry", ADAPTED, ids=_adapter_id)
def test_adapter_maps_the_library_onto_the_op(entry, fake_libs):
    """Each adapter function, called on the stand-in library, matches the op's float64
    reference: arguments reach the right parameters and outputs come back in order."""
    lib, op_name, function = entry
    op = OPS[op_name]
    fn = getattr(importlib.import_module(lib.adapter), function)
    x = torch.randn((4, 6) if op.min_ndim <= 2 <= op.max_ndim else (6,) * op.min_ndim,
                    generator=torch.Generator().manual_seed(1))
    args, kwargs = op.make_args(x, torch.Generator().manual_seed(0))
    outputs = getattr(importlib.import_module(lib.adapter), "OUTPUTS", {}).get(op_name)
    target = CheckTarget(op, Implementation(lib.name, op_name, f"{lib.adapter}:{function}",
                                            outputs=outputs),
                         load_profiles()["nvidia-sm90"], Mode.INTERPRETER)
    out = fn(*runner.clone_args(args), **kwargs)
    ref = runner.run_reference(target, args, kwargs)
    case = type("Case", (), {"describe": lambda self: f"float32 {tuple(x.shape)}"})()
    ah.assert_matches_reference(target, case, out, ref, repro="",
                                error_scales=runner.error_scales(target, args, kwargs))


def test_liger_rms_norm_is_checked_in_the_casting_that_computes_the_op(fake_libs, monkeypatch):
    """Liger's default (Llama) casting rounds x * rstd to the input dtype before the
    weight: its float16 dweight is the gradient of that rounded forward, not of the op
    (the stand-in rounds the same way). The adapter uses Gemma casting (all float32)."""
    liger = importlib.import_module("triton_cts.adapters.liger")
    op = OPS["rms_norm_backward"]
    target = CheckTarget(op, Implementation("liger", op.name, "x:y"),
                         load_profiles()["nvidia-sm90"], Mode.INTERPRETER)
    x = torch.randn(256, 512, generator=torch.Generator().manual_seed(1)).half()
    args, kwargs = op.make_args(x, torch.Generator().manual_seed(0))
    ref = runner.run_reference(target, args, kwargs)
    allow = runner.allowances(target, args, kwargs)
    case = type("Case", (), {"describe": lambda self: "float16 (256, 512)"})()
    assert liger.RMS_CASTING_MODE == "gemma"
    out = liger.rms_norm_backward(*runner.clone_args(args), **kwargs)
    ah.assert_matches_reference(target, case, out, ref, repro="", ambiguities=allow)
    monkeypatch.setattr(liger, "RMS_CASTING_MODE", "llama")
    out = liger.rms_norm_backward(*runner.clone_args(args), **kwargs)
    with pytest.raises(AssertionError, match="output 1 has"):
        ah.assert_matches_reference(target, case, out, ref, repro="", ambiguities=allow)


def test_declared_outputs_are_compared_with_the_same_outputs_of_the_reference():
    """A layer norm that returns only y (outputs=(0,)) is held to y alone, and still fails
    when y is wrong."""
    op = OPS["layer_norm"]
    impl = Implementation("y_only", "layer_norm", "unused:unused", outputs=(0,))
    target = CheckTarget(op, impl, load_profiles()["nvidia-sm90"], Mode.INTERPRETER)
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(2))
    args, kwargs = op.make_args(x, torch.Generator().manual_seed(0))
    ref = runner.run_reference(target, args, kwargs)
    assert len(ref) == 1
    y = torch.nn.functional.layer_norm(x, (8,), args[1], args[2], kwargs["eps"])
    case = type("Case", (), {"describe": lambda self: "float32 (4, 8)"})()
    ah.assert_matches_reference(target, case, (y,), ref, repro="")
    with pytest.raises(AssertionError, match="out of tolerance"):
        ah.assert_matches_reference(target, case, (y + 0.01,), ref, repro="")


@pytest.fixture(scope="module")
def real_libs_absent():
    for lib in adapters.LIBRARIES:
        if importlib.util.find_spec(lib.module) is not None:
            pytest.skip(f"the real {lib.distribution} is installed here")


def test_suite_without_the_library_reports_not_installed(real_libs_absent):
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
         "suites/test_numerics.py::test_matches_reference", "--vendor", "nvidia-sm90",
         "--mode", "interpreter", "--impl", "liger", "--op", "softmax", "-rs",
         "--hypothesis-profile", "ci"],
        cwd=CHECKOUT, capture_output=True, text=True, timeout=600)
    # nothing was checked: no result, which fails the run
    assert result.returncode == 1, result.stdout + result.stderr
    assert "triton-cts: NO RESULT: 4 checks (4 not_supported)" in result.stdout
    assert "4 skipped" in result.stdout and "passed" not in result.stdout
    assert ("not supported: liger-kernel is not installed (pip install "
            "'liger-kernel>=0.8,<0.9')") in result.stdout


def test_suites_run_the_adapters_on_the_fake_libraries(real_libs_absent):
    result = _run_suite("--impl", "liger", "--impl", "flag_gems", "-v")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    # ids carry the implementation; each adapted op ran for at least one dtype
    liger_gaps = importlib.import_module("triton_cts.adapters.liger").INTERPRETER_GAPS
    for lib, op, _ in ADAPTED:
        if lib.name == "liger" and op in liger_gaps:
            continue  # not run in interpreter mode; mapped in-process above
        assert f"[{op}-{lib.name}-nvidia-sm90-interpreter-float32] PASSED" in out, op
    # Liger's interpreter gaps and its float32-only kernels are reported, not passed
    assert "not supported: Liger's kernel calls a libdevice function" in out
    assert "not supported: liger-kernel's softmax computes in float32" in out


def test_planted_wrong_library_result_fails_the_suite(real_libs_absent):
    result = _run_suite("--impl", "reference", "--impl", "liger", "--impl", "flag_gems",
                        "--op", "softmax", env={"FAKE_LIB_FAULT": "softmax"})
    assert result.returncode == 1, result.stdout
    out = result.stdout
    failed = [line for line in out.splitlines() if line.startswith("FAILED")]
    assert failed and all("-reference-" not in line for line in failed)
    assert any("[softmax-liger-nvidia-sm90-interpreter-float32]" in line for line in failed)
    assert any("[softmax-flag_gems-nvidia-sm90-interpreter-float32]" in line for line in failed)
    assert "softmax[liger] on nvidia-sm90 (interpreter)" in out and "out of tolerance" in out
    assert "reproduce: pytest" in out and "--impl liger" in out


def test_library_that_cannot_import_here_is_reported_with_its_error(real_libs_absent):
    result = _run_suite("--impl", "flag_gems", "--op", "gelu",
                        env={"FAKE_FLAG_GEMS_NO_DEVICE": "1"})
    assert result.returncode == 1, result.stdout + result.stderr  # nothing checked: no result
    assert "4 skipped" in result.stdout and "passed" not in result.stdout
    assert ("not supported: flag_gems cannot be imported here: RuntimeError: No device were "
            "detected on your machine !") in result.stdout


def test_benchmark_times_a_library_through_its_adapter(fake_libs):
    """`python -m benchmarks --library` calls the adapters on the benchmark's tensors
    (here on the CPU stand-ins) and skips ops the library has no kernel for."""
    from benchmarks import cases
    from benchmarks.__main__ import _library_row

    x, w, b = torch.randn(8, 32), torch.randn(32), torch.randn(32)
    dy = torch.randn(8, 32)
    fwd_bwd = cases.Bench("layer_norm_fwd_bwd", (8, 32), torch.float32, None, None,
                          bytes=5 * x.numel() * 4, args=(dy, x, w, b))
    dx, dw, db = cases.library_call("liger", fwd_bwd)()
    xt, wt, bt = (t.clone().requires_grad_() for t in (x, w, b))
    want = torch.autograd.grad(torch.nn.functional.layer_norm(xt, (32,), wt, bt, 1e-5),
                               (xt, wt, bt), dy)
    for got, ref in zip((dx, dw, db), want):
        torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4)
    log_softmax = cases.Bench("log_softmax", (8, 32), torch.float32, None, None, args=(x,))
    assert cases.library_call("liger", log_softmax) is None  # Liger has no log-softmax
    assert cases.library_call("flag_gems", log_softmax) is not None
    # times are (per call, CUDA graph) in ms; torch eager took (1.0, 0.5)
    row, out = _library_row("flag_gems", log_softmax, lambda fn: ((4.0, 1.0), (1.0, 0.5), None),
                            profile=None, peak_gbs=100.0, copy_gbs=50.0)
    assert row[0] == "log_softmax [flag_gems]" and row[3] == "4.000 / 1.000"
    assert out["speedup"] == 0.25 and out["graph_speedup"] == 0.5
    assert out["gbs"] == log_softmax.bytes / 1e-3 / 1e9  # from the graph time
