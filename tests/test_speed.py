"""What keeps the suite quick without checking less: interpreted launches replayed only
when identical, the bit-for-bit input comparison, and the defaults of a plain run."""
import pytest
import torch
import triton
import triton.language as tl

from triton_cts.execution import launch_memo, launches, pace
from triton_cts.execution.modes import changed_elements


@triton.jit
def _scale_kernel(x_ptr, out_ptr, n, FACTOR: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * FACTOR, mask=mask)


@triton.jit
def _accumulate_kernel(acc_ptr, BLOCK: tl.constexpr):
    # reads what it writes: a replay must start from the same bytes to be the same launch
    offs = tl.arange(0, BLOCK)
    tl.store(acc_ptr + offs, tl.load(acc_ptr + offs) + 1.0)


@pytest.fixture
def memo(monkeypatch):
    fresh = launch_memo.LaunchMemo(budget=64 << 20)
    monkeypatch.setattr(launch_memo, "_MEMO", fresh)
    return fresh


def _scale(x, factor=2.0, block=16):
    out = torch.full((x.numel() + 8,), float("nan"))  # a poisoned guard after the output
    with launches.interpreted():
        _scale_kernel[(triton.cdiv(x.numel(), block),)](x, out, x.numel(), FACTOR=factor,
                                                          BLOCK=block)
    return out


def test_an_identical_launch_is_replayed_with_the_same_bytes(memo):
    x = torch.randn(37)
    first = _scale(x)
    second = _scale(x.clone())
    assert memo.stats.runs == 1 and memo.stats.replays == 1
    assert torch.equal(first[:37], x * 2) and torch.equal(second.view(torch.int32),
                                                          first.view(torch.int32))
    assert torch.isnan(second[37:]).all(), "the guard after the output was written"


@pytest.mark.parametrize("change", ["values", "one bit", "constexpr", "block", "length",
                                    "stride"])
def test_a_launch_that_differs_in_anything_the_kernel_reads_runs_again(memo, monkeypatch,
                                                                      change):
    x = torch.randn(37)
    _scale(x)
    if change == "values":
        y, kw = torch.randn(37), {}
    elif change == "one bit":
        y, kw = x.clone(), {}
        y.view(torch.int32)[5] ^= 1
    elif change == "constexpr":
        y, kw = x.clone(), {"factor": 3.0}
    elif change == "block":
        y, kw = x.clone(), {"block": 32}
    elif change == "length":
        y, kw = x[:36].clone(), {}
    else:
        y, kw = torch.randn(74)[::2], {}
        y.copy_(x)
    out = _scale(y, **kw)
    assert memo.stats.replays == 0 and memo.stats.runs == 2
    monkeypatch.setattr(launch_memo, "_MEMO", launch_memo.LaunchMemo(budget=0))
    assert torch.equal(out.view(torch.int32), _scale(y, **kw).view(torch.int32))


def test_a_launch_that_reads_its_outputs_replays_only_from_the_same_bytes(memo):
    acc = torch.zeros(8)
    with launches.interpreted():
        _accumulate_kernel[(1,)](acc, BLOCK=8)
        _accumulate_kernel[(1,)](acc, BLOCK=8)  # reads 1.0 now: another launch
    assert torch.equal(acc, torch.full((8,), 2.0))
    assert memo.stats.replays == 0
    again = torch.zeros(8)
    with launches.interpreted():
        _accumulate_kernel[(1,)](again, BLOCK=8)
    assert memo.stats.replays == 1 and torch.equal(again, torch.ones(8))


def test_replay_off_and_a_bad_budget(monkeypatch):
    monkeypatch.setenv("TRITON_CTS_LAUNCH_MEMO_MB", "0")
    monkeypatch.setattr(launch_memo, "_MEMO", None)
    x = torch.randn(16)
    _scale(x), _scale(x)
    assert launch_memo.memo().stats.replays == 0
    monkeypatch.setenv("TRITON_CTS_LAUNCH_MEMO_MB", "lots")
    with pytest.raises(ValueError, match="TRITON_CTS_LAUNCH_MEMO_MB='lots'"):
        launch_memo.budget_bytes()


def test_the_budget_drops_the_oldest_launches(memo):
    memo.budget = 2 * (37 + 8) * 4 + 2 * 256  # two launches' writes
    xs = [torch.randn(37) for _ in range(3)]
    for x in xs:
        _scale(x)
    assert len(memo.entries) == 2 and memo.used <= memo.budget
    _scale(xs[0].clone())  # dropped: runs again
    assert memo.stats.replays == 0
    _scale(xs[2].clone())
    assert memo.stats.replays == 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.int8,
                                   torch.bool, torch.complex64, torch.float8_e4m3fn])
