"""kernels/fast_launch.py: a compiled kernel launched directly must be the one Triton
would launch, and every launch must still be seen by the harness."""
import pytest
import torch
import triton
import triton.language as tl

from kernels import fast_launch
from kernels.fast_launch import _argument_key, launch
from triton_cts.execution import launches
from triton_cts.execution.launches import interpreted, record_launches
from triton_cts.profiles import load_profiles

GPU = torch.cuda.is_available()


@triton.jit
def _scale_kernel(X, Y, n, factor, BLOCK: tl.constexpr, TWICE: tl.constexpr = False):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(X + offs, mask=mask) * factor
    if TWICE:
        y = y * 2
    tl.store(Y + offs, y, mask=mask)


def test_the_key_separates_what_triton_specializes_on():
    """dtype and 16-byte alignment of pointers; 1, multiples of 16 and 64-bit integers:
    two calls share a compiled kernel only where Triton would compile one."""
    x = torch.zeros(64)
    assert _argument_key((x, 32)) == _argument_key((torch.ones(64), 48))
    assert _argument_key((x, 32)) != _argument_key((x[1:], 32))          # misaligned
    assert _argument_key((x, 32)) != _argument_key((x.half(), 32))       # dtype
    assert _argument_key((x, 32)) != _argument_key((x, 33))              # divisibility
    assert _argument_key((x, 33)) != _argument_key((x, 1))               # the value 1
    assert _argument_key((x, 33)) != _argument_key((x, 2**31 + 1))       # 64-bit
    assert _argument_key((x, 1.5)) == _argument_key((x, 2.5))            # floats: a type
    assert _argument_key((x, True)) != _argument_key((x, False))
    assert _argument_key((x, object())) is None                          # not modelled


def test_the_key_models_tensor_descriptors_as_triton_does():
    """A host tensor descriptor is specialized on its dtype and tile shape only: the
    tensor's shape and strides are runtime arguments."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    x = torch.zeros(64, 64)
    desc = lambda t, tile: TensorDescriptor.from_tensor(t, tile)  # noqa: E731
    assert _argument_key((desc(x, [16, 32]),)) == _argument_key((desc(x[:32], [16, 32]),))
    assert _argument_key((desc(x, [16, 32]),)) != _argument_key((desc(x, [32, 16]),))
    assert _argument_key((desc(x, [16, 32]),)) != _argument_key((desc(x.half(), [16, 32]),))


def test_a_launch_hook_keeps_tritons_path():
    """Profilers hook launches: with a hook in Triton's chain, no direct launch (it would
    skip the hook); Triton's empty chain is no hook."""
    from triton import knobs
    from kernels.fast_launch import _hooked
    chain = knobs.runtime.launch_enter_hook
    assert not _hooked()
    hook = lambda metadata: None  # noqa: E731
    chain.add(hook)
    try:
        assert _hooked()
    finally:
        chain.remove(hook)


def test_interpreted_and_captured_launches_take_tritons_path():
    """No compiled kernel is kept where none runs, and the launch is recorded as usual."""
    x = torch.arange(10, dtype=torch.float32)
    y = torch.empty_like(x)
    fast_launch.clear()
    with interpreted(), record_launches() as log:
        launch(_scale_kernel, (2,), x, y, 10, 3.0, BLOCK=8)
    torch.testing.assert_close(y, x * 3)
    with launches.capture_launches() as captured:
        launch(_scale_kernel, (2,), x, y, 10, 3.0, BLOCK=8, TWICE=True)
    assert [entry.kwargs for entry in log + captured] == [{"BLOCK": 8},
                                                          {"BLOCK": 8, "TWICE": True}]
    assert not captured[0].launched and not fast_launch._PLANS


@pytest.mark.skipif(not GPU, reason="needs a GPU: the direct launch calls a compiled kernel")
def test_direct_launches_match_tritons_and_are_recorded():
    fast_launch.clear()
    x = torch.randn(1000, device="cuda")
    for n, twice in ((1000, False), (1000, False), (992, True), (992, True), (1000, False)):
        y = torch.zeros_like(x)
        with record_launches() as log:
            launch(_scale_kernel, (triton.cdiv(n, 128),), x, y, n, 0.5, BLOCK=128, TWICE=twice)
        torch.testing.assert_close(y[:n], x[:n] * (1.0 if twice else 0.5))
        assert (y[n:] == 0).all()
        assert len(log) == 1 and log[0].grid == (triton.cdiv(n, 128), 1, 1)
        assert log[0].kwargs == {"BLOCK": 128, "TWICE": twice}
    assert len(fast_launch._PLANS) == 2  # (1000, False) and (992 = 62 x 16, True)
    # a misaligned pointer is another specialization: compiled by Triton, then kept
    y = torch.zeros(1001, device="cuda")
    launch(_scale_kernel, (8,), x, y[1:], 1000, 2.0, BLOCK=128)
    torch.testing.assert_close(y[1:], x * 2)
    assert len(fast_launch._PLANS) == 3


