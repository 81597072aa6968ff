"""Launcher contract, shown on GELU: input errors, empty inputs, strides, grid caps, and
interpreter and compile modes sharing one process."""
import pytest
import torch
import triton.language as tl

from kernels.gelu import gelu
from kernels import reductions_tuning
from kernels.softmax import softmax
from triton_cts.execution import launches
from triton_cts.toolchains.cross_compile import compile_launch
from triton_cts.execution.input_checks import UnsupportedDtypeError, WrongDeviceError
from triton_cts.execution.launches import interpreted, record_launches
from triton_cts.execution.interpreter_defects import known_defect
from triton_cts.execution.modes import Mode, execute
from triton_cts.profiles import cdiv, load_profiles

PROFILES = load_profiles()
SM90, NPU = PROFILES["nvidia-sm90"], PROFILES["npu-ascend910b"]


def reference(x):
    return torch.nn.functional.gelu(x.double(), approximate="tanh")


def test_unsupported_dtypes_name_the_op_and_profile():
    with interpreted(), pytest.raises(UnsupportedDtypeError, match="gelu: 'x' has dtype torch.int32"):
        gelu(torch.ones(4, dtype=torch.int32), profile=SM90)
    with interpreted(), pytest.raises(UnsupportedDtypeError, match="profile 'npu-ascend910b'"):
        gelu(torch.ones(4, dtype=torch.float64), profile=NPU)


def test_cpu_tensors_outside_the_interpreter_are_refused():
    with pytest.raises(WrongDeviceError, match="inputs are on the CPU"):
        gelu(torch.ones(4), profile=SM90)
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        gelu([1.0, 2.0], profile=SM90)


def test_layer_norm_backward_names_a_bad_mean_or_rstd():
    from kernels.layer_norm import layer_norm_backward
    x = torch.randn(4, 8)
    w, b, dy = torch.ones(8), torch.zeros(8), torch.randn(4, 8)
    mean, rstd = torch.zeros(4), torch.ones(4)
    with interpreted():
        with pytest.raises(UnsupportedDtypeError, match="'rstd' has dtype torch.float16"):
            layer_norm_backward(dy, x, w, b, mean, rstd.half(), profile=SM90)
        with pytest.raises(TypeError, match="'mean' must be a torch.Tensor"):
            layer_norm_backward(dy, x, w, b, [0.0] * 4, rstd, profile=SM90)
        with pytest.raises(WrongDeviceError, match="cannot run on device 'meta'"):
            layer_norm_backward(dy, x, w, b, mean.to("meta"), rstd.to("meta"), profile=SM90)
        with pytest.raises(ValueError, match="dy and rstd are required"):
            layer_norm_backward(dy, x, w, b, mean, None, profile=SM90)
        with pytest.raises(ValueError, match="'rstd' must hold one value per row"):
            layer_norm_backward(dy, x, w, b, mean, torch.ones(5), profile=SM90)
        dx, dw, db = layer_norm_backward(dy, x, w, b, mean, rstd, profile=SM90)
    assert dx.shape == x.shape and dw.shape == db.shape == (8,)


@pytest.mark.parametrize("precision, dtype", [(None, tl.float32), ("ieee", tl.float32),
                                              ("tf32", tl.float32), (None, tl.float16)])
def test_matmul_input_precision_reaches_the_kernel(precision, dtype):
    """float32 dots as asked (benchmarks compare like for like), the profile's default
    without; 16-bit dots ignore it."""
    from kernels.matmul import matmul
    torch_dtype = torch.float32 if dtype == tl.float32 else torch.float16
    # rows of 6 or 12 elements (12 or 24 bytes, in either order), which no tensor
    # descriptor takes: the pointer kernel
    a, b = torch.ones(16, 6, dtype=torch_dtype), torch.ones(6, 12, dtype=torch_dtype)
    with interpreted(), record_launches() as log:
        matmul(a, b, profile=SM90, input_precision=precision)
    want = "ieee" if dtype == tl.float16 or precision == "ieee" else "tf32"
    kernels = [launch for launch in log if launch.name == "_matmul_kernel"]
    assert kernels and all(k.kwargs["INPUT_PRECISION"] == want for k in kernels)


def test_matmul_input_precision_errors_name_the_problem():
    from kernels.matmul import matmul
    a = torch.ones(4, 4)
    with interpreted(), pytest.raises(ValueError, match="input_precision must be"):
        matmul(a, a, profile=SM90, input_precision="tf32x3")
    no_tf32 = SM90.derive(**{"dtypes.tf32": False})
    with interpreted(), pytest.raises(UnsupportedDtypeError, match="runs no tf32 dots"):
        matmul(a, a, profile=no_tf32, input_precision="tf32")


def test_matmul_tunes_once_per_power_of_two_bucket():
    """A new size inside a tuned bucket reuses the tuned config (no benchmarking, no
    compile of every config); a size in a new bucket tunes, and each answer is right."""
    from kernels.matmul import matmul
    from triton_cts.execution.autotune_probe import observe_autotuning
    two = SM90.derive(name="nvidia-sm90~two-configs", **{"autotune.matmul": [
        {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 16, "GROUP_SIZE_M": 1,
         "num_warps": 1, "num_stages": 1},
        {"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 16, "GROUP_SIZE_M": 2,
         "num_warps": 1, "num_stages": 1}]})
    benchmarked = []
    for m, n, k in ((40, 24, 20), (50, 31, 17), (70, 24, 20)):  # buckets 64, 64, 128 rows
        a, b = torch.randn(m, k), torch.randn(k, n)
        with interpreted(), observe_autotuning(fresh=False, cpu_bench=True) as calls:
            out = matmul(a, b, profile=two, input_precision="ieee")
        torch.testing.assert_close(out, a @ b, rtol=1e-5, atol=1e-5)
        benchmarked.append(sum(len(c.benchmarked) for c in calls))
    assert benchmarked == [2, 0, 2]


def _captured_matmul_configs(profile, dtype, precision):
    from kernels.matmul import matmul
    from triton_cts.toolchains.cross_compile import every_autotune_config
    a, b = torch.ones(300, 200, dtype=dtype), torch.ones(200, 500, dtype=dtype)
    with every_autotune_config(), launches.capture_launches() as log:
        matmul(a, b, profile=profile, input_precision=precision)
    return {(l.kwargs["BLOCK_SIZE_M"], l.kwargs["BLOCK_SIZE_N"], l.kwargs["num_warps"])
            for l in log}


