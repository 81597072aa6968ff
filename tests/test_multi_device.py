"""Nodes with several accelerators, with fakes of ``torch.accelerator`` (no GPU needed):
workers spread round robin over 1, 2 and 8 devices, each with the memory budget of its
own device; ``--devices`` restricts the set and is validated; a mixed node stops unless
``--devices`` selects a uniform set; a worker replacing one lost to a sticky device error
keeps its device; each device check's record says which device it ran on."""
import json
import subprocess
import sys
import textwrap

import pytest
import torch

from tests.test_devices import GiB, H100, H200, cuda_props, fake_torch
from triton_cts.errors import UsageError
from triton_cts.execution import device_set, devices, size_budget
from triton_cts.execution.modes import Mode
from triton_cts.profiles import load_profiles
from triton_cts.results.json_schema import load_schema, validate
from triton_cts.results.records import DEVICE_PROPERTY, Record, split_properties
from triton_cts.results.status import Status

PROFILES = load_profiles()
T4 = cuda_props("Tesla T4", 7, 5, 40, 16 * GiB)


def node(props: list, memory: list | None = None):
    """A fake torch with one accelerator per entry of ``props`` (cuda properties), whose
    memory info is the current device's."""
    fake = fake_torch("cuda", props[0])
    state = {"index": 0}
    memory = memory or [(p.total_memory, p.total_memory) for p in props]
    fake.accelerator.device_count = lambda: len(props)
    fake.accelerator.set_device_index = lambda i: (fake.log.append(("set_device_index", i)),
                                                   state.update(index=i))
    fake.accelerator.current_device_index = lambda: state["index"]
    fake.accelerator.get_memory_info = lambda: memory[state["index"]]
    fake.cuda.current_device = lambda: state["index"]
    fake.cuda.get_device_properties = lambda i: props[i]
    return fake


@pytest.fixture(autouse=True)
def no_assignment(monkeypatch):
    monkeypatch.setattr(device_set, "_current", None)  # restored after each test


def worker(k: int, count: int = 4) -> dict:
    return {"PYTEST_XDIST_WORKER": f"gw{k}", "PYTEST_XDIST_WORKER_COUNT": str(count)}


# ---- round robin ---------------------------------------------------------------------------
@pytest.mark.parametrize("count, workers, expected", [
    (1, 4, [None, None, None, None]),           # one device: nothing is set
    (2, 4, [0, 1, 0, 1]),
    (8, 8, list(range(8))),
    (8, 3, [0, 1, 2]),
], ids=["1-device", "2-devices", "8-devices", "8-devices-3-workers"])
def test_workers_spread_round_robin_over_the_visible_devices(count, workers, expected):
    got = []
    for k in range(workers):
        fake = node([H100] * count)
        a = device_set.assign(None, None, worker(k, workers), fake)
        got.append(a.index)
        assert a.indices == tuple(range(count)) and a.slot == k
        sets = [e for e in fake.log if e[0] == "set_device_index"]
        assert sets == ([] if a.index is None else [("set_device_index", a.index)])
        assert fake.accelerator.current_device_index() == (a.index or 0)
    assert got == expected


def test_without_xdist_one_process_uses_the_first_device_of_the_set():
    fake = node([H100] * 4)
    assert device_set.assign(None, None, {}, fake).index == 0
    assert device_set.assign("2,3", None, {}, fake).index == 2
    assert device_set.assign(None, None, {}, node([H100])) == device_set.Assignment((0,), None,
                                                                                   None)


def test_the_controller_sets_no_device():
    fake = node([H100] * 2)
    assert device_set.assign(None, None, {}, fake, runs_checks=False).index is None
    assert fake.log == []


def test_devices_restricts_the_set_and_the_round_robin():
    got = [device_set.assign("1,3", None, worker(k), node([H100] * 4)).index for k in range(4)]
    assert got == [1, 3, 1, 3]
    # one device chosen on a node of two: every worker on it
    assert {device_set.assign("1", None, worker(k), node([H100] * 2)).index
            for k in range(3)} == {1}


# ---- --devices validation ------------------------------------------------------------------
@pytest.mark.parametrize("text, count, message", [
    ("0,4", 4, "--devices '0,4': device 4 out of range: torch sees 4 device(s), indices 0 to 3"),
    ("1,1", 2, "--devices '1,1': device 1 given more than once"),
    ("0,x", 2, "--devices '0,x': 'x' is not a device index"),
    ("-1", 2, "--devices '-1': '-1' is not a device index"),
    ("", 2, "--devices '': '' is not a device index"),
    ("0,,1", 2, "--devices '0,,1': '' is not a device index"),
    ("0", 0, "--devices '0': no accelerator is attached (torch sees 0 devices)"),
])
def test_bad_devices_are_usage_errors_naming_the_problem(text, count, message):
    with pytest.raises(UsageError) as info:
        device_set.parse_devices(text, count)
    assert message in str(info.value)