def _tuned_scale(pre_hook_calls: list):
    """An autotuned _scale_kernel: two configs whose pre-hook is counted, TWICE from a
    heuristic, the pick keyed on n."""
    def hook(nargs):
        pre_hook_calls.append(nargs["BLOCK"])
    configs = [triton.Config({"BLOCK": 8}, num_warps=1, pre_hook=hook),
               triton.Config({"BLOCK": 16}, num_warps=2, pre_hook=hook)]
    return triton.autotune(configs, key=["n"], do_bench=launches.autotune_timer)(
        triton.heuristics({"TWICE": lambda a: a["n"] > 12})(_scale_kernel))


def test_a_tuned_launch_repeats_the_autotuners_pick(monkeypatch):
    """From the second call with a pick key on, the autotuner is skipped and its pick is
    launched with what the autotuner would pass: the same grid, config, options and
    heuristic values, the config's pre-hook run. Run under the interpreter with the
    direct launch replaced by a Triton launch of what it was given."""
    from types import SimpleNamespace
    direct = []

    def launch_as_triton(kernel, grid, args, meta, meta_key, table):
        direct.append((kernel, grid, meta))
        return kernel[grid](*args, **meta)
    monkeypatch.setattr(fast_launch, "_triton_path", lambda: False)
    monkeypatch.setattr(fast_launch, "_launch", launch_as_triton)
    monkeypatch.setattr(fast_launch, "driver",
                        SimpleNamespace(active=SimpleNamespace(get_current_device=lambda: 0)))
    hooks = []
    tuner = _tuned_scale(hooks)
    grid = lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),)  # noqa: E731
    x = torch.arange(20, dtype=torch.float32)
    fast_launch.clear()
    outputs, logs = [], []
    with interpreted():
        for n in (10, 10, 20, 20):
            y = torch.zeros_like(x)
            with record_launches() as log:
                fast_launch.tuned_launch(tuner, grid, (x, y, n, 3.0), {}, (n,))
            outputs.append(y)
            logs.append(log)
    assert [len(log) for log in logs] == [3, 1, 3, 1]  # tuning: each config, then the pick
    assert len(direct) == 2 and all(kernel is _scale_kernel for kernel, _, _ in direct)
    for tuned, repeated in ((logs[0][-1], logs[1][0]), (logs[2][-1], logs[3][0])):
        assert (repeated.grid, repeated.kwargs) == (tuned.grid, tuned.kwargs)
    assert direct[1][2]["TWICE"] and not direct[0][2]["TWICE"]
    torch.testing.assert_close(outputs[1], outputs[0], rtol=0, atol=0)
    torch.testing.assert_close(outputs[3][:20], x * 6)
    assert len(hooks) == 8  # each config while tuning, the pick after, on every call
    fast_launch.clear()
    assert not fast_launch._PICKS


def test_a_launch_plan_is_computed_once_per_profile_and_key():
    """What a launcher reads from the profile is cached per (profile, key): a second call
    does not recompute it, another key or another profile (even a derived one with the
    same name) does, and clear() forgets it."""
    calls = []

    @fast_launch.launch_plan
    def plan(profile, n, dtype):
        calls.append((profile.name, n))
        return profile.elementwise_block(dtype, n), profile.compute_units

    base = load_profiles()["nvidia-sm90"]
    fewer_units = base.derive(**{"limits.compute_units": 7})
    assert plan(base, 64, torch.float32) == plan(base, 64, torch.float32)
    assert len(calls) == 1
    plan(base, 128, torch.float32)
    assert plan(fewer_units, 64, torch.float32)[1] == 7
    assert len(calls) == 3
    fast_launch.clear()
    plan(base, 64, torch.float32)
    assert len(calls) == 4


