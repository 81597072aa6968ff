"""The differentiable ops the convergence suite trains with (triton_cts.adapters.training):
forward and backward ops joined in one autograd Function give torch's outputs and
gradients, for our kernels (interpreter) and for the stand-in libraries of tests/fake_libs;
forward-only ops get torch's gradient; a wrong backward op is caught; and the suite reports
where each op came from, a planted library fault as a failure and a library that cannot
import as not supported."""
import pytest
import torch

from suites.test_convergence import HEAD_DIM, OPTIONS
from tests.helpers import run_pytest
from tests.test_adapters import FAKE_LIBS, fake_libs, real_libs_absent  # noqa: F401 (fixtures)
from triton_cts.adapters.training import INTERFACES, differentiable
from triton_cts.execution import launches
from triton_cts.execution.modes import Mode
from triton_cts.ops.rope import make_tables
from triton_cts.profiles import load_profiles
from triton_cts.targets import default_registry

PROFILE = load_profiles([])["nvidia-sm90"]

#: Where each op comes from, per family: the reference has every backward op; Liger has
#: no attention and only RoPE's forward; FlagGems has no backward for RoPE, attention
#: and the fused add + RMS norm (whose rstd it does not return either).
FWD_ONLY = "library forward, torch backward"
SOURCES = {
    "reference": dict.fromkeys(OPTIONS, "library"),
    "liger": {"cross_entropy": "library", "fused_add_rms_norm": "library", "rope": FWD_ONLY,
              "attention": "torch (the library has no kernel for it)", "swiglu": "library"},
    "flag_gems": {"cross_entropy": "library", "fused_add_rms_norm": FWD_ONLY, "rope": FWD_ONLY,
                  "attention": FWD_ONLY, "swiglu": "library"},
}


def _inputs(op):
    gen = torch.Generator().manual_seed(0)

    def r(*shape):
        return torch.randn(*shape, generator=gen)
    return {"fused_add_rms_norm": (r(2, 3, 16), r(2, 3, 16), r(16)),
            "rope": (r(1, 4, 2, HEAD_DIM), *make_tables(4, HEAD_DIM, torch.float32, "cpu")),
            "swiglu": (r(3, 16), r(3, 16)),
            "attention": tuple(r(1, 2, 4, HEAD_DIM) for _ in "qkv"),  # [B, H, S, D]
            "cross_entropy": (r(6, 10), torch.randint(0, 10, (6,), generator=gen))}[op]


def _outputs_and_grads(fn, op):
    # the RoPE tables are constants of the positions: no gradient is asked for
    leaves = [t.clone().requires_grad_(t.is_floating_point() and (op != "rope" or i == 0))
              for i, t in enumerate(_inputs(op))]
    outs = fn(*leaves)
    outs = outs if isinstance(outs, tuple) else (outs,)
    gen = torch.Generator().manual_seed(1)
    upstream = [torch.randn(o.shape, generator=gen) for o in outs]
    wanted = [t for t in leaves if t.requires_grad]
    return outs, torch.autograd.grad(outs, wanted, upstream)


def _family(name):
    return {op: impl for op, impls in default_registry().implementations.items()
            for impl in impls if impl.name == name}


def _check_family(name, mode):
    impls = _family(name)
    for op, options in OPTIONS.items():
        fn, source = differentiable(impls, op, options, PROFILE, mode)
        assert source == SOURCES[name][op], (name, op, source)
        expected = _outputs_and_grads(lambda *a: INTERFACES[op].torch(*a, **options), op)
        got = _outputs_and_grads(fn, op)
        for kind, e, g in zip(("outputs", "gradients"), expected, got):
            for i, (a, b) in enumerate(zip(g, e)):
                torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5,
                                           msg=lambda m: f"{name} {op} {kind}[{i}]: {m}")


def test_our_forward_and_backward_ops_give_torchs_outputs_and_gradients():
    with launches.interpreted():
        _check_family("reference", Mode.INTERPRETER)


@pytest.mark.parametrize("library", ["liger", "flag_gems"])
def test_library_ops_give_torchs_outputs_and_gradients(library, fake_libs):
    # device mode: the stand-ins compute with torch on the CPU, so every op they have runs
    _check_family(library, Mode.DEVICE)


@pytest.mark.parametrize("fault", ["swiglu_backward", "fused_add_rms_norm_backward"])
def test_a_wrong_library_backward_is_caught(fault, fake_libs, monkeypatch):
    monkeypatch.setenv("FAKE_LIB_FAULT", fault)
    with pytest.raises(AssertionError, match="gradients"):
        _check_family("liger", Mode.DEVICE)


def test_suite_names_the_library_ops_and_reports_a_library_that_cannot_import(
        real_libs_absent, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(FAKE_LIBS))
    monkeypatch.setenv("FAKE_LIB_FAULT", "rope_forward")  # Liger's RoPE, wrong
    monkeypatch.setenv("FAKE_FLAG_GEMS_NO_DEVICE", "1")
    result = run_pytest("suites/test_convergence.py", "--vendor", "nvidia-sm90", "--mode",
                        "interpreter", "--impl", "liger", "--impl", "flag_gems", "-p",
                        "no:xdist", "--hypothesis-profile", "ci", "-rs")
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert "1 failed, 1 skipped" in out, out
    assert "training loss at step 0" in out and "rope: library forward, torch backward" in out
    # Liger's interpreter gaps fall back to torch, saying why
    assert "swiglu: torch (Liger's kernel calls .to() on a float argument" in out
    assert "not supported: flag_gems cannot be imported here" in out