def test_good_devices_parse():
    assert device_set.parse_devices(" 0, 2 ", 4) == (0, 2)
    assert device_set.parse_devices(None, 4) is None


def test_devices_on_this_cpu_machine_is_a_usage_error_before_any_test():
    if devices.available():
        pytest.skip("not supported: an accelerator is attached; this checks a CPU-only machine")
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                             "-p", "no:xdist", "--devices", "0", "--co", "-q",
                             "suites/test_numerics.py"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 4, result.stdout[-1500:] + result.stderr[-1500:]
    assert "--devices '0': no accelerator is attached" in result.stderr, result.stderr[-1500:]


# ---- memory: each worker's budget from its own device ---------------------------------------
def test_each_workers_memory_budget_is_its_own_devices_share(monkeypatch):
    fake = node([H100, H100], memory=[(70 * GiB, 80 * GiB), (10 * GiB, 20 * GiB)])
    monkeypatch.setattr(devices, "_torch", lambda torch_module=None, load=True: fake)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "3")
    big = 1 << 30  # 56 GiB as float32 with its temporaries
    # gw0 and gw2 share device 0 (80 GiB), gw1 has device 1 (20 GiB) alone
    for k, on, share in ((0, 2, 32.0), (1, 1, 16.0), (2, 2, 32.0)):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{k}")
        a = device_set.configure(None, None, torch_module=fake)
        assert device_set.workers_on_this_device() == on
        problem = size_budget.device_memory_problem(big, torch.float32)
        assert f"each of {on} worker(s) of device {a.index} may use {share} GiB" in problem
    assert size_budget.device_memory_problem(1 << 20, torch.float32) is None


def test_one_device_keeps_the_budget_it_had():
    env = {"PYTEST_XDIST_WORKER_COUNT": "4", "PYTEST_XDIST_WORKER": "gw1"}
    one = device_set.assign(None, None, env, node([H100]))
    assert device_set.workers_on_this_device(env, one) == 4
    assert device_set.workers_on_this_device({}, None) == 1


# ---- one profile per run -------------------------------------------------------------------
def test_a_mixed_node_stops_listing_each_device_and_the_uniform_choices():
    fake = node([H100, H200, H100, H200])
    with pytest.raises(UsageError) as info:
        device_set.survey(range(4), PROFILES, fake)
    msg = str(info.value)
    assert ("device 0: 'NVIDIA H100 80GB HBM3' -> nvidia-sm90; device 1: 'NVIDIA H200' -> "
            "nvidia-sm90-h200; device 2: 'NVIDIA H100 80GB HBM3' -> nvidia-sm90") in msg, msg
    assert "--devices 0,2; --devices 1,3" in msg, msg
    assert device_set.survey((1, 3), PROFILES, fake) == [
        {"index": 1, "name": "NVIDIA H200", "profile": "nvidia-sm90-h200"},
        {"index": 3, "name": "NVIDIA H200", "profile": "nvidia-sm90-h200"}]


def test_a_device_no_profile_matches_stops_a_node_too():
    with pytest.raises(UsageError, match=r"device 1: 'Tesla T4' -> no profile.*--devices 0\)"):
        device_set.survey((0, 1), PROFILES, node([H100, T4]))


def test_the_selection_lists_the_runs_devices_in_device_mode_only(monkeypatch):
    from triton_cts import targets
    fake = node([H100] * 2)
    monkeypatch.setattr(device_set, "_torch", lambda torch_module=None: fake)
    monkeypatch.setattr(devices, "_torch", lambda torch_module=None, load=True: fake)
    device_set.configure(None, None, worker(1, 2))
    h100 = targets.attached_device(fake)
    listed = targets._run_devices(PROFILES, [Mode.DEVICE], h100, "nvidia-sm90")
    assert [(d["index"], d["profile"]) for d in listed] == [(0, "nvidia-sm90"), (1, "nvidia-sm90")]
    assert targets._run_devices(PROFILES, [Mode.INTERPRETER], h100, "nvidia-sm90") == []
    assert device_set.record_field(listed) == {"index": 1, "name": H100.name}