def test_launchers_return_their_outputs_in_the_callers_shape():
    """The launchers pass tensors to the kernels without [rows, N] views: every output
    must still have the shape the caller expects (checked without running a kernel)."""
    from kernels.layer_norm import layer_norm, layer_norm_backward
    from kernels.softmax import softmax

    profile = load_profiles()["nvidia-sm90"]
    with interpreted():
        x = torch.randn(2, 3, 16)
        w, b = torch.randn(16), torch.randn(16)
        out = layer_norm(x, w, b, profile=profile)
        assert out.y.shape == x.shape and out.rstd.shape == out.mean.shape == (2, 3)
        dx, dw, db = layer_norm_backward(torch.randn_like(x), x, w, b, out.mean, out.rstd,
                                         profile=profile)
        assert dx.shape == x.shape and dw.shape == db.shape == (16,)
        torch.testing.assert_close(out.y, torch.nn.functional.layer_norm(x, (16,), w, b),
                                   atol=1e-5, rtol=1e-5)
        assert softmax(torch.randn(5), profile=profile).shape == (5,)
        assert softmax(torch.tensor(2.0), profile=profile).shape == ()


def test_a_planned_launch_is_the_launch_it_fixes():
    """``PlannedLaunch(kernel, grid, **meta)(*args)`` runs and records what
    ``launch(kernel, grid, *args, **meta)`` does; compiled kernels are kept on the plan,
    not in the shared table."""
    x = torch.arange(10, dtype=torch.float32)
    planned = fast_launch.PlannedLaunch(_scale_kernel, (2,), BLOCK=8, TWICE=True)
    fast_launch.clear()
    with interpreted(), record_launches() as log:
        y1, y2 = torch.empty_like(x), torch.empty_like(x)
        planned(x, y1, 10, 3.0)
        launch(_scale_kernel, (2,), x, y2, 10, 3.0, BLOCK=8, TWICE=True)
    torch.testing.assert_close(y1, x * 6)
    torch.testing.assert_close(y1, y2)
    assert [(e.grid, e.kwargs) for e in log] == [((2, 1, 1), {"BLOCK": 8, "TWICE": True})] * 2
    assert "TWICE" in repr(planned)


@pytest.mark.skipif(not GPU, reason="needs a GPU: the direct launch calls a compiled kernel")
def test_a_planned_launch_calls_its_compiled_kernel_directly():
    fast_launch.clear()
    x = torch.randn(1000, device="cuda")
    planned = fast_launch.PlannedLaunch(_scale_kernel, (8,), BLOCK=128)
    for factor in (0.5, 2.0, 3.0):
        y = torch.zeros_like(x)
        with record_launches() as log:
            planned(x, y, 1000, factor)
        torch.testing.assert_close(y, x * factor)
        assert len(log) == 1 and log[0].grid == (8, 1, 1)
    assert len(planned._compiled) == 1 and not fast_launch._PLANS


# ---- remembered checks ------------------------------------------------------------------
CUDA = torch.device("cuda", 0)


def test_a_signature_holds_what_the_checks_read():
    """Type, shape, dtype and device of each argument: tensors that differ in any of them
    never share a signature; values and strides do not matter; non-tensors give None."""
    from kernels.fast_launch import signature
    x = torch.zeros(4, 8)
    assert signature(x, None) == signature(torch.ones(4, 8), None)
    assert signature(x, None) == signature(torch.zeros(8, 4).t().contiguous(), None)
    assert signature(x.t().contiguous().t(), None) == signature(x, None)   # strides ignored
    assert signature(x) != signature(torch.zeros(4, 9))
    assert signature(x) != signature(x.double())
    assert signature(x) != signature(torch.zeros(4, 8, device="meta"))
    assert signature(x) != signature(torch.nn.Parameter(x))
    assert signature(x, None) != signature(x, x)
    assert signature(x, [1, 2]) is None


def test_passed_checks_remember_only_cuda_inputs_per_profile():
    """Checks are skipped only where their outcome cannot change: CUDA inputs (CPU and
    meta tensors pass or fail by execution mode), the same profile object, a signature."""
    from kernels.fast_launch import PassedChecks, signature
    profiles = load_profiles()
    sm90, gfx942 = profiles["nvidia-sm90"], profiles["amd-gfx942"]
    table = PassedChecks()
    key = ("op", signature(torch.zeros(2)))
    assert table.remember(sm90, key, torch.device("cpu"), "cpu") == "cpu"
    assert table.get(sm90, key) is None
    table.remember(sm90, ("op", None), CUDA, "no signature")
    assert table.get(sm90, ("op", None)) is None
    table.remember(sm90, key, CUDA, "kept")
    assert table.get(sm90, key) == "kept"
    assert table.get(gfx942, key) is None
    fast_launch.clear()
    assert table.get(sm90, key) is None


