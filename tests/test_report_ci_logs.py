"""Quiet, fast CI logs: --junitxml without a warning per check, not-supported checks in a
line per reason, and an entry point that imports torch and Triton only for a run of the
checkout."""
import os
import re
import subprocess
import sys
import textwrap
import tomllib
import xml.etree.ElementTree as ET

from tests.helpers import run_pytest
from triton_cts import CHECKOUT
from triton_cts.pytest_entry import is_checkout
from triton_cts.results.plugin import reason_summary
from triton_cts.results.status import Status

PYPROJECT = tomllib.loads((CHECKOUT / "pyproject.toml").read_text())


def test_the_entry_point_is_the_thin_module_and_imports_neither_torch_nor_triton():
    assert PYPROJECT["project"]["entry-points"]["pytest11"] == {
        "triton_cts": "triton_cts.pytest_entry"}
    code = ("import sys, triton_cts.pytest_entry; "
            "print(sorted(m for m in ('torch', 'triton', 'triton_cts.plugin', 'hypothesis') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd="/")
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr


def _pytest(tmp_path, *args, env=None):
    """pytest in ``tmp_path`` with entry points off and the thin entry given by hand (the
    environment's installed entry point may be an older one)."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p",
         "triton_cts.pytest_entry", *args], cwd=tmp_path, capture_output=True, text=True,
        timeout=600, env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", **(env or {})})


def test_another_project_s_run_does_not_load_the_plugin(tmp_path):
    (tmp_path / "test_other.py").write_text(textwrap.dedent("""
        import sys

        def test_nothing_heavy_was_imported():
            assert "torch" not in sys.modules and "triton" not in sys.modules
            assert "triton_cts.plugin" not in sys.modules
        """))
    assert not is_checkout(tmp_path) and is_checkout(CHECKOUT)
    result = _pytest(tmp_path, "-q", "test_other.py")
    assert result.returncode == 0 and "1 passed" in result.stdout, result.stdout + result.stderr


def test_a_run_of_a_checkout_loads_the_plugin_early(tmp_path):
    """A rootdir laid out as a checkout gets the plugin, its options and its default -n."""
    (tmp_path / "triton_cts").mkdir()
    (tmp_path / "triton_cts" / "plugin.py").write_text("")
    (tmp_path / "suites").mkdir()
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_here.py").write_text(textwrap.dedent("""
        import sys

        def test_the_plugin_is_loaded(pytestconfig):
            assert pytestconfig.pluginmanager.has_plugin("triton_cts.plugin")
            assert pytestconfig.getoption("vendor") == ["nvidia-sm90"]
        """))
    result = _pytest(tmp_path, "-p", "_hypothesis_pytestplugin", "-p", "no:xdist", "-q",
                     "test_here.py", "--vendor", "nvidia-sm90", "--mode", "interpreter",
                     env={"PYTHONPATH": str(CHECKOUT)})
    assert result.returncode == 0 and "1 passed" in result.stdout, result.stdout + result.stderr


SYNTHETIC = '''
def test_records_a_property(target, record_property):
    record_property("quality_note", "kept in the JUnit file")
'''


def test_junitxml_has_the_properties_and_no_warning_per_check(tmp_path):
    (tmp_path / "test_synthetic.py").write_text(SYNTHETIC)
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["triton_cts.plugin"]\n')
    junit = tmp_path / "j.xml"
    args = ["-c", str(CHECKOUT / "pyproject.toml"), "--rootdir", str(tmp_path), "-p",
            "no:xdist", str(tmp_path / "test_synthetic.py"), "--op", "gelu", "--vendor",
            "nvidia-sm90", "--mode", "interpreter", "--junitxml", str(junit)]
    result = run_pytest(*args)
    text = result.stdout + result.stderr
    assert "1 passed" in text and "PytestWarning" not in text, text
    props = {p.get("name"): p.get("value") for p in ET.parse(junit).iter("property")}
    assert props["quality_note"] == "kept in the JUnit file"
    # the project's junit_family is what keeps it quiet: xunit2 warns for every check
    loud = run_pytest(*args, "-o", "junit_family=xunit2")
    assert "record_property is incompatible with junit_family 'xunit2'" in loud.stdout


def test_pyproject_prints_no_line_per_skipped_check():
    addopts = PYPROJECT["tool"]["pytest"]["ini_options"]["addopts"].split()
    assert not any(re.fullmatch(r"-r\w*[asA]\w*", a) for a in addopts)
    assert PYPROJECT["tool"]["pytest"]["ini_options"]["junit_family"] == "xunit1"


def test_not_supported_checks_are_summarised_in_a_line_per_reason():
    result = run_pytest("-p", "no:xdist", "suites/test_numerics.py", "--op", "gelu",
                        "--vendor", "npu-ascend910b", "--mode", "device")
    out = result.stdout
    assert re.search(r"^not supported: \d+ check\(s\), 1 reason\(s\):$", out, re.M), out
    assert "SKIPPED [" not in out and out.count("not supported: ") == 1


def test_reason_summary_counts_most_frequent_first_and_folds_the_rest():
    records = ([{"status": "not_supported", "reason": "no accelerator attached"}] * 5
               + [{"status": "not_supported", "reason": f"gap {i}"} for i in range(12)]
               + [{"status": "pass", "reason": ""}])
    lines = reason_summary(records, Status.NOT_SUPPORTED)
    assert lines[0] == "not supported: 17 check(s), 13 reason(s):"
    assert lines[1].split() == ["5", "no", "accelerator", "attached"]
    assert len(lines) == 12 and lines[-1].startswith("  ... and 3 more reason(s)")
    assert len(reason_summary(records, Status.NOT_SUPPORTED, every=True)) == 14
    assert reason_summary(records, Status.FAIL) == []