def test_ieee_float32_matmul_drops_configs_whose_fma_accumulator_crowds_registers():
    """IEEE float32 dots run on FMAs: a config whose accumulator takes over a third of a
    thread's registers (limits.registers_per_thread) spills and is never tuned or compiled;
    tf32 and 16-bit dots (tensor cores) and a profile that does not model registers keep
    every config."""
    every = {(c["BLOCK_SIZE_M"], c["BLOCK_SIZE_N"], c["num_warps"])
             for c in SM90.autotune_configs("matmul")}
    ieee = _captured_matmul_configs(SM90, torch.float32, "ieee")
    from kernels.matmul import FMA_ACCUMULATOR_SHARE
    lanes, registers = SM90.warp_size, SM90.registers_per_thread
    assert ieee == {(m, n, w) for m, n, w in every
                    if m * n // (w * lanes) * FMA_ACCUMULATOR_SHARE <= registers}
    assert len(ieee) == 5  # 128 x 64 and 64 x 128 at 4 warps (64 registers) are the largest
    # (tf32 on the pointer kernel: nvidia-sm90's own tf32 takes tensor descriptors)
    pointer_tf32 = SM90.derive(**{"dtypes.tf32_k_major": False})
    assert _captured_matmul_configs(pointer_tf32, torch.float32, "tf32") == every
    assert _captured_matmul_configs(SM90, torch.bfloat16, None) == every
    unmodelled = SM90.derive(name="nvidia-sm90~no-registers", **{"limits.registers_per_thread": 0})
    assert _captured_matmul_configs(unmodelled, torch.float32, "ieee") == every


def test_matmul_tunes_each_float32_precision_on_its_own():
    """tf32 and IEEE calls in one bucket do not share a tuned config: the IEEE call may
    not run a config its pruning dropped."""
    from kernels.matmul import matmul
    from triton_cts.execution.autotune_probe import observe_autotuning
    # both precisions on the pointer kernel (nvidia-sm90's own tf32 takes descriptors)
    two = SM90.derive(name="nvidia-sm90~two-configs-precision", **{"autotune.matmul": [
        {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 16, "GROUP_SIZE_M": 1,
         "num_warps": 1, "num_stages": 1},
        {"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 16, "GROUP_SIZE_M": 2,
         "num_warps": 1, "num_stages": 1}], "dtypes.tf32_k_major": False})
    a, b = torch.randn(40, 20), torch.randn(20, 24)
    benchmarked = []
    for i, precision in enumerate(("tf32", "ieee", "ieee")):
        with interpreted(), observe_autotuning(fresh=i == 0, cpu_bench=True) as calls:
            matmul(a, b, profile=two, input_precision=precision)
        benchmarked.append(sum(len(c.benchmarked) for c in calls))
    assert benchmarked == [2, 2, 0]


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 5, 7)])
def test_empty_inputs_launch_nothing(shape):
    with interpreted(), record_launches() as log:
        y = gelu(torch.empty(shape), profile=SM90)
    assert y.shape == shape and log == []


def test_non_contiguous_input_and_grid_stride_cover_every_element():
    x = torch.randn(64, 200).t()[:, ::3]          # transposed and strided
    tiny = SM90.derive(**{"launch.max_grid_num": 3, "launch.elementwise_block_bytes": 64})
    with interpreted(), record_launches() as log:
        y = gelu(x, profile=tiny)
    assert [launch.grid for launch in log] == [(3, 1, 1)]   # capped: loops inside
    torch.testing.assert_close(y.double(), reference(x), rtol=1.3e-6, atol=1e-5)


def test_interpreter_and_cross_compile_share_one_process():
    x = torch.randn(5000)
    for profile in (PROFILES["amd-gfx942"], SM90, PROFILES["amd-gfx942"]):
        out = execute(gelu, Mode.INTERPRETER, profile, (x,))
        torch.testing.assert_close(out.double(), reference(x), rtol=1.3e-6, atol=1e-5)
        (launch,) = execute(gelu, Mode.COMPILE, profile, (x,))
        stats = compile_launch(launch, profile)
        assert stats.violations == [] and stats.threads_per_block <= 1024


def test_the_language_is_patched_once_per_interpreted_launch_and_restored(monkeypatch):
    """JIT helpers (tl.max, tl.sum, the kernel's own) called in every program find the
    language patched by the launch instead of patching it again; afterwards it is not."""
    calls = []
    patch = launches._patch_lang
    monkeypatch.setattr(launches, "_patch_lang", lambda fn: calls.append(fn) or patch(fn))
    x = torch.randn(7, 100)
    tiny = SM90.derive(**{"launch.max_grid_num": 3})
    with interpreted(), record_launches() as log:
        y = softmax(x, profile=tiny)
    torch.testing.assert_close(y, torch.softmax(x, -1))
    assert log and len(calls) == len(log)
    assert tl.core.is_builtin(tl.program_id) and tl.core.is_builtin(tl.core.program_id)


def _kernel_modules():
    import importlib
    import pkgutil

    import kernels
    return [importlib.import_module(m.name)
            for m in pkgutil.walk_packages(kernels.__path__, "kernels.")]


def test_no_kernel_module_holds_a_nan_constexpr():
    # Triton 3.6 checks on every call after the first that the globals a kernel read are
    # unchanged (old != new): a NaN global never equals itself, so the second launch raises
    # "Global variable ... has changed" (seen with cross_entropy on an H100)
    offenders = [f"{module.__name__}.{name}" for module in _kernel_modules()
                 for name, value in vars(module).items()
                 if isinstance(value, tl.constexpr) and isinstance(value.value, float)
                 and value.value != value.value]
    assert not offenders, f"NaN constexpr globals: {offenders}"