def test_passed_checks_stay_bounded():
    from kernels.fast_launch import PassedChecks
    profile = load_profiles()["nvidia-sm90"]
    table = PassedChecks()
    for i in range(PassedChecks.LIMIT + 10):
        table.remember(profile, (i, ()), CUDA, i)
    assert len(table._table) <= PassedChecks.LIMIT
    assert table.get(profile, (PassedChecks.LIMIT + 9, ())) == PassedChecks.LIMIT + 9


@pytest.fixture
def cpu_checks_remembered(monkeypatch):
    """CPU tensors treated as the CUDA tensors whose checks are remembered, under the
    interpreter: the launchers' skip path, run without a GPU."""
    from kernels.fast_launch import PassedChecks
    real = PassedChecks.remember

    def remember(self, profile, key, device, value):
        return real(self, profile, key, CUDA if device.type == "cpu" else device, value)
    monkeypatch.setattr(PassedChecks, "remember", remember)
    fast_launch.clear()
    with interpreted():
        yield
    fast_launch.clear()


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_layer_norm_checks_once_per_signature_and_still_rejects_bad_inputs(
        direction, cpu_checks_remembered, monkeypatch):
    """The second call with a signature skips the checks and gives the same result; an
    input that differs in shape, dtype or presence of an operand is checked (and rejected)
    though a good signature was remembered."""
    from kernels.layer_norm import forward, layer_norm, layer_norm_backward, tiles
    from triton_cts.execution.input_checks import ShapeMismatchError, UnsupportedDtypeError
    profile = load_profiles()["nvidia-sm90"]
    module, name = ((forward, "_check_forward") if direction == "forward"
                    else (tiles, "_check_backward"))
    calls = []
    real = getattr(module, name)
    monkeypatch.setattr(module, name, lambda *a: (calls.append(a[0]), real(*a))[1])
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 40, generator=g)
    w, b = torch.randn(40, generator=g), torch.randn(40, generator=g)
    dy = torch.randn(3, 40, generator=g)
    ref = layer_norm(x, w, b, profile=profile)

    def call(x=x, w=w, b=b, dy=dy):
        if direction == "forward":
            return layer_norm(x, w, b, profile=profile)[:3]
        return layer_norm_backward(dy, x, w, b, ref.mean, ref.rstd, profile=profile)
    first = call()
    calls.clear()
    again = call(x=x.clone(), dy=dy.clone())
    assert calls == [], "a remembered signature was checked again"
    for got, want in zip(again, first):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    with pytest.raises(ShapeMismatchError):
        call(w=torch.randn(41))
    with pytest.raises(UnsupportedDtypeError):
        call(x=x.to(torch.int32))
    with pytest.raises(ShapeMismatchError):
        call(b=torch.randn(40, 1))
    assert len(calls) == 3


@pytest.mark.skipif(not GPU, reason="needs a GPU: the direct launch calls a compiled kernel")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("b_layout", ["row-major", "transposed"])
def test_matmul_launches_the_autotuners_pick_directly(dtype, b_layout, monkeypatch):
    """From its third call with a key on, matmul (either kernel: tensor descriptors or
    pointers) launches the autotuner's pick without Triton's ``JITFunction.run``, with the
    first call's result bit for bit (the first call tunes or finds the pick, the second
    keeps the pick's compiled kernel)."""
    from triton.runtime.jit import JITFunction

    from kernels.matmul import matmul
    from triton_cts.profiles.vendor_selection import attached_device, match_device
    profile = match_device(attached_device(), load_profiles())
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(300, 200, device="cuda", dtype=dtype, generator=g)
    b = torch.randn(200, 136, device="cuda", dtype=dtype, generator=g)
    if b_layout == "transposed":
        b = b.t().contiguous().t()
    fast_launch.clear()
    first = matmul(a, b, profile=profile)
    matmul(a, b, profile=profile)
    runs = []
    real = JITFunction.run
    monkeypatch.setattr(JITFunction, "run", lambda self, *a, **k: (runs.append(self),
                                                                   real(self, *a, **k))[1])
    again = matmul(a, b, profile=profile)
    assert runs == [] and fast_launch._PICKS
    torch.testing.assert_close(again, first, rtol=0, atol=0)
    torch.testing.assert_close(again.float(), a.float() @ b.float(), rtol=2e-2, atol=2e-1)
    # small products: from the call after, the launch is replayed on new inputs of the
    # same layout (Replays); tensor-descriptor launches are not
    from kernels import matmul as module
    replays = len([v for v in module._REPLAYS._table.values() if type(v[1]) is tuple])
    assert replays == (module._tma_layout(a, b, again, profile, False, False) is None)
    a2, b2 = a * 0.5, (b.t() * 2).t() if b_layout == "transposed" else b * 2
    torch.testing.assert_close(matmul(a2, b2, profile=profile), again, rtol=0, atol=0)
    assert runs == []


