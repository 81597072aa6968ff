"""Ops from users' packages: the example package (examples/rowwise_int8_quant) checked in
interpreter and compile mode on two profiles, a planted bug in a copy of its kernel
caught, both ways of loading an op (--op-module and the entry-point group
triton_cts.ops), and every malformed spec a usage error before any test, naming where it
came from and the field."""
import dataclasses
import re
import sys
from importlib import metadata
from types import SimpleNamespace

import pytest
import torch

import os
import subprocess

from tests.helpers import needs_interpreter
from triton_cts import CHECKOUT
from triton_cts.errors import UsageError
from triton_cts.ops import registry as registry_module
from triton_cts.targets import default_registry

EXAMPLE = CHECKOUT / "examples" / "rowwise_int8_quant"
OP = "rowwise_int8_quant"
TWO_PROFILES = ("--vendor", "nvidia-sm90", "--vendor", "amd-gfx942")


@pytest.fixture
def example_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLE))
    monkeypatch.setenv("PYTHONPATH", str(EXAMPLE))
    yield
    for name in [m for m in sys.modules if m.startswith(OP)]:
        del sys.modules[name]


def _example_spec():
    from rowwise_int8_quant.spec import ROWWISE_INT8_QUANT
    return ROWWISE_INT8_QUANT


RELATIONS = {"scale_invariance", "shift_invariance"}