def test_a_kernel_module_resolved_inside_the_interpreter_keeps_jit_kernels(tmp_path, monkeypatch):
    # triton.jit decides at decoration time; a module first imported while interpreting
    # would keep InterpretedFunction kernels, which compile mode cannot lower
    from triton.runtime.jit import JITFunction
    from triton_cts.ops.implementation import resolve
    (tmp_path / "late_kernels.py").write_text(
        "import triton\n\n@triton.jit\ndef k(X):\n    pass\n\ndef launcher():\n    return k\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with interpreted():
        kernel = resolve("late_kernels:launcher")()
    assert isinstance(kernel, JITFunction)


def test_a_kernel_module_imported_inside_the_interpreter_keeps_jit_kernels(tmp_path,
                                                                          monkeypatch):
    # the same for any import inside an interpreted block (a test's, a library's lazy
    # one): an InterpretedFunction kernel would run interpreted in device mode too
    import importlib

    from triton.runtime.jit import JITFunction
    (tmp_path / "lazy_kernels.py").write_text(
        "import triton\nimport triton.language as tl\n\n"
        "@triton.jit\ndef fill(X, value):\n    tl.store(X + tl.arange(0, 4), value)\n\n"
        "@triton.jit(do_not_specialize=['value'])\n"
        "def fill_unspecialized(X, value):\n    tl.store(X + tl.arange(0, 4), value)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with interpreted():
        module = importlib.import_module("lazy_kernels")
        out = torch.zeros(4)
        module.fill[(1,)](out, 3.0)  # still interpreted inside the block
        module.fill_unspecialized[(1,)](out, out[0].item() + 1)
    assert isinstance(module.fill, JITFunction)
    assert isinstance(module.fill_unspecialized, JITFunction)
    assert out.tolist() == [4.0] * 4


def test_reduction_and_loss_launchers_return_the_callers_shapes():
    """The launchers hand the kernels pointers, not [rows, N] or flat views: results still
    have torch's shapes, for 0-d, 1-d and 3-d inputs, on the whole-row and chunked paths."""
    from kernels.cross_entropy import cross_entropy, scale_gradient
    from kernels.reductions import max_all, max_all_atomic, max_dim, prod_all, prod_dim
    chunked = SM90.derive(**{"launch.max_fused_size_bytes": 64, "limits.compute_units": 8})
    with interpreted():
        for profile in (SM90, chunked):
            for x in (torch.tensor(1.5), torch.randn(40), torch.randn(2, 3, 40)):
                assert max_all(x, profile=profile).shape == ()
                torch.testing.assert_close(max_all_atomic(x, profile=profile), x.max())
                torch.testing.assert_close(prod_all(x, profile=profile), x.prod())
                values, indices = max_dim(x, profile=profile)
                want = torch.max(x, -1)
                torch.testing.assert_close(values, want.values)
                torch.testing.assert_close(indices, want.indices)
                torch.testing.assert_close(prod_dim(x, profile=profile), x.prod(-1))
        for logits in (torch.randn(5), torch.randn(2, 3, 5)):
            labels = torch.randint(0, 5, logits.shape[:-1])
            loss, dlogits = cross_entropy(logits, labels, reduction="none", profile=SM90)
            torch.testing.assert_close(loss, torch.nn.functional.cross_entropy(
                logits.reshape(-1, 5), labels.reshape(-1), reduction="none").reshape(labels.shape))
            assert dlogits.shape == logits.shape
            scaled = scale_gradient(dlogits, torch.full_like(loss, 2.0), profile=SM90)
            torch.testing.assert_close(scaled, dlogits * 2)


def test_whole_tensor_reductions_launch_the_profiles_programs_per_compute_unit():
    """max_all and prod_all launch reduction_grid programs in their first stage, each
    walking several blocks, and one program folding the partials; the results are those
    of one program a block."""
    from kernels.reductions import max_all, prod_all
    few = SM90.derive(**{"launch.elementwise_block_bytes": 64, "limits.compute_units": 2,
                         "tuning.reductions.programs_per_compute_unit": 2,
                         "tuning.reductions.programs_per_compute_unit_32bit": 3})
    x = 1 + 0.01 * torch.randn(1003)  # 16 float32 elements a block: 63 blocks
    with interpreted():
        for fn, want in ((max_all, x.max()), (prod_all, x.double().prod().float())):
            with record_launches() as log:
                got = fn(x, profile=few)
            assert [launch.grid for launch in log] == [(6, 1, 1), (1, 1, 1)]
            torch.testing.assert_close(got, want)
        unlimited = few.derive(**{"tuning.reductions.programs_per_compute_unit": 64,
                                  "tuning.reductions.programs_per_compute_unit_32bit": 64})
        with record_launches() as log:
            max_all(x, profile=unlimited)
        assert log[0].grid == (63, 1, 1)
        with record_launches() as log:
            try:
                max_all(x.bfloat16(), profile=few)  # 32 bf16 elements a block: 32 blocks
            except Exception as exc:
                if known_defect(exc) is None:
                    raise
                pytest.skip(f"not supported: {known_defect(exc)}")
        assert log[0].grid == (4, 1, 1)


def test_the_softmax_forward_takes_the_profile_row_tile_on_16_bit_data():
    """Rows longer than ``tuning.softmax.row_tile_bytes`` (16-bit data) go through the
    online kernel in tiles of it, though they fit MAX_FUSED_SIZE; float32 rows of the same
    length stay fused. The results are torch's."""
    from kernels.softmax import log_softmax
    short = SM90.derive(**{"launch.max_fused_size_bytes": 1024,  # 512 bf16, 256 fp32
                           "tuning.softmax.row_tile_bytes": 256})  # 128 bf16 elements
    x = torch.randn(6, 200, generator=torch.Generator().manual_seed(3))
    with interpreted():
        for dtype, fn, ref in ((torch.bfloat16, softmax, torch.softmax),
                               (torch.bfloat16, log_softmax, torch.log_softmax),
                               (torch.float32, softmax, torch.softmax)):
            with record_launches() as log:
                got = fn(x.to(dtype), profile=short)
            names = [launch.name for launch in log]
            if dtype == torch.bfloat16:
                assert names == ["_softmax_fwd_online_kernel"]
                assert log[0].kwargs["BLOCK_N"] == 128
            else:
                assert names == ["_softmax_fwd_fused_kernel"]
            torch.testing.assert_close(got.float(), ref(x.to(dtype).float(), dim=-1),
                                       **({} if dtype == torch.float32
                                          else dict(rtol=2e-2, atol=1e-2)))


def test_the_layer_norm_tiled_forward_caps_its_programs_on_32_bit_data():
    """Past the fused tile, the float32 layer norm launches online_grid programs (one an SM
    on sm90), each walking several rows; RMS norm and 16-bit data keep a program a row.
    RMS norm on float32 sums its first tile before the walk over the rest, where it ran
    faster (layer norm and 16-bit RMS norm do not). The results are the reference's."""
    from kernels.layer_norm import layer_norm, rms_norm
    tiled = SM90.derive(**{"limits.compute_units": 2, "launch.max_fused_size_bytes": 256,
                           "tuning.layer_norm.forward_row_group_tile_32bit": None})
    g = torch.Generator().manual_seed(1)
    x = torch.randn(7, 200, generator=g) * 3 + 5  # 64 float32 columns a tile, 7 rows
    w, b = torch.randn(200, generator=g), torch.randn(200, generator=g)
    F = torch.nn.functional
    with interpreted():
        for dtype, norm, rows_per_program in ((torch.float32, "layer", 4),
                                              (torch.float32, "rms", 1),
                                              (torch.bfloat16, "layer", 1),
                                              (torch.bfloat16, "rms", 1)):
            xd, wd, bd = x.to(dtype), w.to(dtype), b.to(dtype)
            with record_launches() as log:
                if norm == "layer":
                    got, want = (layer_norm(xd, wd, bd, 1e-5, profile=tiled).y,
                                 F.layer_norm(xd.float(), (200,), wd.float(), bd.float(), 1e-5))
                else:
                    got = rms_norm(xd, wd, 1e-6, profile=tiled)[0]
                    want = F.rms_norm(xd.float(), (200,), wd.float(), 1e-6)
            assert [launch.grid for launch in log] == [(cdiv(7, rows_per_program), 1, 1)]
            assert log[0].kwargs["FIRST_TILE_SUMMED"] == (norm == "rms" and dtype.itemsize == 4)
            assert log[0].kwargs["EVEN_N"] is False  # 200 columns in tiles of 64 or 128
            torch.testing.assert_close(got.float(), want, **({} if dtype == torch.float32
                                                            else dict(rtol=2e-2, atol=3e-2)))
        # layer-norm rows the tile divides take the kernel without masks, with the same
        # results (RMS norm keeps them: it measured slower without)
        x, w, b = x[:, :192] * 1, w[:192] * 1, b[:192] * 1
        for norm in ("layer", "rms"):
            with record_launches() as log:
                got = (layer_norm(x, w, b, 1e-5, profile=tiled).y if norm == "layer"
                       else rms_norm(x, w, 1e-6, profile=tiled)[0])
            want = (F.layer_norm(x, (192,), w, b, 1e-5) if norm == "layer"
                    else F.rms_norm(x, (192,), w, 1e-6))
            assert log[0].kwargs["EVEN_N"] is (norm == "layer")
            torch.testing.assert_close(got, want)


def test_the_layer_norm_tiled_forward_normalizes_in_the_profile_tile():
    """``tuning.layer_norm.normalize_tile_bytes`` shortens the tiles of the tiled layer-norm
    forward's normalizing walk on 16-bit data: RMS norm and float32 keep the summing walk's
    tile, and every output is bitwise the one of the whole-tile walk (the same arithmetic
    per element), with and without a residual and masks."""
    from kernels.layer_norm import layer_norm
    base = SM90.derive(**{"launch.max_fused_size_bytes": 256,  # 64-column tiles
                          "tuning.layer_norm.forward_row_group_tile": None,
                          "tuning.layer_norm.forward_row_group_tile_32bit": None})
    short = base.derive(**{"tuning.layer_norm.normalize_tile_bytes": 32})  # 16 bf16
    g = torch.Generator().manual_seed(5)
    with interpreted():
        for n in (300, 256):  # masked, and the tile dividing the row (no masks)
            x = torch.randn(5, n, generator=g) * 3 + 40
            w, b, res = (torch.randn(n, generator=g), torch.randn(n, generator=g),
                         torch.randn(5, n, generator=g))
            for dtype, norm, residual in ((torch.bfloat16, "layer", None),
                                          (torch.bfloat16, "layer", res),
                                          (torch.bfloat16, "rms", None),
                                          (torch.float32, "layer", None)):
                args = (x.to(dtype), w.to(dtype), b.to(dtype) if norm == "layer" else None,
                        1e-5)
                kw = dict(rms=norm == "rms",
                          residual=None if residual is None else residual.to(dtype))
                outs, walks = [], []
                for profile in (base, short):
                    with record_launches() as log:
                        outs.append(layer_norm(*args, **kw, profile=profile))
                    assert [launch.name for launch in log] == ["_layer_norm_fwd_tiled_kernel"]
                    walks.append((log[0].kwargs["BLOCK_N"], log[0].kwargs["NORM_BLOCK"]))
                outs_equal = [torch.equal(a, b) for a, b in zip(*outs) if a is not None]
                assert all(outs_equal), (dtype, norm, n)
                shortened = dtype == torch.bfloat16 and norm == "layer"
                tile = walks[0][0]
                assert tile == 64 and walks == [(tile, tile), (tile, 16 if shortened else tile)]
        want = torch.nn.functional.layer_norm(x.bfloat16().float(), (n,), w.bfloat16().float(),
                                              b.bfloat16().float(), 1e-5)
        got = layer_norm(x.bfloat16(), w.bfloat16(), b.bfloat16(), 1e-5, profile=short).y
        torch.testing.assert_close(got.float(), want, rtol=2e-2, atol=3e-2)


def test_the_partial_backward_sums_in_its_last_program_within_the_profile_bytes(monkeypatch):
    """With ``tuning.layer_norm.backward_last_sum_bytes``, a partial-sum backward whose
    partials fit it makes one launch, its last program adding the partial rows; larger
    partials, and profiles without the field, make two (the column sums apart). dx is the
    same bits either way and dweight/dbias are torch's, with and without a bias, a
    residual gradient, float64, rows that stack, and partials of one or of several sum
    tiles. The partial buffers start as NaN: a sum that read a row before it was written
    shows."""
    from kernels.layer_norm import column_sums, layer_norm, layer_norm_backward
    made = column_sums._new_last_sum_buffers

    def poisoned(*args):
        arrived, *partials = made(*args)
        return (arrived, *(None if p is None else p.fill_(float("nan")) for p in partials))
    monkeypatch.setattr(column_sums, "_new_last_sum_buffers", poisoned)
    base = SM90
    last = SM90.derive(**{"tuning.layer_norm.backward_last_sum_bytes": 32768})
    g = torch.Generator().manual_seed(17)
    with interpreted():
        for m, n, dtype, bias, rms, ones in ((5, 300, torch.float32, True, False, True),
                                             (7, 64, torch.float64, False, False, True),
                                             (6, 256, torch.bfloat16, False, True, True),
                                             (300, 40, torch.float32, True, False, True),
                                             (40, 300, torch.float32, True, False, False)):
            x = (torch.randn(m, n, generator=g) * 2 + 1).to(dtype)
            w = torch.randn(n, generator=g).to(dtype)
            b = torch.randn(n, generator=g).to(dtype) if bias else None
            dy = torch.randn(m, n, generator=g).to(dtype)
            dres = torch.randn(m, n, generator=g).to(dtype) if rms else None
            f = layer_norm(x, w, b, 1e-5, rms=rms, profile=base)
            outs, names = [], []
            for profile in (base, last):
                with record_launches() as log:
                    outs.append(layer_norm_backward(dy, x, w, b, f.mean, f.rstd, rms=rms,
                                                    dresidual_out=dres, profile=profile))
                names.append([(launch.name, launch.kwargs.get("LAST_SUMS")) for launch in log])
            two = [("_layer_norm_bwd_fused_kernel", False), ("_sum_rows_kernel", None)]
            assert names[0] == two
            assert names[1] == ([("_layer_norm_bwd_fused_kernel", True)] if ones else two), (m, n)
            assert torch.equal(outs[0][0], outs[1][0])
            xd, wd = x.double().requires_grad_(), w.double().requires_grad_()
            bd = b.double().requires_grad_() if bias else None
            y = (torch.nn.functional.rms_norm(xd, (n,), wd, 1e-5) if rms
                 else torch.nn.functional.layer_norm(xd, (n,), wd, bd, 1e-5))
            y.backward(dy.double())
            tol = dict(rtol=1e-2, atol=1e-1) if dtype == torch.bfloat16 else {}
            for got, want in ((outs[1][1], wd.grad), (outs[1][2], bd.grad if bias else None)):
                if want is not None:
                    torch.testing.assert_close(got, want.to(got.dtype), **tol)
                    torch.testing.assert_close(got, outs[0][1 if want is wd.grad else 2],
                                               rtol=1e-5, atol=1e-5)


def test_a_reduced_cross_entropy_is_one_launch_within_the_profile_bound(monkeypatch):
    """With ``tuning.cross_entropy.one_launch_elements``, a mean or sum over that many
    logits or fewer (and rows within one count step) is one launch of the loss kernel: each program counts the labels not ignored
    and the last to finish sums the losses. Its loss and gradient are the same bits as
    the three launches' (count, loss kernel, sum; two for a sum), fused and tiled, with
    ignored rows, label smoothing, float64 and every row ignored; more rows, "none" and
    profiles without the field keep the separate launches. New buffers start as NaN: a
    sum that read a loss before it was written shows."""
    from kernels.cross_entropy import cross_entropy, cross_entropy_tiled
    empty = torch.empty

    def poisoned(*args, **kwargs):
        t = empty(*args, **kwargs)
        return t.fill_(float("nan")) if t.is_floating_point() else t
    monkeypatch.setattr(torch, "empty", poisoned)
    base = SM90.derive(**{"limits.compute_units": 4})  # several programs a launch
    one = base.derive(**{"tuning.cross_entropy.one_launch_elements": 10000})
    g = torch.Generator().manual_seed(23)
    with interpreted():
        for rows, n, dtype, reduction, smoothing, fn, ignored in (
                (40, 50, torch.float32, "mean", 0.0, cross_entropy, 9),
                (40, 50, torch.bfloat16, "sum", 0.1, cross_entropy, 3),
                (33, 300, torch.float32, "mean", 0.05, cross_entropy_tiled, 5),
                (7, 20, torch.float64, "mean", 0.0, cross_entropy, 7),
                (400, 30, torch.float32, "mean", 0.0, cross_entropy, 0),
                (2000, 3, torch.float32, "mean", 0.0, cross_entropy, 9),  # rows > a count step
                (40, 50, torch.float32, "none", 0.0, cross_entropy, 2)):
            logits = (torch.randn(rows, n, generator=g) * 3).to(dtype)
            labels = torch.randint(0, n, (rows,), generator=g)
            labels[torch.randperm(rows, generator=g)[:ignored]] = -100
            outs, names = [], []
            for profile in (base, one):
                with record_launches() as log:
                    outs.append(fn(logits, labels, reduction=reduction,
                                   label_smoothing=smoothing, profile=profile))
                names.append([launch.name for launch in log])
            one_launch = (reduction != "none" and rows * n <= 10000
                          and rows <= base.elementwise_block(torch.float32))
            assert len(names[1]) == (1 if one_launch else len(names[0]))
            assert len(names[0]) == {"mean": 3, "sum": 2, "none": 1}[reduction]
            for got, want in zip(outs[1], outs[0]):
                assert torch.equal(got.nan_to_num(7.0), want.nan_to_num(7.0)), (rows, n, dtype)
                assert torch.equal(got.isnan(), want.isnan())
            want = torch.nn.functional.cross_entropy(logits.double(), labels,
                                                     reduction=reduction,
                                                     label_smoothing=smoothing)
            torch.testing.assert_close(outs[1][0].double(), want, rtol=1e-5, atol=1e-5,
                                       equal_nan=True)


def test_the_layer_norm_tiled_forward_third_sum_changes_no_value():
    """The tiled forward's third per-tile sum (of x', THIRD_SUM: float64 only) is a speed
    choice: with or without it, y, mean and rstd are the same bits, rows with inf, NaN and
    a large mean included. float32 runs without it."""
    from kernels.layer_norm import layer_norm
    from kernels.layer_norm.forward import _forward_plan
    from kernels.fast_launch import PlannedLaunch
    tiled = SM90.derive(**{"launch.max_fused_size_bytes": 256,  # 64 float32 columns a tile
                           "tuning.layer_norm.forward_row_group_tile_32bit": None})
    g = torch.Generator().manual_seed(9)
    x = torch.randn(6, 200, generator=g) * 3 + 1e4
    x[1, 150] = float("inf")
    x[2, 7] = float("nan")
    x[3, 10], x[3, 190] = float("inf"), float("-inf")
    x[4, 3] = float("inf")  # in the first tile: no shift
    w, b = torch.randn(200, generator=g), torch.randn(200, generator=g)
    with interpreted():
        with record_launches() as log:
            want = layer_norm(x, w, b, 1e-5, profile=tiled)
        assert [launch.name for launch in log] == ["_layer_norm_fwd_tiled_kernel"]
        assert log[0].kwargs["THIRD_SUM"] is False
        plan = _forward_plan(tiled, 6, 200, torch.float32, False, False, True, False, False,
                             False, False, 1, True, False)
        third = PlannedLaunch(plan.kernel, plan.grid, **{**plan.meta, "THIRD_SUM": True})
        y, mean, rstd = torch.empty_like(x), torch.empty(6), torch.empty(6)
        third(x, y, w, b, x, y, rstd, y, mean, rstd, 6, 200, 1e-5, 0.0, 0.0, 0.0, 0)
    for got, ref in ((y, want.y), (mean, want.mean), (rstd, want.rstd)):
        assert torch.equal(got.nan_to_num(7.0), ref.nan_to_num(7.0))
        assert torch.equal(got.isnan(), ref.isnan())
    assert torch.isinf(want.mean[1]) and torch.isnan(want.mean[2:4]).all()
    torch.testing.assert_close(want.y[[0, 5]], torch.nn.functional.layer_norm(
        x[[0, 5]].double(), (200,), w.double(), b.double(), 1e-5).float())


def test_weight_first_changes_no_value():
    """Loading the weight (and bias) before the statistics (WEIGHT_FIRST, where the profile
    bounds it) is a speed choice: layer norm with and without bias, RMS norm and the fused
    add + RMS norm give the same bits with it as with the weight loaded after them, and
    the launch takes it only for one-row programs within each op's bound."""
    from kernels.fused_add_rms_norm import fused_add_rms_norm
    from kernels.layer_norm import layer_norm, rms_norm
    on = SM90.derive(**{f"tuning.layer_norm.{op}weight_first_max_block{bits}": 256
                        for op in ("rms_norm_", "") for bits in ("", "_32bit")})
    rms_only = SM90.derive(**{"tuning.layer_norm.rms_norm_weight_first_max_block": 256,
                              "tuning.layer_norm.rms_norm_weight_first_max_block_32bit": 256})
    g = torch.Generator().manual_seed(11)
    for dtype, n, rows in ((torch.float32, 200, 5), (torch.bfloat16, 256, 3),
                           (torch.float32, 8, 1100)):
        x = (torch.randn(rows, n, generator=g) * 3 + 1).to(dtype)
        r = torch.randn(rows, n, generator=g).to(dtype)
        w = torch.randn(n, generator=g).to(dtype)
        b = torch.randn(n, generator=g).to(dtype)

        def calls(profile):
            return (*rms_norm(x, w, 1e-6, profile=profile),
                    *fused_add_rms_norm(x, r, w, 1e-6, profile=profile),
                    *layer_norm(x, w, b, 1e-5, profile=profile),
                    *layer_norm(x, w, None, 1e-5, profile=profile))
        with interpreted():
            with record_launches() as log:
                outs_on = calls(on)
            with record_launches() as log_rms_only:
                calls(rms_only)
            outs_off = calls(SM90)
        one_row = n > 8  # 8 columns: rows stacked in a program, the weight after
        assert [launch.kwargs["WEIGHT_FIRST"] for launch in log] == [one_row] * 4
        assert [launch.kwargs["WEIGHT_FIRST"] for launch in log_rms_only] == [
            one_row, one_row, False, False]
        for got, want in zip(outs_on, outs_off):
            if got is not None:
                assert torch.equal(got, want)


def test_layer_norm_fused_kernels_drop_their_masks_where_the_tile_is_the_row():
    """Where a fused program's tile is whole rows (BLOCK_N == N, and for the forward
    BLOCK_M dividing the rows), layer norm's forward and one-row-a-program backward take
    the kernels without masks (N a constant); RMS norm, uneven rows and stacked backward
    rows keep them. A one-row-a-program backward prefetches the next row where the profile
    says (``tuning.layer_norm.backward_prefetch``). The results are torch's either way."""
    from kernels.layer_norm import layer_norm, layer_norm_backward
    F = torch.nn.functional
    g = torch.Generator().manual_seed(3)
    for prefetching in (False, True):
        profile = SM90.derive(**{"limits.compute_units": 4,
                                 "tuning.layer_norm.backward_prefetch": prefetching})
        _check_fused_masks_and_prefetch(profile, prefetching, g, F, layer_norm,
                                        layer_norm_backward)


def _check_fused_masks_and_prefetch(profile, prefetching, g, F, layer_norm, layer_norm_backward):
    with interpreted():
        # (rows, columns, rms) -> (forward EVEN_ROWS, EVEN_N, backward EVEN_ROWS/EVEN_N)
        for (m, n, rms), want in {(8, 128, False): (True, True, False),  # 2 rows a program
                                  (7, 128, False): (False, True, False),
                                  (4, 128, False): (True, True, True),   # 1 row a program
                                  (4, 100, False): (True, False, False),
                                  (4, 128, True): (False, False, False),
                                  # 8 programs of one row, walking 2-3 rows each
                                  (20, 4096, False): (True, True, True)}.items():
            x = torch.randn(m, n, generator=g, dtype=torch.float64).float() * 2 + 3
            w, b = torch.randn(n, generator=g), torch.randn(n, generator=g)
            dy = torch.randn(m, n, generator=g)
            with record_launches() as log:
                out = layer_norm(x, w, None if rms else b, 1e-5, rms=rms, profile=profile)
                grads = layer_norm_backward(dy, x, w, None if rms else b, out.mean, out.rstd,
                                            rms=rms, profile=profile)
            forward, backward = log[0].kwargs, log[1].kwargs
            assert (forward["EVEN_ROWS"], forward["EVEN_N"], backward["EVEN_N"]) == want, n
            assert backward["EVEN_ROWS"] == backward["EVEN_N"]
            # one row a program (the backward's own EVEN rule but for RMS norm and N), 32-bit
            assert backward["PREFETCH"] is (prefetching and backward["ROWS_PER_PROGRAM"] == 1)
            xt, wt = x.clone().requires_grad_(), w.clone().requires_grad_()
            bt = None if rms else b.clone().requires_grad_()
            y = (F.rms_norm(xt, (n,), wt, 1e-5) if rms else F.layer_norm(xt, (n,), wt, bt, 1e-5))
            torch.testing.assert_close(out.y, y)
            want_grads = torch.autograd.grad(y, [t for t in (xt, wt, bt) if t is not None], dy)
            for got, ref in zip(grads, want_grads):
                torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4)


def test_row_reductions_take_the_rows_kernel_wherever_rows_fill_the_device():
    """max_dim and prod_dim walk rows in the profile's row-reduction steps: rows past
    MAX_FUSED_SIZE take the rows kernel too when there are at least as many as compute
    units, and the chunked two-stage path only when fewer; every path gives torch's values
    and first indices, NaN and ties included."""
    from kernels.reductions import max_dim, prod_dim
    small = SM90.derive(**{"launch.max_fused_size_bytes": 256, "limits.compute_units": 4,
                           "tuning.reductions.row_step_bytes_32bit": 64,
                           "launch.elementwise_block_bytes": 256,
                           "tuning.reductions.row_step_bytes": 64,
                           "tuning.reductions.row_programs_per_compute_unit": 1})
    x = torch.randn(9, 300).mul(2).round()
    x[1, 100] = x[1, 120] = float("nan")
    for rows, kernel in ((9, "_max_dim_rows_kernel"), (2, "_max_dim_chunks_kernel")):
        with interpreted(), record_launches() as log:
            values, indices = max_dim(x[:rows], profile=small)
            products = prod_dim(1 + x[:rows] / 64, profile=small)
        assert log[0].name == kernel
        assert log[0].name.replace("max", "prod") in {launch.name for launch in log}
        want = torch.max(x[:rows], -1)
        torch.testing.assert_close(values, want.values, equal_nan=True)
        assert torch.equal(indices, want.indices)
        torch.testing.assert_close(products, (1 + x[:rows] / 64).double().prod(-1).float(),
                                   equal_nan=True)
    # 16 bytes a step: 4 float32 columns, so 4 rows stack into a 64-byte block of 16
    assert reductions_tuning.row_reduction_tile(small, 64, 300, torch.float32) == (4, 16)


def test_launch_constants_are_computed_once_per_profile_and_shape(monkeypatch):
    """A second call of a launcher with the same shapes and dtypes reads no launch
    constant from the profile: its grid, blocks and num_warps come from its launch plan."""
    from kernels import batch_norm, cross_entropy, glu, reductions, rope
    from triton_cts.profiles import Profile
    x, cos = torch.randn(2, 3, 4, 8), torch.randn(3, 4)
    labels = torch.randint(0, 8, (2, 3, 4))
    calls = {
        "swiglu": lambda p: glu.swiglu(x, x, profile=p),
        "geglu_backward": lambda p: glu.geglu_backward(x[0], x[0], x[0], profile=p),
        "rope": lambda p: rope.rope(x, cos, cos, profile=p),
        "cross_entropy": lambda p: cross_entropy.cross_entropy(x, labels, profile=p),
        "scale_gradient": lambda p: cross_entropy.scale_gradient(x, torch.tensor(2.0), profile=p),
        "batch_norm_train": lambda p: batch_norm.batch_norm_train(x, None, None, None, None,
                                                                  profile=p),
        "max_all": lambda p: reductions.max_all(x, profile=p),
        "max_all_atomic": lambda p: reductions.max_all_atomic(x, profile=p),
        "max_dim": lambda p: reductions.max_dim(x, profile=p),
        "prod_all": lambda p: reductions.prod_all(x, profile=p),
        "prod_dim": lambda p: reductions.prod_dim(x, profile=p),
    }
    read = []
    for name in ("elementwise_block", "max_fused_elements", "num_warps_for", "capped_grid"):
        method = getattr(Profile, name)
        monkeypatch.setattr(Profile, name,
                            lambda self, *a, _m=method, _n=name: read.append(_n) or _m(self, *a))
    profile = SM90.derive(name="nvidia-sm90~plans")  # a fresh profile: no plan cached yet
    with interpreted():
        for name, call in calls.items():
            read.clear()
            call(profile)
            assert read, name
            read.clear()
            call(profile)
            assert read == [], f"{name} read {read} on its second call"


def test_matmul_takes_tensor_descriptors_where_the_profile_and_the_matrices_allow():
    """The persistent tensor-descriptor kernel runs 16-bit products on a profile with
    ``autotune.matmul_tma`` when A and B are ones a descriptor takes as they are or
    transposed (unit stride along one axis, 16-byte rows: an M-major A and a K-major B
    are read transposed); rows of 24 bytes, IEEE float32 and a profile without the table
    take the pointer kernel. tf32 on a profile whose tf32 dots read
    K-major operands (``dtypes.tf32_k_major``) copies a row-major B (and a column-major A)
    K-major first and takes descriptors where its rows allow. Each answer is right."""
    from kernels.matmul import matmul
    small = SM90.derive(name="nvidia-sm90~small-tma", **{
        "autotune.matmul_tma": [{"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 16,
                                 "GROUP_SIZE_M": 2, "num_warps": 1, "num_stages": 1}],
        "limits.compute_units": 3, "tuning.matmul.pointer_max_work": 1})
    gfx942 = load_profiles()["amd-gfx942"]
    torch.manual_seed(0)
    a16, b16 = torch.randn(40, 48, dtype=torch.float16), torch.randn(48, 64, dtype=torch.float16)
    cases = [(a16, b16, small, "_matmul_tma_kernel"),
             (a16, torch.randn(64, 48, dtype=torch.float16).t(), small, "_matmul_tma_kernel"),
             (a16.t().contiguous().t(), b16.t().contiguous().t(), small, "_matmul_tma_kernel"),
             (torch.randn(48, 44, dtype=torch.float16)[:, :40].t(), b16, small,
              "_matmul_kernel"),  # M-major, rows of 88 bytes
             (a16, b16[:, :12], small, "_matmul_kernel"),
             (a16.float(), b16.float(), small, "_matmul_kernel"),
             (a16, b16, gfx942, "_matmul_kernel")]
    a32, b32 = a16.float(), b16.float()
    tf32 = [(a32, b32, small, {"_contiguous_kernel", "_matmul_tma_kernel"}),
            (a32, b32.t().contiguous().t(), small, {"_matmul_tma_kernel"}),
            (a32.t().contiguous().t(), b32.t().contiguous().t(), small,
             {"_contiguous_kernel", "_matmul_tma_kernel"}),
            (a32[:, :6], b32[:6], small, {"_contiguous_kernel", "_matmul_kernel"}),  # 24-byte rows
            (a32, b32, SM90.derive(**{"dtypes.tf32_k_major": False}), {"_matmul_kernel"})]
    for a, b, profile, kernel in cases + tf32:
        ieee = a.dtype == torch.float32 and isinstance(kernel, str)
        with interpreted(), record_launches() as log:
            out = matmul(a, b, profile=profile, input_precision="ieee" if ieee else None)
        assert {launch.name for launch in log} == ({kernel} if isinstance(kernel, str) else kernel)
        torch.testing.assert_close(out.float(), a.float() @ b.float(), rtol=1e-2, atol=1e-2)
        if kernel == "_matmul_tma_kernel":
            # 6 tiles, a program per compute unit: each of the 3 programs walks two
            assert [launch.grid for launch in log] == [(3, 1, 1)]


def test_small_products_take_the_pointer_kernel_and_the_tma_variant_does_not():
    """Up to ``tuning.matmul.pointer_max_work`` (M*N*K; 512^3 on sm90) matmul runs the
    pointer kernel, whose launch costs less; past it the tensor-descriptor kernel.
    ``matmul_tma`` takes the descriptor kernel at every size, and a profile without its
    configs declines it, naming the table."""
    from kernels.matmul import matmul, matmul_tma, pointer_max_work
    assert pointer_max_work(SM90) == 512 ** 3
    a = torch.empty(512, 512, dtype=torch.bfloat16, device="meta")
    for b, fn, kernel in ((a, matmul, "_matmul_kernel"),
                          (torch.empty(512, 528, dtype=torch.bfloat16, device="meta"), matmul,
                           "_matmul_tma_kernel"),
                          (a[:8, :8], matmul_tma, "_matmul_tma_kernel")):
        with launches.capture_launches() as log:
            fn(a if b.shape[0] == 512 else a[:8, :8], b, profile=SM90)
        assert {launch.name for launch in log} == {kernel}, (b.shape, fn)
    with pytest.raises(UnsupportedDtypeError, match=r"amd-gfx942.*autotune\.matmul_tma"):
        matmul_tma(a, a, profile=load_profiles()["amd-gfx942"])


@pytest.mark.parametrize("shape, max_grid", [((37, 53), 65535), ((64, 64), 2), ((1, 5), 1),
                                             ((130, 3), 65535)])
def test_contiguous_copies_any_view(shape, max_grid):
    """matmul's K-major copy (kernels/matmul::_contiguous): transposed, sliced and
    already-contiguous views, with a grid capped below the tiles (grid-stride)."""
    from kernels.matmul import _contiguous
    profile = SM90.derive(**{"launch.max_grid_num": max_grid,
                             "launch.elementwise_block_bytes": 256})
    x = torch.randn(shape[1] + 2, shape[0] + 1)
    for view in (x[1:, :-1].t(), x[:shape[0], :shape[1]], x[1:, :-1].t().contiguous()):
        with interpreted():
            y = _contiguous(view, profile)
        assert y.is_contiguous() and torch.equal(y, view)


def test_compile_mode_keeps_each_configs_tensor_descriptor_tiles():
    """Every autotune config of the tensor-descriptor kernel is captured for compilation
    with its own tile shapes: a config's pre-hook sets the descriptors' block shapes, and
    the next config's must not change what an earlier capture holds."""
    from kernels.matmul import matmul_tma as matmul
    from triton_cts.toolchains.cross_compile import every_autotune_config
    a = torch.empty(512, 512, dtype=torch.bfloat16, device="meta")
    with every_autotune_config(), launches.capture_launches() as log:
        matmul(a, a, profile=SM90)
    tma = [l for l in log if l.name == "_matmul_tma_kernel"]
    assert len(tma) == len(SM90.autotune_configs("matmul_tma"))
    for l in tma:
        m, n, k = (l.kwargs[f"BLOCK_SIZE_{d}"] for d in "MNK")
        c_tile = [m, n // l.kwargs.get("C_SPLIT", 1)]  # C stored in C_SPLIT column pieces
        assert [list(d.block_shape) for d in l.args[:3]] == [[m, k], [k, n], c_tile]
    assert any(l.kwargs.get("C_SPLIT") == 2 for l in tma)
    # float32 (tf32) reads B K-major, [n, k] tiles, and stores C through a pointer; configs
    # whose tiles overflow shared memory in float32 are pruned
    a = torch.empty(512, 512, dtype=torch.float32, device="meta")
    with every_autotune_config(), launches.capture_launches() as log:
        matmul(a, a, profile=SM90)
    tma = [l for l in log if l.name == "_matmul_tma_kernel"]
    assert tma and len(tma) < len(SM90.autotune_configs("matmul_tma"))
    for l in tma:
        m, n, k = (l.kwargs[f"BLOCK_SIZE_{d}"] for d in "MNK")
        assert [list(d.block_shape) for d in l.args[:2]] == [[m, k], [n, k]]
        assert isinstance(l.args[2], torch.Tensor)


@pytest.mark.parametrize("rows", [5, 37])
def test_the_column_backward_takes_long_rows_in_splits(rows):
    """Rows past the fused backward: one row-sums launch, one column launch over (column
    block, split) pairs, one column sum of the splits' partials; the same gradients as
    the tiled strategy to float32 rounding."""
    from kernels.layer_norm import layer_norm, layer_norm_backward_columns, layer_norm_backward_tiled
    derived = SM90.derive(**{"launch.max_fused_size_bytes": 256, "limits.compute_units": 3,
                             "tuning.layer_norm.backward_column_tile_32bit": [4, 32, 1, 4]})
    gen = torch.Generator().manual_seed(0)
    x, dy = torch.randn(rows, 100, generator=gen), torch.randn(rows, 100, generator=gen)
    w, b = torch.randn(100, generator=gen), torch.randn(100, generator=gen)
    with interpreted():
        out = layer_norm(x, w, b, profile=derived)
        with record_launches() as log:
            got = layer_norm_backward_columns(dy, x, w, b, out.mean, out.rstd, profile=derived)
        want = layer_norm_backward_tiled(dy, x, w, b, out.mean, out.rstd, profile=derived)
    names = [entry.kernel.__name__ for entry in log]
    assert names == ["_layer_norm_bwd_row_sums_kernel", "_layer_norm_bwd_columns_kernel",
                     "_sum_rows_kernel"]
    # 4 column blocks of 32 and 3 units x 4 programs: rows split in 3 (16, 16 and a ragged
    # 5), or 5 rows in 2 splits of a 4-row tile (4 and 1)
    assert log[2].args[0].shape[0] == {5: 2, 37: 3}[rows]
    for g, t in zip(got, want):
        torch.testing.assert_close(g, t, rtol=1e-5, atol=1e-5)
