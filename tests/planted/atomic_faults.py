"""Faulty atomic + autotune launchers: each breaks one thing the atomics x autotune suite
must catch, and is otherwise the reference launcher."""
import torch
import triton

from kernels.layer_norm import backward as ln
from kernels import reductions as red
from triton_cts.execution import launches
from triton_cts.execution.input_checks import check_inputs
from triton_cts.profiles import next_power_of_2

_TUNERS: dict = {}


def _tuned(kernel, name: str, configs, key, **options):
    """One autotuner per (kernel, configs): the same caching the reference launchers use."""
    cache_key = (name, tuple(str(c) for c in configs))
    if cache_key not in _TUNERS:
        _TUNERS[cache_key] = triton.autotune(configs=configs, key=key,
                                             do_bench=launches.autotune_timer, **options)(kernel)
    return _TUNERS[cache_key]


def layer_norm_backward_no_reset(dy, x, weight, bias, mean, rstd, *, profile):
    """The atomic layer-norm backward autotuned over rows per program, without
    reset_to_zero: every benchmarked config adds its dweight/dbias into the buffers."""
    p, dropout_scale = ln._prepare_backward(
        "layer_norm_backward_no_reset", dy, x, weight, bias, mean, rstd, False, None, None,
        0.0, None, False, profile)
    n_rows, n_cols = p.n_rows, p.n_cols
    if n_rows == 0 or n_cols == 0:
        return ln._grads(p)
    acc = ln._acc_dtype(x.dtype)
    dw = torch.zeros(n_cols, dtype=acc, device=x.device)
    db = torch.zeros(n_cols, dtype=acc, device=x.device) if p.dbias is not None else None
    block_n = next_power_of_2(n_cols)
    configs = [triton.Config({"ROWS_PER_PROGRAM": r}, num_warps=profile.num_warps_for(r * block_n))
               for r in (1, 2)]
    kernel = _tuned(ln._layer_norm_bwd_fused_kernel, "ln_no_reset", configs, ["n_rows", "N"])
    grid = lambda meta: (profile.capped_grid(triton.cdiv(n_rows, meta["ROWS_PER_PROGRAM"])),)  # noqa: E731
    kernel[grid](*ln._row_operands(p), dw, db, dw, dw, dw, n_rows, n_cols, *dropout_scale,
                 BLOCK_N=block_n, ATOMIC=True, COMPENSATED=False, EVEN_ROWS=False, EVEN_N=False,
                 PREFETCH=False, LAST_SUMS=False, SUM_BLOCK_P=1,
                 SLICE_BROADCAST=profile.slice_broadcast, ROW_ALIGN=1, **p.flags)
    p.dweight.copy_(dw)
    if db is not None:
        p.dbias.copy_(db)
    return ln._grads(p)


def max_all_atomic_reset_to_zero(x, *, profile):
    """The atomic max_all autotuned over num_warps with its -inf accumulator in
    reset_to_zero: tuning leaves it at 0, so an all-negative input returns 0."""
    check_inputs("max_all_atomic_reset_to_zero", profile, red.MAX_DTYPES, x=x)
    if x.numel() == 0:
        raise RuntimeError("max_all_atomic_reset_to_zero: the max of an empty tensor is undefined")
    half = x.dtype in (torch.float16, torch.bfloat16)
    acc_dtype = torch.float32 if half else x.dtype
    x = x.contiguous().reshape(-1)
    n = x.numel()
    acc = torch.full((1,), red._lowest(acc_dtype), dtype=acc_dtype, device=x.device)
    nan_flag = torch.zeros(1, dtype=torch.int32, device=x.device)
    block = profile.elementwise_block(x.dtype, n)
    grid = profile.capped_grid(triton.cdiv(n, block))
    configs = [triton.Config({}, num_warps=w) for w in (1, 2)]
    kernel = _tuned(red._max_all_atomic_kernel, "max_reset", configs, ["n_elements"],
                    reset_to_zero=["OUT"])
    kernel[(grid,)](x, acc, nan_flag, n, grid, LOWEST=red._lowest(acc_dtype), BLOCK_SIZE=block,
                    HALF_TO_FP32=half, IS_FLOAT=x.dtype.is_floating_point,
                    SELECT_LOADS=profile.select_loads)
    if x.dtype.is_floating_point:
        acc = torch.where(nan_flag.bool(), torch.full_like(acc, float("nan")), acc)
    return acc.to(x.dtype).reshape(())


_CHOSEN: dict = {}


def layer_norm_backward_no_reset_tuned_once(dy, x, weight, bias, mean, rstd, *, profile):
    """layer_norm_backward_no_reset behind a launcher with its own tuning cache (as
    FlagGems keeps one): it tunes a shape once per process, later calls of that shape
    launch the chosen config untuned. Only the first call is wrong, and a replay of it
    does not tune again."""
    key = (tuple(x.shape), x.dtype)
    if key not in _CHOSEN:
        _CHOSEN[key] = True
        return layer_norm_backward_no_reset(dy, x, weight, bias, mean, rstd, profile=profile)
    return ln.layer_norm_backward(dy, x, weight, bias, mean, rstd, profile=profile)