def test_matmul_checks_once_per_signature_and_still_rejects_bad_inputs(
        cpu_checks_remembered, monkeypatch):
    """As the layer norm's: a remembered signature and precision skip matmul's checks;
    another shape, dtype or precision is checked and rejected."""
    from kernels import matmul as module
    from triton_cts.execution.input_checks import ShapeMismatchError, UnsupportedDtypeError
    profile = load_profiles()["nvidia-sm90"]
    calls = []
    real = module._check
    monkeypatch.setattr(module, "_check", lambda *a: (calls.append(a[2]), real(*a))[1])
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(16, 32, generator=g), torch.randn(32, 16, generator=g)
    first = module.matmul(a, b, profile=profile, input_precision="ieee")
    again = module.matmul(a.clone(), b.clone(), profile=profile, input_precision="ieee")
    assert calls == ["ieee"], "a remembered signature was checked again"
    torch.testing.assert_close(again, first, rtol=0, atol=0)
    with pytest.raises(ShapeMismatchError):
        module.matmul(a, torch.randn(31, 16), profile=profile, input_precision="ieee")
    with pytest.raises(UnsupportedDtypeError):
        module.matmul(a, b.double(), profile=profile, input_precision="ieee")
    with pytest.raises(ValueError):
        module.matmul(a, b, profile=profile, input_precision="tf33")
    with pytest.raises(ValueError, match="input_precision"):  # unhashable: still named
        module.matmul(a, b, profile=profile, input_precision=["ieee"])
    assert len(calls) == 5


@pytest.mark.parametrize("op", ["cross_entropy", "rope", "attention", "attention_backward",
                                "max_dim", "prod_dim"])
def test_launchers_check_once_per_signature_and_still_reject_bad_inputs(
        op, cpu_checks_remembered, monkeypatch):
    """Cross-entropy, RoPE, attention (forward and backward) and the per-row max and
    product remember what passed their checks as matmul does: a second call with the same
    signature and options skips them, anything else is checked."""
    import kernels.attention as attention
    import kernels.attention.plan as attention_plan
    import kernels.cross_entropy as ce
    import kernels.reductions as reductions
    import kernels.rope as rope
    from triton_cts.execution.input_checks import ShapeMismatchError, UnsupportedDtypeError
    from triton_cts.ops.rope import make_tables
    profile = load_profiles()["nvidia-sm90"]
    module, check = {"cross_entropy": (ce, "_check"), "rope": (rope, "_check"),
                     "max_dim": (reductions, "_check_dim"),
                     "prod_dim": (reductions, "_check_dim")}.get(op, (attention_plan, "_check"))
    calls = []
    real = getattr(module, check)
    monkeypatch.setattr(module, check,
                        lambda *a, **kw: (calls.append(a[0]), real(*a, **kw))[1])
    g = torch.Generator().manual_seed(0)
    if op in ("max_dim", "prod_dim"):
        x = torch.randn(4, 40, generator=g)
        call = lambda x=x: getattr(reductions, op)(x, profile=profile)  # noqa: E731
        bad = [(UnsupportedDtypeError, dict(x=x.to(torch.int16))),
               (TypeError, dict(x=[1.0, 2.0]))]
        if op == "max_dim":  # prod_dim of an empty row is 1
            bad.append((IndexError, dict(x=x[:, :0])))
    elif op == "cross_entropy":
        x, y = torch.randn(4, 40, generator=g), torch.randint(0, 40, (4,), generator=g)
        call = lambda x=x, y=y, **kw: ce.cross_entropy(x, y, profile=profile, **kw)  # noqa: E731
        bad = [(ShapeMismatchError, dict(y=y[:3])), (ValueError, dict(reduction="avg")),
               (ValueError, dict(reduction=["mean"]))]
    elif op == "rope":
        x = torch.randn(1, 6, 2, 16, generator=g)
        cos, sin = make_tables(6, 16, torch.float32, "cpu")
        call = lambda x=x, **kw: rope.rope(x, cos, sin, profile=profile, **kw)  # noqa: E731
        bad = [(ShapeMismatchError, dict(x=x[..., :8])), (ShapeMismatchError, dict(offset=1)),
               (ShapeMismatchError, dict(rotary_dim=6))]
    else:
        x, k, v, do = (torch.randn(1, 2, 24, 16, generator=g) for _ in range(4))

        def call(x=x, k=k, v=v, **kw):
            if op == "attention":
                return attention.attention_forward(x, k, v, profile=profile, **kw)
            return attention.attention_backward(x, k, v, kw.pop("do", do), profile=profile,
                                                **kw)
        bad = [(ShapeMismatchError, dict(k=k[..., :8], v=v[..., :8])),
               (UnsupportedDtypeError, dict(v=v.double())),
               (ValueError, dict(causal_offset=1)),
               (ShapeMismatchError, dict(x=x[:, :1]) if op == "attention" else
                dict(do=do[:, :, :7]))]
    first = call()
    checked = len(calls)  # the backward checks its forward's inputs too
    again = call(x=x.clone())
    assert len(calls) == checked, "a remembered signature was checked again"
    for got, want in zip(again, first):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    for error, kwargs in bad:
        with pytest.raises(error):
            call(**kwargs)
    assert len(calls) == checked + len(bad)