def test_changed_elements_sees_one_flipped_bit(dtype):
    a = (torch.rand(64) > 0.5) if dtype == torch.bool else torch.randn(64).to(dtype)
    assert changed_elements(a, a.clone()) == 0
    b = a.clone()
    b.view(torch.uint8)[7 * a.element_size()] ^= 1
    assert changed_elements(a, b) == 1
    assert changed_elements(a[::2], b[::2]) == 0 and changed_elements(a[1::2], b[1::2]) == 1


def test_changed_elements_tells_signed_zeros_and_nan_payloads_apart():
    zeros = torch.zeros(4)
    assert changed_elements(zeros, -zeros) == 4
    nan = torch.full((4,), float("nan"))
    other = nan.clone()
    other.view(torch.int32)[0] |= 1
    assert changed_elements(nan, nan.clone()) == 0 and changed_elements(nan, other) == 1


@pytest.mark.parametrize("args,env,expected", [
    (["suites/"], {}, 4),
    (["suites/", "-n", "3"], {}, 0),
    (["suites/", "-n3"], {}, 0),
    (["suites/", "--dist=load"], {}, 0),
    (["-p", "no:xdist", "suites/"], {}, 0),
    (["suites/test_numerics.py::test_matches_reference"], {}, 0),
    (["suites/", "--collect-only"], {}, 0),
    (["suites/", "--sanitize", "memcheck"], {}, 0),
    (["suites/"], {"PYTEST_CURRENT_TEST": "tests/x.py::t (call)"}, 0),
    (["suites/"], {"PYTEST_XDIST_WORKER": "gw0"}, 0),
    (["suites/"], {"PYTEST_ADDOPTS": "-n 2"}, 0),
    (["suites/"], {"TRITON_CTS_WORKERS": "3"}, 3),
    (["suites/"], {"TRITON_CTS_WORKERS": "1"}, 0),
])
def test_default_workers(monkeypatch, args, env, expected):
    monkeypatch.setattr(pace, "_cores", lambda: 4)
    assert pace.default_workers(args, env=env) == expected


def test_default_workers_needs_xdist_and_a_count():
    assert pace.default_workers(["suites/"], env={}, xdist_loaded=False) == 0
    with pytest.raises(pytest.UsageError, match="TRITON_CTS_WORKERS='many'"):
        pace.default_workers(["suites/"], env={"TRITON_CTS_WORKERS": "many"})


def test_the_default_workers_reach_xdist_through_its_auto_hook(monkeypatch):
    """A plain run gets ``-n auto`` and the count from the plugin's
    pytest_xdist_auto_num_workers; an ``-n auto`` the command gave keeps xdist's count."""
    from types import SimpleNamespace

    from triton_cts import plugin
    for name in ("PYTEST_CURRENT_TEST", "PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TRITON_CTS_WORKERS", "3")

    def started(args):
        config = SimpleNamespace(stash=pytest.Stash(),
                                 pluginmanager=SimpleNamespace(has_plugin=lambda name: True))
        plugin.pytest_load_initial_conftests(config, None, args)
        return args, plugin.pytest_xdist_auto_num_workers(config)
    assert started(["suites/"]) == (["--dist", "worksteal", "-n", "auto", "suites/"], 3)
    assert started(["-n", "auto", "suites/"]) == (["--dist", "worksteal", "-n", "auto",
                                                    "suites/"], None)
    monkeypatch.setenv("TRITON_CTS_WORKERS", "1")
    assert started(["suites/"]) == (["suites/"], None)


def test_quick_hypothesis_profile_where_no_accelerator_is_attached():
    assert pace.default_hypothesis_profile(accelerator=False) == "ci"
    assert pace.default_hypothesis_profile(accelerator=True) == "dev"


@pytest.mark.parametrize("args, env, workers, expected", [
    (["suites/", "-n", "14"], {}, 0, ["--dist", "worksteal"]),
    (["suites/", "-n4"], {}, 0, ["--dist", "worksteal"]),
    (["suites/", "--numprocesses=auto"], {}, 0, ["--dist", "worksteal"]),
    (["suites/"], {}, 2, ["--dist", "worksteal"]),        # -n added by default_workers
    (["suites/", "-n", "0"], {}, 0, []),                  # one process
    (["suites/"], {}, 0, []),
    (["suites/", "-n", "2", "--dist", "load"], {}, 0, []),  # the command chose
    (["suites/", "-n", "2", "--dist=loadfile"], {}, 0, []),
    (["suites/", "-n", "2"], {"PYTEST_ADDOPTS": "--dist load"}, 0, []),
    (["suites/", "-n", "2"], {"PYTEST_XDIST_WORKER": "gw0"}, 0, []),
])
def test_default_dist_steals_work_unless_chosen(args, env, workers, expected):
    assert pace.default_dist(args, env=env, workers=workers) == expected
