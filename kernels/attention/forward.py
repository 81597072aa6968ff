"""Attention forward: a program owns BLOCK_M query rows of one (batch, head) and walks the
keys with an online softmax (see the package docstring)."""
import math

import torch
import triton
import triton.language as tl

from ..fast_launch import PlannedLaunch, Replays, launch_plan
from ..grid_stride import block_range, launch_grid
from triton_cts.profiles import Profile, cdiv
from .plan import LOG2E, _common, _config, _fwd_need, _launch_options, checked_shapes
from .tiles import _key_blocks, _tile, _visible


@triton.jit
def _fwd_inner(acc, l_i, m_i, q, K, V, stride_kn, stride_kd, stride_vn, stride_vd,
               offs_m, offs_d, lo, hi, SEQ_Q, SEQ_K, HEAD_DIM, qk_scale, causal_offset,
               MASKED: tl.constexpr, CAUSAL: tl.constexpr, EVEN_D: tl.constexpr,
               SELECT_LOADS: tl.constexpr, INPUT_PRECISION: tl.constexpr,
               BLOCK_N: tl.constexpr):
    """The online softmax over key blocks [lo, hi) (lo a multiple of BLOCK_N)."""
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k = _tile(K, offs_n, offs_d, stride_kn, stride_kd, SEQ_K, HEAD_DIM,
                  MASKED, not EVEN_D, SELECT_LOADS)
        s = tl.dot(q, tl.trans(k), input_precision=INPUT_PRECISION) * qk_scale
        if MASKED:
            s = tl.where(_visible(offs_m, offs_n, SEQ_Q, SEQ_K, causal_offset, CAUSAL),
                         s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        # a row that has seen no key yet keeps m = -inf: subtract 0 (exp2(-inf) = 0, no NaN)
        m_sub = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.math.exp2(s - m_sub[:, None])
        alpha = tl.math.exp2(m_i - m_sub)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = _tile(V, offs_n, offs_d, stride_vn, stride_vd, SEQ_K, HEAD_DIM,
                  MASKED, not EVEN_D, SELECT_LOADS)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=INPUT_PRECISION,
                     out_dtype=acc.dtype)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _attn_fwd(
    Q, K, V,                      # pointers to q [B, H, Sq, D], k and v [B, H_kv, Sk, D]
    O,                            # pointer to o [B, H, Sq, D], q's dtype
    LSE,                          # pointer to the base-2 log-sum-exp [B * H, Sq], float32
    stride_qb, stride_qh, stride_qm, stride_qd,   # elements between batches, heads, rows, dims
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_ob, stride_oh, stride_om, stride_od,
    H, GROUP,                     # query heads; query heads per key/value head
    SEQ_Q, SEQ_K, HEAD_DIM,       # sizes
    NUM_TILES,                    # B * H * cdiv(SEQ_Q, BLOCK_M)
    qk_scale,                     # softmax scale * log2(e)
    causal_offset,                # query i sees key j <= i + causal_offset (CAUSAL only)
    CAUSAL: tl.constexpr,
    FP64: tl.constexpr,           # float64 inputs (gradcheck): float64 accumulators
    INPUT_PRECISION: tl.constexpr,  # "ieee" (float32 dots), as torch computes
    SELECT_LOADS: tl.constexpr,   # masked-off lanes must read a valid address
    BLOCK_M: tl.constexpr,        # query rows of a program
    BLOCK_N: tl.constexpr,        # keys of one loop step
    BLOCK_D: tl.constexpr,        # head dim padded to a power of two
    EVEN_D: tl.constexpr,         # HEAD_DIM == BLOCK_D: no mask along the head dim
    GRID_STRIDE: tl.constexpr,    # fewer programs than tiles: each walks several
):
    pid = tl.program_id(0)
    ACC: tl.constexpr = tl.float64 if FP64 else tl.float32  # accumulators
    num_m = tl.cdiv(SEQ_Q, BLOCK_M)
    step, stop = block_range(pid, NUM_TILES, GRID_STRIDE)
    for tile in range(pid, stop, step):
        bh = tile // num_m
        # causal: the longest rows (last query blocks) first, so they do not finish last
        start_m = (num_m - 1 - tile % num_m) if CAUSAL else tile % num_m
        b = bh // H
        h = bh % H
        q_base = Q + b.to(tl.int64) * stride_qb + h.to(tl.int64) * stride_qh
        k_base = K + b.to(tl.int64) * stride_kb + (h // GROUP).to(tl.int64) * stride_kh
        v_base = V + b.to(tl.int64) * stride_vb + (h // GROUP).to(tl.int64) * stride_vh
        m0 = start_m * BLOCK_M
        offs_m = m0 + tl.arange(0, BLOCK_M)
        offs_d = tl.arange(0, BLOCK_D)
        q = _tile(q_base, offs_m, offs_d, stride_qm, stride_qd, SEQ_Q, HEAD_DIM,
                  True, not EVEN_D, SELECT_LOADS)
        m_i = tl.full([BLOCK_M], float("-inf"), ACC)
        l_i = tl.zeros([BLOCK_M], dtype=ACC)
        acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=ACC)
        full, hi = _key_blocks(m0, SEQ_K, causal_offset, CAUSAL, SELECT_LOADS, BLOCK_M, BLOCK_N)
        if not SELECT_LOADS:
            acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd,
                                       stride_vn, stride_vd, offs_m, offs_d, 0, full, SEQ_Q,
                                       SEQ_K, HEAD_DIM, qk_scale, causal_offset, False, CAUSAL,
                                       EVEN_D, SELECT_LOADS, INPUT_PRECISION, BLOCK_N)
        acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd,
                                   stride_vn, stride_vd, offs_m, offs_d, full, hi, SEQ_Q,
                                   SEQ_K, HEAD_DIM, qk_scale, causal_offset, True, CAUSAL,
                                   EVEN_D, SELECT_LOADS, INPUT_PRECISION, BLOCK_N)
        # l = 0: a row whose visible scores are all -inf (it sees no key, or a -inf query
        # scored -inf against each) gets o = 0 and lse = +inf (its probabilities are
        # exp2(-inf) = 0, so no gradient flows), as torch's and FlashAttention's kernels give
        seen = l_i != 0.0
        o = tl.where(seen[:, None], acc / tl.where(seen, l_i, 1.0)[:, None], 0.0)
        lse = tl.where(seen, m_i + tl.math.log2(tl.where(seen, l_i, 1.0)), float("inf"))
        o_ptrs = (O + b.to(tl.int64) * stride_ob + h.to(tl.int64) * stride_oh
                  + offs_m[:, None].to(tl.int64) * stride_om + offs_d[None, :] * stride_od)
        tl.store(o_ptrs, o.to(O.dtype.element_ty),
                 mask=(offs_m[:, None] < SEQ_Q) & (offs_d[None, :] < HEAD_DIM))
        tl.store(LSE + bh.to(tl.int64) * SEQ_Q + offs_m, lse, mask=offs_m < SEQ_Q)