@pytest.fixture
def direct_launches_in_the_interpreter(monkeypatch):
    """The direct path (and so the recording of replays) taken under the interpreter: a
    "compiled kernel" stands for its JITFunction and constexprs, and running it launches
    them through Triton (interpreted). Yields the launches run that way."""
    from types import SimpleNamespace
    ran = []

    def direct(kernel, grid, args, meta, meta_key, table):
        kernel[grid](*args, **meta)  # noted as any launch is
        dims = tuple(grid) + (1,) * (3 - len(grid))
        recorded = getattr(fast_launch._recording, "launches", None)
        if recorded is not None:
            recorded.append((kernel, meta, dims, SimpleNamespace(kernel=kernel, meta=meta),
                             args, ()))

    def run_compiled(compiled, dims, device, args, tail):
        ran.append((compiled.kernel, dims))
        compiled.kernel[dims](*args, **compiled.meta)
    monkeypatch.setattr(fast_launch, "_triton_path", lambda: False)
    monkeypatch.setattr(fast_launch, "_launch", direct)
    monkeypatch.setattr(fast_launch, "_run_compiled", run_compiled)
    monkeypatch.setattr(fast_launch, "driver",
                        SimpleNamespace(active=SimpleNamespace(get_current_device=lambda: 0)))
    fast_launch.clear()
    with interpreted():
        yield ran
    fast_launch.clear()


def test_a_replayed_call_makes_the_recorded_launches_on_its_own_tensors(
        direct_launches_in_the_interpreter):
    """A call recorded under a key is replayed for the next call with that key: the same
    kernels, grids and constants, on that call's tensors. Launches that take a temporary
    of the call, or that took Triton's path, are never replayed; a key that keeps
    failing is given up after a few calls."""
    from kernels.fast_launch import Replays
    ran = direct_launches_in_the_interpreter
    profile = load_profiles()["nvidia-sm90"]
    replays = Replays()

    def scale(x, n, factor, temporary=False):
        y = torch.zeros_like(x)
        key = (x.shape, x.dtype, n, factor, temporary)
        if replays.replay(profile, key, (x, y)):
            return y
        with replays.record(profile, key, (x, y)):
            launch(_scale_kernel, (triton.cdiv(n, 8),), x, y, n, factor, BLOCK=8)
            if temporary:  # y = 2 * y through a temporary the replay cannot know
                t = y.clone()
                launch(_scale_kernel, (triton.cdiv(n, 8),), t, y, n, 2.0, BLOCK=8)
        return y
    x = torch.arange(20, dtype=torch.float32)
    torch.testing.assert_close(scale(x, 20, 3.0), x * 3)
    assert ran == []                                      # recorded, not replayed
    other = torch.arange(20, 40, dtype=torch.float32)
    torch.testing.assert_close(scale(other, 20, 3.0), other * 3)
    assert ran == [(_scale_kernel, (3, 1, 1))]            # replayed on the new tensors
    shifted = torch.arange(21, dtype=torch.float32)[1:]  # 4 bytes past a 16-byte boundary
    for _ in range(2):  # the key is x's, but Triton specializes pointers on alignment
        torch.testing.assert_close(scale(shifted, 20, 3.0), shifted * 3)
    assert len(ran) == 1                                  # neither replayed nor recorded
    torch.testing.assert_close(scale(x, 12, 3.0)[:12], x[:12] * 3)
    assert len(ran) == 1                                  # another key: recorded first
    for _ in range(Replays.ATTEMPTS + 2):
        torch.testing.assert_close(scale(x, 20, 0.5, temporary=True), x)
    assert len(ran) == 1                                  # never replayed
    assert replays._table[id(profile), (x.shape, x.dtype, 20, 0.5, True)][1] == 0  # given up