def run_pytest(*args: str, env_path: str) -> subprocess.CompletedProcess:
    """pytest in a fresh process from the checkout with ``env_path`` on PYTHONPATH (where
    a user's package is importable), as a user runs it."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([env_path, str(CHECKOUT)]))
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          cwd=CHECKOUT, capture_output=True, text=True, timeout=600, env=env)


# ---- validation: a malformed spec is a usage error naming the source and the field ------
def _bad(example_on_path, **changes):
    spec = dataclasses.replace(_example_spec(), **changes)
    with pytest.raises(UsageError) as info:
        default_registry().add_op(spec, "--op-module mine", RELATIONS)
    return str(info.value)


def test_a_name_of_a_built_in_op_is_refused(example_on_path):
    msg = _bad(example_on_path, name="softmax")
    assert msg.startswith("--op-module mine: op 'softmax', field 'name': clashes"), msg


def test_no_reference_is_refused(example_on_path):
    msg = _bad(example_on_path, reference=None)
    assert "op 'rowwise_int8_quant', field 'reference': no float64 reference" in msg, msg


def test_dtypes_the_reference_refuses_are_refused(example_on_path):
    def refuses_half(x):
        if x.dtype != torch.float64:
            raise TypeError("not upcast")
        raise NotImplementedError("no bfloat16 here")
    msg = _bad(example_on_path, reference=refuses_half)
    assert "field 'dtypes': the reference refuses float16 inputs" in msg, msg
    assert "NotImplementedError: no bfloat16 here" in msg, msg


def test_a_relation_that_does_not_exist_is_refused(example_on_path):
    msg = _bad(example_on_path, relations=("scale_invariance", "commutes_with_fft"))
    assert "field 'relations': no relation named commutes_with_fft; known: " \
           "scale_invariance, shift_invariance" in msg, msg


def test_a_kernel_that_cannot_be_imported_is_refused(example_on_path):
    msg = _bad(example_on_path, reference_kernel="rowwise_int8_quant.kernel:no_such")
    assert "field 'reference_kernel': module 'rowwise_int8_quant.kernel' has no " \
           "attribute 'no_such'" in msg, msg
    msg = _bad(example_on_path, autograd="nowhere_at_all:f")
    assert "field 'autograd': cannot import 'nowhere_at_all'" in msg, msg


def test_a_module_without_ops_or_with_other_objects_is_refused():
    with pytest.raises(UsageError, match=r"^--op-module json: module 'json' has no OPS"):
        registry_module.load_op_target("json", "--op-module json")
    with pytest.raises(UsageError, match=r"'x' is a str, not an OpSpec"):
        registry_module._ops_of(("x",), "--op-module m:OPS")
    with pytest.raises(UsageError, match=r"^--op-module nowhere: cannot load 'nowhere'"):
        registry_module.load_op_target("nowhere", "--op-module nowhere")


def test_the_entry_point_form_names_the_entry_point(example_on_path, monkeypatch):
    """The same validation serves entry points: the message names the entry point and its
    package."""
    group = registry_module.OP_ENTRY_POINT_GROUP
    points = [metadata.EntryPoint("quant", "rowwise_int8_quant.spec:OPS", group)]
    monkeypatch.setattr(registry_module.metadata, "entry_points",
                        lambda group: points if group == registry_module.OP_ENTRY_POINT_GROUP else [])
    registry = default_registry()
    assert registry.load_ops() == [OP]
    assert registry.op_sources[OP].startswith("entry point 'quant = rowwise_int8_quant.spec:OPS'")
    assert [(i.name, i.target) for i in registry.implementations[OP]] == [
        ("reference", "rowwise_int8_quant.kernel:quantize")]
    clash = SimpleNamespace(__file__="clashing_ops.py", __name__="clashing_ops",
                            OPS=(dataclasses.replace(_example_spec(), name="gelu"),))
    monkeypatch.setitem(sys.modules, "clashing_ops", clash)
    points[:] = [metadata.EntryPoint("quant", "clashing_ops", group)]
    with pytest.raises(UsageError, match=r"^entry point 'quant = clashing_ops' \(group "
                                         r"triton_cts.ops, package clashing_ops\): op 'gelu', "
                                         r"field 'name': clashes"):
        default_registry().load_ops()


def test_the_example_op_is_not_there_unless_loaded():
    assert OP not in default_registry().ops


# ---- end to end, through pytest as a user runs it -----------------------------------------
def test_a_malformed_op_module_stops_the_run_before_any_test(tmp_path):
    (tmp_path / "bad_ops.py").write_text(
        "import dataclasses\nfrom rowwise_int8_quant.spec import ROWWISE_INT8_QUANT\n"
        "OPS = (dataclasses.replace(ROWWISE_INT8_QUANT, relations=('no_such_relation',)),)\n")
    result = run_pytest("suites/test_numerics.py", "--op-module", "bad_ops", "--collect-only",
                        "-q", env_path=os.pathsep.join([str(tmp_path), str(EXAMPLE)]))
    assert result.returncode == 4, result.stdout + result.stderr
    assert "--op-module bad_ops: op 'rowwise_int8_quant', field 'relations': no relation " \
           "named no_such_relation" in result.stderr, result.stderr


def test_the_entry_point_of_an_installed_package_adds_the_op(tmp_path):
    """An installed package (a dist-info with the example's entry point, as pip writes
    it) adds the op with no option at all."""
    info = tmp_path / "triton_cts_example_rowwise_int8_quant-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: triton-cts-example-rowwise-"
                                   "int8-quant\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(
        "[triton_cts.ops]\nrowwise_int8_quant = rowwise_int8_quant.spec\n")
    result = run_pytest("suites/test_numerics.py", "--op", OP, "--mode", "interpreter",
                        "--vendor", "nvidia-sm90", "--collect-only", "-q",
                        env_path=os.pathsep.join([str(tmp_path), str(EXAMPLE)]))
    assert result.returncode == 0, result.stdout + result.stderr
    ids = re.findall(r"\[(rowwise_int8_quant-reference-nvidia-sm90-interpreter-\w+)\]",
                     result.stdout)
    assert len(ids) == 4 * 3, result.stdout  # 4 properties x float16, bfloat16, float32


@needs_interpreter
def test_the_example_conforms_in_interpreter_and_compile_mode_on_two_profiles():
    """Numerics (drawn and covering cases), the declared relation, grid limits at full
    size and compile: every check runs and passes on nvidia-sm90 and amd-gfx942."""
    result = run_pytest("suites", "-p", "no:xdist", "--op-module", "rowwise_int8_quant.spec",
                        "--op", OP, "--mode", "interpreter", "--mode", "compile", *TWO_PROFILES,
                        "--hypothesis-profile", "ci", "-q", "-rA", "-k",
                        "test_matches_reference and not fuzzed or test_relation_holds or "
                        "test_compiles or test_grids_within_limits_at_full_size",
                        env_path=str(EXAMPLE))
    out = result.stdout
    assert result.returncode == 0, out[-4000:] + result.stderr[-2000:]
    passed = set(re.findall(r"^PASSED suites/(\w+)\.py::(\w+)\[(\S+)\]$", out, re.M))
    expected = set()
    for profile in ("nvidia-sm90", "amd-gfx942"):
        ident = f"{OP}-reference-{profile}"
        for dtype in ("float16", "bfloat16", "float32"):
            expected |= {("test_numerics", "test_matches_reference", f"{ident}-interpreter-{dtype}"),
                         ("test_numerics", "test_matches_reference_on_covering_cases",
                          f"{ident}-interpreter-{dtype}"),
                         ("test_relations", "test_relation_holds",
                          f"{ident}-interpreter-{dtype}-scale_invariance")}
        expected |= {("test_compile", "test_compiles_within_limits", f"{ident}-compile"),
                     ("test_grid_limits", "test_grids_within_limits_at_full_size",
                      f"{ident}-compile")}
    assert passed == expected, (sorted(expected - passed), sorted(passed - expected), out[-3000:])
    assert re.search(r"^22 passed, \d+ deselected", out.splitlines()[-1]), out[-2000:]


@needs_interpreter
def test_a_planted_bug_in_a_copy_of_the_example_kernel_fails():
    result = run_pytest("suites/test_numerics.py", "-p", "no:xdist",
                        "--op-module", "rowwise_int8_quant.spec", "--op", OP, "--impl",
                        f"{OP}=tests.planted.rowwise_quant_faults:quantize_truncates",
                        "--mode", "interpreter", "--vendor", "nvidia-sm90",
                        "--hypothesis-profile", "ci", "-q", "-k",
                        "test_matches_reference and float32 and not fuzzed",
                        env_path=str(EXAMPLE))
    out = result.stdout
    assert result.returncode == 1, out[-3000:]
    assert re.search(r"rowwise_int8_quant\[tests\.planted\.rowwise_quant_faults:"
                     r"quantize_truncates\] on nvidia-sm90 \(interpreter\).*output 0 has \d+ of "
                     r"\d+ elements out of tolerance", out), out[-3000:]
    assert "2 failed" in out, out[-2000:]  # the drawn cases and the covering cases