# ---- the record says where it ran ----------------------------------------------------------
def test_a_device_checks_record_carries_its_device_and_conforms_to_the_schema():
    split = split_properties([("repro", "pytest x"),
                              (DEVICE_PROPERTY, {"index": 3, "name": "NVIDIA H200"})])
    assert split["device"] == {"index": 3, "name": "NVIDIA H200"} and not split["properties"]
    record = Record(test_id="s::t", status=Status.PASS, **split).to_dict()
    assert record["device"] == {"index": 3, "name": "NVIDIA H200"}
    assert split_properties([("repro", "pytest x")])["device"] is None  # other modes
    schema = load_schema("report")
    assert validate(record, schema["$defs"]["record"], schema) == []
    assert validate({**record, "device": {"index": "3"}}, schema["$defs"]["record"], schema)


# ---- under xdist: a fake two-device node, a worker lost to a sticky error -------------------
CONFTEST = '''
import os
from types import SimpleNamespace
import torch

# a node of two H100s: torch.accelerator and torch.cuda's property readers, faked
H100 = SimpleNamespace(name="NVIDIA H100 80GB HBM3", major=9, minor=0,
                       multi_processor_count=132, total_memory=80 * 2**30, warp_size=32)
state = {"index": 0}
torch.accelerator.is_available = lambda: True
torch.accelerator.current_accelerator = lambda *a, **k: torch.device("cuda")
torch.accelerator.device_count = lambda: 2
torch.accelerator.set_device_index = lambda i: state.update(index=i)
torch.accelerator.current_device_index = lambda: state["index"]
torch.cuda.get_device_properties = lambda i=None: H100
torch.cuda.current_device = lambda: state["index"]
torch.cuda.is_initialized = lambda: False  # nothing to synchronize
'''
CHECKS = '''
import os
import pytest
import torch

@pytest.mark.cts_modes("device")
@pytest.mark.parametrize("case", ["a", "b", "c", "d"])
def test_check(case, request):
    slot = request.config.workerinput.get("triton_cts_device_slot")
    with open(os.environ["DEVICE_LOG"], "a") as fh:
        fh.write(f"{case} {os.environ['PYTEST_XDIST_WORKER']} {slot} "
                 f"{torch.accelerator.current_device_index()}\\n")
    if case == "a":
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
'''


def test_under_xdist_a_lost_workers_replacement_keeps_its_device(tmp_path):
    """One worker on a node of two: gw0 (slot 0, device 0) is lost to a sticky error after
    check a; xdist's replacement gw1 takes slot 0 and device 0, not gw1's device 1."""
    (tmp_path / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (tmp_path / "suites").mkdir()  # a suite's checks: each gets a record
    (tmp_path / "suites" / "test_checks.py").write_text(textwrap.dedent(CHECKS))
    log, report = tmp_path / "devices.log", tmp_path / "report.json"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "triton_cts.plugin",
         "-q", "-n", "1", "--dist", "load", "--mode", "device", f"--report-json={report}",
         "suites/test_checks.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**__import__("os").environ, "DEVICE_LOG": str(log)})
    out = result.stdout + result.stderr
    assert result.returncode == 1 and "1 failed, 3 passed" in out, out[-3000:]
    ran = {case: (gw, int(slot), int(index)) for case, gw, slot, index in
           (line.split() for line in log.read_text().splitlines())}
    assert ran == {"a": ("gw0", 0, 0), "b": ("gw1", 0, 0), "c": ("gw1", 0, 0),
                   "d": ("gw1", 0, 0)}, out[-3000:]
    doc = json.loads(report.read_text())
    assert doc["environment"]["devices"] == [
        {"index": i, "name": "NVIDIA H100 80GB HBM3", "profile": "nvidia-sm90"} for i in (0, 1)]
    assert [r["device"] for r in doc["records"]] == [
        {"index": 0, "name": "NVIDIA H100 80GB HBM3"}] * 4


def test_shards_of_nodes_that_chose_other_devices_merge_as_one_selection():
    from reports.selection import normalized_command
    one = normalized_command("pytest suites -n 8 --mode device --devices 0,1 --shard 1/2")
    two = normalized_command("pytest suites --mode device --shard 2/2 --devices=2,3 -n 4")
    assert one == two == "pytest suites --mode device"


def test_the_html_report_lists_the_devices():
    from reports.html import render
    from triton_cts.results.report_io import document
    env = {"triton": "3.9.0", "torch": "2.13.0", "profiles": ["nvidia-sm90"], "modes": ["device"],
           "devices": [{"index": i, "name": "NVIDIA H100", "profile": "nvidia-sm90"}
                       for i in (0, 1)]}
    page = render(document(env, [Record(test_id="suites/t.py::t", status=Status.PASS,
                                        device={"index": 1, "name": "NVIDIA H100"}).to_dict()]))
    assert "<div>0: NVIDIA H100 (nvidia-sm90)</div><div>1: NVIDIA H100 (nvidia-sm90)</div>" in page