def test_matmul_replays_a_small_products_launch_for_inputs_of_one_layout(
        direct_launches_in_the_interpreter):
    """From the recorded call on, matmul's launch for a given layout (shapes, strides,
    dtypes, alignment, precision) is replayed on new inputs; another layout is not."""
    from kernels.matmul import matmul
    ran = direct_launches_in_the_interpreter
    profile = load_profiles()["nvidia-sm90"]
    g = torch.Generator().manual_seed(0)
    pairs = [(torch.randn(24, 40, generator=g), torch.randn(40, 16, generator=g))
             for _ in range(5)]
    for a, b in pairs:
        torch.testing.assert_close(matmul(a, b, profile=profile, input_precision="ieee"),
                                   a @ b, rtol=1e-4, atol=1e-4)
    replayed = len(ran)
    assert replayed >= 1 and all(kernel.__name__ == "_matmul_kernel" for kernel, _ in ran)
    a, b = pairs[0]
    b_t = b.t().contiguous().t()  # the same values, K-major: another layout
    torch.testing.assert_close(matmul(a, b_t, profile=profile, input_precision="ieee"), a @ b,
                               rtol=1e-4, atol=1e-4)
    assert len(ran) == replayed
    # tf32 on sm90 reads B K-major: a row-major B is copied first, into a buffer the
    # call makes, so that the copy is replayed too
    for a, b in pairs:
        torch.testing.assert_close(matmul(a, b, profile=profile, input_precision="tf32"),
                                   a @ b, rtol=1e-2, atol=1e-2)
    names = [kernel.__name__ for kernel, _ in ran[replayed:]]
    assert names and names == ["_contiguous_kernel", "_matmul_kernel"] * (len(names) // 2)


def test_a_call_with_aliased_tensors_is_not_recorded_for_calls_without(
        direct_launches_in_the_interpreter):
    """matmul(a, a) has the key of matmul(a, b) (shapes, strides, dtypes): its launches,
    kept with both operands in one tensor, would read a where a later call's b is. A call
    whose tensors alias is launched but not recorded, and calls on distinct tensors then
    replay their own recording."""
    from kernels.matmul import matmul
    ran = direct_launches_in_the_interpreter
    profile = load_profiles()["nvidia-sm90"]
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(16, 16, generator=g), torch.randn(16, 16, generator=g)
    for _ in range(2):
        torch.testing.assert_close(matmul(a, a, profile=profile, input_precision="ieee"),
                                   a @ a, rtol=1e-4, atol=1e-4)
    assert ran == []
    for _ in range(2):
        torch.testing.assert_close(matmul(a, b, profile=profile, input_precision="ieee"),
                                   a @ b, rtol=1e-4, atol=1e-4)
    assert len(ran) == 1  # the second call on distinct tensors replays the first
    torch.testing.assert_close(matmul(b, b, profile=profile, input_precision="ieee"), b @ b,
                               rtol=1e-4, atol=1e-4)  # a recording replayed on aliases
    assert len(ran) == 2


def test_layer_norm_replays_its_launches_for_inputs_of_one_signature(
        direct_launches_in_the_interpreter, cpu_checks_remembered):
    """From the second call of a signature (and eps) on, the forward's launch and the
    partial-sum backward's two are replayed on each call's own tensors, with the results
    of the recorded path; another eps is recorded anew; dropout (a new seed each call)
    and a residual that is x itself are launched but never replayed."""
    import torch.nn.functional as F
    from kernels.layer_norm import layer_norm, layer_norm_backward
    ran = direct_launches_in_the_interpreter
    profile = load_profiles()["nvidia-sm90"]
    g = torch.Generator().manual_seed(0)
    w, b = torch.randn(40, generator=g), torch.randn(40, generator=g)
    for step in range(3):
        x = torch.randn(6, 40, generator=g).requires_grad_()
        dy = torch.randn(6, 40, generator=g)
        out = layer_norm(x.detach(), w, b, 1e-5, profile=profile)
        grads = layer_norm_backward(dy, x.detach(), w, b, out.mean, out.rstd, profile=profile)
        wt, bt = w.clone().requires_grad_(), b.clone().requires_grad_()
        want = F.layer_norm(x, (40,), wt, bt, 1e-5)
        torch.testing.assert_close(out.y, want, rtol=1e-5, atol=1e-5)
        for got, expected in zip(grads, torch.autograd.grad(want, (x, wt, bt), dy)):
            torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    names = [kernel.__name__ for kernel, _ in ran]
    assert names == ["_layer_norm_fwd_fused_kernel", "_layer_norm_bwd_fused_kernel",
                     "_sum_rows_kernel"] * 2
    # a caller's tensor 4 bytes past a 16-byte boundary (the backward tests only the
    # caller's for alignment): launched as Triton specializes it, not replayed
    shifted = torch.randn(6 * 40 + 1, generator=g)[1:].view(6, 40)
    want = torch.autograd.grad(F.layer_norm(x, (40,), w, b, 1e-5), x, shifted)[0]
    torch.testing.assert_close(layer_norm_backward(shifted, x.detach(), w, b, out.mean,
                                                   out.rstd, profile=profile)[0],
                               want, rtol=1e-4, atol=1e-4)
    assert len(ran) == 6
    layer_norm(x.detach(), w, b, 1e-3, profile=profile)
    assert len(ran) == 6                                  # another eps: recorded first
    for _ in range(3):
        layer_norm(x.detach(), w, b, profile=profile, dropout_p=0.5)
        same = x.detach().clone()
        out = layer_norm(same, w, b, 1e-5, residual=same, profile=profile)
        torch.testing.assert_close(out.residual_out, 2 * same)
    assert len(ran) == 6


def test_attention_replays_its_launches_for_inputs_of_one_layout_and_scale(
        direct_launches_in_the_interpreter, cpu_checks_remembered):
    """Attention's forward launch and its backward's three are replayed from the second
    call of a signature on; q of the same shape in another layout (its strides are
    arguments) and another scale are recorded anew, with the right results."""
    from kernels.attention import attention_backward, attention_forward
    ran = direct_launches_in_the_interpreter
    profile = load_profiles()["nvidia-sm90"]
    g = torch.Generator().manual_seed(0)

    def check(q, k, v, do, scale=None):
        o, _ = attention_forward(q, k, v, scale=scale, profile=profile)
        grads = attention_backward(q, k, v, do, scale=scale, profile=profile)
        qt, kt, vt = (t.clone().requires_grad_() for t in (q, k, v))
        want = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, scale=scale)
        torch.testing.assert_close(o, want, rtol=1e-4, atol=1e-4)
        for got, expected in zip(grads, torch.autograd.grad(want, (qt, kt, vt), do)):
            torch.testing.assert_close(got, expected, rtol=1e-3, atol=1e-3)
    shape = (1, 2, 24, 16)
    for _ in range(2):
        check(*(torch.randn(shape, generator=g) for _ in range(4)))
    names = [kernel.__name__ for kernel, _ in ran]
    # four forwards (the backward runs its own), the first recorded; two backwards
    assert names == ["_attn_fwd"] * 3 + ["_attn_bwd_delta", "_attn_bwd_grads", "_attn_bwd_grads"]
    q_other = torch.randn(1, 24, 2, 16, generator=g).transpose(1, 2)  # shape's, other strides
    check(q_other, *(torch.randn(shape, generator=g) for _ in range(3)))
    check(*(torch.randn(shape, generator=g) for _ in range(4)), scale=0.5)
    assert len(ran) == 6 + 2  # each new key: its backward's forward replays its forward
