"""Bad input to the report commands and the plugin: each a usage error naming the problem,
or a clean exit where the reader closed the pipe."""
import json
import subprocess
import sys

import pytest

from reports.__main__ import main as reports_main
from tests.helpers import run_pytest
from triton_cts import CHECKOUT
from triton_cts.results.report_io import document

USAGE_ERROR = 4


def _report(tmp_path, name, ids, status="pass"):
    records = [{"test_id": t, "status": status, "op": "gelu", "profile": "nvidia-sm90",
                "suite": "test_numerics", "params": {"n": i}} for i, t in enumerate(ids)]
    path = tmp_path / name
    path.write_text(json.dumps(document({"triton": "3.9.0", "torch": "2.13.0"}, records)))
    return path


def test_unknown_hypothesis_profile_is_a_usage_error_naming_it():
    result = run_pytest("-p", "no:xdist", "--co", "-q", "tests/test_report_cli.py",
                        "--hypothesis-profile", "nope", timeout=300)
    assert result.returncode == USAGE_ERROR, result.stdout + result.stderr
    assert "--hypothesis-profile nope: no such hypothesis profile" in result.stderr
    assert "ci, ci-seeded" in result.stderr and "INTERNALERROR" not in result.stdout + result.stderr


def test_summary_into_a_closed_pipe_exits_cleanly_with_its_own_status(tmp_path):
    # enough rows that the output outgrows the pipe's buffer after head has gone
    path = _report(tmp_path, "big.json", [f"s::t[{i}]" for i in range(20000)], status="fail")
    shell = (f"{sys.executable} -m reports summary {path} | head -1; "
             f"exit ${{PIPESTATUS[0]}}")
    result = subprocess.run(["bash", "-c", shell], cwd=CHECKOUT, capture_output=True,
                            text=True, timeout=300)
    assert result.stderr == ""
    assert result.stdout.split()[:2] == ["op", "suite"]
    assert result.returncode == 1  # the verdict's status: the run does not conform


def test_html_to_a_folder_names_the_option_and_the_problem(tmp_path, capsys):
    path = _report(tmp_path, "r.json", ["s::t[1]"])
    (tmp_path / "out").mkdir()
    assert reports_main(["html", str(path), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"error: -o {tmp_path / 'out'}: cannot be written: it is a folder, not a file"
    assert reports_main(["merge", str(path), "-o", str(tmp_path / "out")]) == 2
    assert "cannot be written: it is a folder" in capsys.readouterr().err


def test_summary_refuses_an_unknown_table_format(tmp_path, capsys):
    path = _report(tmp_path, "r.json", ["s::t[1]"])
    with pytest.raises(SystemExit) as exc:
        reports_main(["summary", str(path), "--format", "nope"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "argument --format: 'nope' is not a table format" in err and "github" in err
    assert reports_main(["summary", str(path), "--format", "github"]) == 0
    assert "| op " in capsys.readouterr().out


def test_diff_of_runs_that_share_no_check_says_so_and_fails(tmp_path, capsys):
    old = _report(tmp_path, "old.json", [f"a::t[{i}]" for i in range(50)])
    new = _report(tmp_path, "new.json", [f"b::t[{i}]" for i in range(40)])
    assert reports_main(["diff", str(old), str(new)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "(50 checks) and" in captured.err and "(40 checks) share no check" in captured.err
    # one shared check is a comparison (a regression: checks no longer run)
    both = _report(tmp_path, "both.json", ["a::t[0]", "b::t[0]"])
    assert reports_main(["diff", str(old), str(both)]) == 1
    assert "share no check" not in capsys.readouterr().err


def test_launch_overhead_refuses_an_unknown_dtype(capsys):
    from benchmarks import launch_overhead

    with pytest.raises(SystemExit) as exc:
        launch_overhead.main(["--dtype", "float33"])
    assert exc.value.code == 2
    assert "argument --dtype: invalid choice: 'float33'" in capsys.readouterr().err