def attention_forward(q, k, v, *, causal: bool = False, scale: float | None = None,
                      causal_offset: int = 0, profile: Profile):
    """(o, lse): the output in q's dtype and each row's base-2 log-sum-exp of the scaled
    scores, [B * H, Sq] float32 (float64 inputs: float64; +inf for a row seeing no key)."""
    shapes = checked_shapes(q, k, v, causal, causal_offset, profile)
    B, H, H_kv, Sq, Sk, D = shapes
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    o = torch.empty((B, H, Sq, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((B * H, Sq), device=q.device,
                      dtype=torch.float64 if q.dtype == torch.float64 else torch.float32)
    if o.numel() == 0 or Sk == 0:  # no key: every row attends to nothing
        return o.zero_(), lse.fill_(float("inf"))
    # the checks' entry stands for the profile, the options and q, k, v's shapes and
    # dtypes; the kernel also takes their strides and the scale (see Replays)
    tensors, key = (q, k, v, o, lse), (q.stride(), k.stride(), v.stride(), scale)
    if _REPLAYS.replay(shapes, key, tensors):
        return o, lse
    fwd, tiles = _plan(profile, q.dtype, B, H, Sq, D, bool(causal))
    with _REPLAYS.record(shapes, key, tensors):
        fwd(q, k, v, o, lse, *q.stride(), *k.stride(), *v.stride(), *o.stride(),
            H, H // H_kv, Sq, Sk, D, tiles, scale * LOG2E, int(causal_offset))
    return o, lse


#: The forward's launch, replayed for inputs of one signature, layout and scale
_REPLAYS = Replays()


@launch_plan
def _plan(profile: Profile, dtype: torch.dtype, B: int, H: int, Sq: int, D: int,
          causal: bool) -> tuple[PlannedLaunch, int]:
    """The forward's launch (tiles from the profile's first config that fits) and its
    number of query tiles, B * H * cdiv(Sq, BLOCK_M)."""
    shape_kw, kw = _common(dtype, profile, causal, D)
    cfg = _config(profile, "attention", dtype, shape_kw["BLOCK_D"], _fwd_need)
    tiles = B * H * cdiv(Sq, cfg["BLOCK_M"])
    grid, stride = launch_grid(profile, tiles)
    return PlannedLaunch(_attn_fwd, grid, BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"],
                         GRID_STRIDE=stride, **shape_kw, **kw, **_launch_options(cfg)), tiles


def attention(q, k, v, *, causal: bool = False, scale: float | None = None,
              causal_offset: int = 0, profile: Profile) -> torch.Tensor:
    """softmax(scale * q @ k^T [causal mask]) @ v; scale defaults to 1 / sqrt(D)."""
    return attention_forward(q, k, v, causal=causal, scale=scale, causal_offset=causal_offset,
                             profile=profile)[0]
