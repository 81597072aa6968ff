"""Scaled dot-product attention, FlashAttention-2 style: forward and backward.

``o = softmax(scale * q @ k^T + mask) @ v`` for q (B, H, Sq, D) and k, v (B, H_kv, Sk, D);
H_kv divides H (grouped-query attention: query head h reads key/value head h // (H / H_kv)).
Causal: query i sees key j where ``j <= i + causal_offset`` (0: torch's ``is_causal``, top
left; Sk - Sq: FlashAttention's bottom right); a query whose visible scores are all -inf
(it sees no key, or a -inf query) gets 0, as torch's scaled_dot_product_attention gives it
on the CPU and FlashAttention's kernels do.

Forward: a program owns BLOCK_M query rows of one (batch, head) and walks the keys in
BLOCK_N blocks with an online softmax (running max m and sum l, a float32 accumulator
rescaled by exp2(m_old - m_new)): the Sq x Sk scores are never stored. Scores are in base
2 (scale * log2(e) folded in); each row's base-2 log-sum-exp is stored (+inf for a row that
saw no key) so the backward recomputes p = exp2(s - lse), 0 for such a row. Key blocks every
row sees whole run unmasked, then the causal diagonal and the ragged end masked (select-load
profiles: the masked loop only); causal tiles stop at the last key their rows see. Backward
(FlashAttention-2, Algorithm 2): delta = rowsum(o * do); a kernel per key block sums dk, dv
over the query blocks and the query heads of its key/value head (no atomics); a kernel per
query block sums dq over the key blocks.

Head dims that are not a power of two are padded to the next (at least 16, the smallest
``tl.dot``) with masks; lengths need not be multiples of the blocks. On select-load profiles
(SIMD NPUs) out-of-range rows and columns read the last valid one and are zeroed with a
select, as in kernels/matmul.py. The grid is 1-D over (batch x heads x blocks), capped at
MAX_GRID_NUM with a grid-stride loop beyond it, so no axis limit is reached whatever B * H
is. Tiles, num_warps and num_stages come from the profile's ``autotune.attention`` (BLOCK_M
x BLOCK_N) and ``autotune.attention_backward`` (BLOCK_M1 x BLOCK_N1 for dk/dv, BLOCK_M2 x
BLOCK_N2 for dq, as in Triton's tutorial 06): the first config whose tiles fit the
profile's shared memory (an estimate; the compile suite measures it against the limit).
"""
import math

import torch
import triton
import triton.language as tl

from .fast_launch import launch
from .grid_stride import block_range, launch_grid
from triton_cts.execution.input_checks import (ShapeMismatchError, UnsupportedDtypeError,
                                               check_inputs)
from triton_cts.ops.attention import MAX_HEAD_DIM
from triton_cts.profiles import Profile, cdiv, next_power_of_2

DTYPES = (torch.float16, torch.bfloat16, torch.float32)
#: 1 / ln(2): scores are exponentiated in base 2.
LOG2E = 1.4426950408889634


@triton.jit
def _tile(base, rows, cols, stride_r, stride_c, n_rows, n_cols,
          MASK_ROWS: tl.constexpr, MASK_COLS: tl.constexpr, SELECT_LOADS: tl.constexpr):
    """A [rows, cols] tile of a row-major view at ``base``; rows >= n_rows and cols >=
    n_cols read as 0 (only where MASK_ROWS / MASK_COLS say they may exist)."""
    if SELECT_LOADS:
        # every lane reads a real element (the last row / column), zeroed afterwards
        r = tl.minimum(rows, n_rows - 1) if MASK_ROWS else rows
        c = tl.minimum(cols, n_cols - 1) if MASK_COLS else cols
        t = tl.load(base + r[:, None].to(tl.int64) * stride_r + c[None, :] * stride_c)
        if MASK_ROWS:
            t = tl.where(rows[:, None] < n_rows, t, 0.0)
        if MASK_COLS:
            t = tl.where(cols[None, :] < n_cols, t, 0.0)
    else:
        ptrs = base + rows[:, None].to(tl.int64) * stride_r + cols[None, :] * stride_c
        if MASK_ROWS and MASK_COLS:
            t = tl.load(ptrs, mask=(rows[:, None] < n_rows) & (cols[None, :] < n_cols),
                        other=0.0)
        elif MASK_ROWS:
            t = tl.load(ptrs, mask=rows[:, None] < n_rows, other=0.0)
        elif MASK_COLS:
            t = tl.load(ptrs, mask=cols[None, :] < n_cols, other=0.0)
        else:
            t = tl.load(ptrs)
    return t


@triton.jit
def _row_stats(base, rows, n_rows, MASK_ROWS: tl.constexpr, SELECT_LOADS: tl.constexpr):
    """Per-row statistics (lse, delta) of contiguous rows; 0 past n_rows."""
    if SELECT_LOADS:
        r = tl.minimum(rows, n_rows - 1) if MASK_ROWS else rows
        t = tl.load(base + r)
        if MASK_ROWS:
            t = tl.where(rows < n_rows, t, 0.0)
    elif MASK_ROWS:
        t = tl.load(base + rows, mask=rows < n_rows, other=0.0)
    else:
        t = tl.load(base + rows)
    return t


@triton.jit
def _visible(offs_m, offs_n, SEQ_Q, SEQ_K, causal_offset, CAUSAL: tl.constexpr):
    """[rows, keys] mask of the pairs that exist and that the causal mask keeps."""
    keep = (offs_m[:, None] < SEQ_Q) & (offs_n[None, :] < SEQ_K)
    if CAUSAL:
        keep = keep & (offs_n[None, :] <= offs_m[:, None] + causal_offset)
    return keep


@triton.jit
def _key_blocks(m0, SEQ_K, causal_offset, CAUSAL: tl.constexpr, SELECT_LOADS: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """(full, hi) for the query rows [m0, m0 + BLOCK_M): keys below ``full`` are seen whole
    by every row (unmasked loop), keys in [full, hi) need the mask, none past hi is seen."""
    if CAUSAL:
        hi = tl.minimum(SEQ_K, tl.maximum(m0 + BLOCK_M + causal_offset, 0))
        full = tl.minimum(tl.maximum(m0 + causal_offset + 1, 0), SEQ_K) // BLOCK_N * BLOCK_N
    else:
        hi = SEQ_K
        full = SEQ_K // BLOCK_N * BLOCK_N
    if SELECT_LOADS:  # every load is a select anyway: one masked loop, no unmasked one
        full = 0
    return full, hi


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


@triton.jit
def _attn_bwd_delta(
    O, DO, DELTA,                 # o and do [B, H, Sq, D]; rowsum(o * do) [B * H, Sq], float32
    stride_ob, stride_oh, stride_om, stride_od,
    stride_dob, stride_doh, stride_dom, stride_dod,
    H, SEQ_Q, HEAD_DIM, NUM_TILES,
    SELECT_LOADS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr,
    EVEN_D: tl.constexpr, GRID_STRIDE: tl.constexpr,
):
    pid = tl.program_id(0)
    num_m = tl.cdiv(SEQ_Q, BLOCK_M)
    step, stop = block_range(pid, NUM_TILES, GRID_STRIDE)
    for tile in range(pid, stop, step):
        bh = tile // num_m
        b = bh // H
        h = bh % H
        offs_m = (tile % num_m) * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_d = tl.arange(0, BLOCK_D)
        o = _tile(O + b.to(tl.int64) * stride_ob + h.to(tl.int64) * stride_oh, offs_m, offs_d,
                  stride_om, stride_od, SEQ_Q, HEAD_DIM, True, not EVEN_D, SELECT_LOADS)
        do = _tile(DO + b.to(tl.int64) * stride_dob + h.to(tl.int64) * stride_doh, offs_m,
                   offs_d, stride_dom, stride_dod, SEQ_Q, HEAD_DIM, True, not EVEN_D,
                   SELECT_LOADS)
        delta = tl.sum(o.to(DELTA.dtype.element_ty) * do.to(DELTA.dtype.element_ty), 1)
        tl.store(DELTA + bh.to(tl.int64) * SEQ_Q + offs_m, delta, mask=offs_m < SEQ_Q)


@triton.jit
def _dkdv_inner(dk, dv, k, v, Q, DO, LSE, DELTA, stride_qm, stride_qd, stride_dom, stride_dod,
                offs_n, offs_d, lo, hi, SEQ_Q, SEQ_K, HEAD_DIM, qk_scale, causal_offset,
                MASKED: tl.constexpr, CAUSAL: tl.constexpr, EVEN_D: tl.constexpr,
                SELECT_LOADS: tl.constexpr, INPUT_PRECISION: tl.constexpr,
                BLOCK_M: tl.constexpr):
    """dk, dv of one key block from the query blocks [lo, hi) of one query head, computed
    transposed ([keys, rows]) so that no tile is transposed in the accumulations."""
    for start_m in range(lo, hi, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        q = _tile(Q, offs_m, offs_d, stride_qm, stride_qd, SEQ_Q, HEAD_DIM,
                  MASKED, not EVEN_D, SELECT_LOADS)
        do = _tile(DO, offs_m, offs_d, stride_dom, stride_dod, SEQ_Q, HEAD_DIM,
                   MASKED, not EVEN_D, SELECT_LOADS)
        lse = _row_stats(LSE, offs_m, SEQ_Q, MASKED, SELECT_LOADS)
        delta = _row_stats(DELTA, offs_m, SEQ_Q, MASKED, SELECT_LOADS)
        s_t = tl.dot(k, tl.trans(q), input_precision=INPUT_PRECISION) * qk_scale
        p_t = tl.math.exp2(s_t - lse[None, :])
        if MASKED:
            keep = (offs_n[:, None] < SEQ_K) & (offs_m[None, :] < SEQ_Q)
            if CAUSAL:
                keep = keep & (offs_n[:, None] <= offs_m[None, :] + causal_offset)
            p_t = tl.where(keep, p_t, 0.0)
        dv = tl.dot(p_t.to(do.dtype), do, dv, input_precision=INPUT_PRECISION, out_dtype=dv.dtype)
        dp_t = tl.dot(v, tl.trans(do), input_precision=INPUT_PRECISION)
        ds_t = p_t * (dp_t - delta[None, :])
        dk = tl.dot(ds_t.to(q.dtype), q, dk, input_precision=INPUT_PRECISION, out_dtype=dk.dtype)
    return dk, dv


@triton.jit
def _attn_bwd_dkdv(
    Q, K, V, DO,                  # pointers to q, do [B, H, Sq, D] and k, v [B, H_kv, Sk, D]
    DK, DV,                       # pointers to dk, dv [B, H_kv, Sk, D], k's dtype
    LSE, DELTA,                   # pointers to the forward's lse and rowsum(o * do), float32
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_dob, stride_doh, stride_dom, stride_dod,
    stride_dkb, stride_dkh, stride_dkn, stride_dkd,   # dk and dv share this layout
    H_KV, GROUP, SEQ_Q, SEQ_K, HEAD_DIM,
    NUM_TILES,                    # B * H_kv * cdiv(SEQ_K, BLOCK_N)
    qk_scale, sm_scale, causal_offset,
    CAUSAL: tl.constexpr, FP64: tl.constexpr, INPUT_PRECISION: tl.constexpr,
    SELECT_LOADS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
    EVEN_D: tl.constexpr, GRID_STRIDE: tl.constexpr,
):
    pid = tl.program_id(0)
    ACC: tl.constexpr = tl.float64 if FP64 else tl.float32  # accumulators
    num_n = tl.cdiv(SEQ_K, BLOCK_N)
    step, stop = block_range(pid, NUM_TILES, GRID_STRIDE)
    for tile in range(pid, stop, step):
        bhk = tile // num_n
        b = bhk // H_KV
        hk = bhk % H_KV
        n0 = (tile % num_n) * BLOCK_N
        offs_n = n0 + tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, BLOCK_D)
        k = _tile(K + b.to(tl.int64) * stride_kb + hk.to(tl.int64) * stride_kh, offs_n,
                  offs_d, stride_kn, stride_kd, SEQ_K, HEAD_DIM, True, not EVEN_D, SELECT_LOADS)
        v = _tile(V + b.to(tl.int64) * stride_vb + hk.to(tl.int64) * stride_vh, offs_n,
                  offs_d, stride_vn, stride_vd, SEQ_K, HEAD_DIM, True, not EVEN_D, SELECT_LOADS)
        dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=ACC)
        dv = tl.zeros([BLOCK_N, BLOCK_D], dtype=ACC)
        # query blocks: [lo, full_lo) on the causal diagonal (masked), [full_lo, full_hi)
        # seeing every key of the block, then the ragged last block (masked)
        full_hi = SEQ_Q // BLOCK_M * BLOCK_M
        if CAUSAL:
            lo = tl.maximum(n0 - causal_offset, 0) // BLOCK_M * BLOCK_M
            full_lo = tl.cdiv(tl.maximum(n0 + BLOCK_N - 1 - causal_offset, 0), BLOCK_M) * BLOCK_M
        else:
            lo = 0
            full_lo = 0
        if SELECT_LOADS:  # one masked loop over the query blocks (see _key_blocks)
            full_lo = tl.cdiv(SEQ_Q, BLOCK_M) * BLOCK_M
        for g in range(0, GROUP):
            h = hk * GROUP + g
            q_base = Q + b.to(tl.int64) * stride_qb + h.to(tl.int64) * stride_qh
            do_base = DO + b.to(tl.int64) * stride_dob + h.to(tl.int64) * stride_doh
            lse_base = LSE + (b * H_KV * GROUP + h).to(tl.int64) * SEQ_Q
            delta_base = DELTA + (b * H_KV * GROUP + h).to(tl.int64) * SEQ_Q
            dk, dv = _dkdv_inner(dk, dv, k, v, q_base, do_base, lse_base, delta_base,
                                 stride_qm, stride_qd, stride_dom, stride_dod, offs_n, offs_d,
                                 lo, tl.minimum(full_lo, tl.cdiv(SEQ_Q, BLOCK_M) * BLOCK_M),
                                 SEQ_Q, SEQ_K, HEAD_DIM, qk_scale, causal_offset, True, CAUSAL,
                                 EVEN_D, SELECT_LOADS, INPUT_PRECISION, BLOCK_M)
            if not SELECT_LOADS:
                dk, dv = _dkdv_inner(dk, dv, k, v, q_base, do_base, lse_base, delta_base,
                                     stride_qm, stride_qd, stride_dom, stride_dod, offs_n,
                                     offs_d, full_lo, full_hi, SEQ_Q, SEQ_K, HEAD_DIM, qk_scale,
                                     causal_offset, False, CAUSAL, EVEN_D, SELECT_LOADS,
                                     INPUT_PRECISION, BLOCK_M)
                dk, dv = _dkdv_inner(dk, dv, k, v, q_base, do_base, lse_base, delta_base,
                                     stride_qm, stride_qd, stride_dom, stride_dod, offs_n,
                                     offs_d, tl.maximum(full_lo, full_hi), SEQ_Q, SEQ_Q, SEQ_K,
                                     HEAD_DIM, qk_scale, causal_offset, True, CAUSAL, EVEN_D,
                                     SELECT_LOADS, INPUT_PRECISION, BLOCK_M)
        out_off = (b.to(tl.int64) * stride_dkb + hk.to(tl.int64) * stride_dkh
                   + offs_n[:, None].to(tl.int64) * stride_dkn + offs_d[None, :] * stride_dkd)
        out_mask = (offs_n[:, None] < SEQ_K) & (offs_d[None, :] < HEAD_DIM)
        tl.store(DK + out_off, (dk * sm_scale).to(DK.dtype.element_ty), mask=out_mask)
        tl.store(DV + out_off, dv.to(DV.dtype.element_ty), mask=out_mask)


@triton.jit
def _dq_inner(dq, q, do, lse, delta, K, V, stride_kn, stride_kd, stride_vn, stride_vd,
              offs_m, offs_d, lo, hi, SEQ_Q, SEQ_K, HEAD_DIM, qk_scale, causal_offset,
              MASKED: tl.constexpr, CAUSAL: tl.constexpr, EVEN_D: tl.constexpr,
              SELECT_LOADS: tl.constexpr, INPUT_PRECISION: tl.constexpr,
              BLOCK_N: tl.constexpr):
    """dq of one query block from the key blocks [lo, hi)."""
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k = _tile(K, offs_n, offs_d, stride_kn, stride_kd, SEQ_K, HEAD_DIM,
                  MASKED, not EVEN_D, SELECT_LOADS)
        v = _tile(V, offs_n, offs_d, stride_vn, stride_vd, SEQ_K, HEAD_DIM,
                  MASKED, not EVEN_D, SELECT_LOADS)
        s = tl.dot(q, tl.trans(k), input_precision=INPUT_PRECISION) * qk_scale
        p = tl.math.exp2(s - lse[:, None])
        if MASKED:
            p = tl.where(_visible(offs_m, offs_n, SEQ_Q, SEQ_K, causal_offset, CAUSAL), p, 0.0)
        dp = tl.dot(do, tl.trans(v), input_precision=INPUT_PRECISION)
        ds = p * (dp - delta[:, None])
        dq = tl.dot(ds.to(k.dtype), k, dq, input_precision=INPUT_PRECISION, out_dtype=dq.dtype)
    return dq


@triton.jit
def _attn_bwd_dq(
    Q, K, V, DO,                  # pointers to q, do [B, H, Sq, D] and k, v [B, H_kv, Sk, D]
    DQ,                           # pointer to dq [B, H, Sq, D], q's dtype
    LSE, DELTA,                   # pointers to the forward's lse and rowsum(o * do), float32
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_dob, stride_doh, stride_dom, stride_dod,
    stride_dqb, stride_dqh, stride_dqm, stride_dqd,
    H, GROUP, SEQ_Q, SEQ_K, HEAD_DIM, NUM_TILES,
    qk_scale, sm_scale, causal_offset,
    CAUSAL: tl.constexpr, FP64: tl.constexpr, INPUT_PRECISION: tl.constexpr,
    SELECT_LOADS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
    EVEN_D: tl.constexpr, GRID_STRIDE: tl.constexpr,
):
    pid = tl.program_id(0)
    ACC: tl.constexpr = tl.float64 if FP64 else tl.float32  # accumulators
    num_m = tl.cdiv(SEQ_Q, BLOCK_M)
    step, stop = block_range(pid, NUM_TILES, GRID_STRIDE)
    for tile in range(pid, stop, step):
        bh = tile // num_m
        start_m = (num_m - 1 - tile % num_m) if CAUSAL else tile % num_m
        b = bh // H
        h = bh % H
        m0 = start_m * BLOCK_M
        offs_m = m0 + tl.arange(0, BLOCK_M)
        offs_d = tl.arange(0, BLOCK_D)
        q = _tile(Q + b.to(tl.int64) * stride_qb + h.to(tl.int64) * stride_qh, offs_m,
                  offs_d, stride_qm, stride_qd, SEQ_Q, HEAD_DIM, True, not EVEN_D, SELECT_LOADS)
        do = _tile(DO + b.to(tl.int64) * stride_dob + h.to(tl.int64) * stride_doh, offs_m,
                   offs_d, stride_dom, stride_dod, SEQ_Q, HEAD_DIM, True, not EVEN_D,
                   SELECT_LOADS)
        lse = _row_stats(LSE + bh.to(tl.int64) * SEQ_Q, offs_m, SEQ_Q, True, SELECT_LOADS)
        delta = _row_stats(DELTA + bh.to(tl.int64) * SEQ_Q, offs_m, SEQ_Q, True, SELECT_LOADS)
        k_base = K + b.to(tl.int64) * stride_kb + (h // GROUP).to(tl.int64) * stride_kh
        v_base = V + b.to(tl.int64) * stride_vb + (h // GROUP).to(tl.int64) * stride_vh
        dq = tl.zeros([BLOCK_M, BLOCK_D], dtype=ACC)
        full, hi = _key_blocks(m0, SEQ_K, causal_offset, CAUSAL, SELECT_LOADS, BLOCK_M, BLOCK_N)
        if not SELECT_LOADS:
            dq = _dq_inner(dq, q, do, lse, delta, k_base, v_base, stride_kn, stride_kd,
                           stride_vn, stride_vd, offs_m, offs_d, 0, full, SEQ_Q, SEQ_K,
                           HEAD_DIM, qk_scale, causal_offset, False, CAUSAL, EVEN_D,
                           SELECT_LOADS, INPUT_PRECISION, BLOCK_N)
        dq = _dq_inner(dq, q, do, lse, delta, k_base, v_base, stride_kn, stride_kd, stride_vn,
                       stride_vd, offs_m, offs_d, full, hi, SEQ_Q, SEQ_K, HEAD_DIM, qk_scale,
                       causal_offset, True, CAUSAL, EVEN_D, SELECT_LOADS, INPUT_PRECISION,
                       BLOCK_N)
        dq_ptrs = (DQ + b.to(tl.int64) * stride_dqb + h.to(tl.int64) * stride_dqh
                   + offs_m[:, None].to(tl.int64) * stride_dqm + offs_d[None, :] * stride_dqd)
        tl.store(dq_ptrs, (dq * sm_scale).to(DQ.dtype.element_ty),
                 mask=(offs_m[:, None] < SEQ_Q) & (offs_d[None, :] < HEAD_DIM))


# --------------------------------------------------------------------------------------
# Launchers
# --------------------------------------------------------------------------------------
def _default_configs(profile: Profile, table: str) -> list[dict[str, int]]:
    """Used ONLY where the profile has no attention table: small tiles, unpipelined."""
    tiles = {"BLOCK_M": 64, "BLOCK_N": 32} if table == "attention" else \
        {"BLOCK_M1": 32, "BLOCK_N1": 64, "BLOCK_M2": 64, "BLOCK_N2": 32}
    return [tiles | {"num_warps": profile["launch.default_num_warps"], "num_stages": 1}]


def _tiles_bytes(stages: int, elem: int, block_d: int, resident: int, streamed: int,
                 m: int, n: int) -> int:
    """Shared memory of a kernel's tiles, estimated: ``resident`` rows of the head dim stay,
    ``streamed`` rows a step are pipelined num_stages deep, one [m, n] tile is staged."""
    return elem * ((resident + max(stages, 1) * streamed) * block_d + m * n)


def _fwd_need(c, elem, block_d):
    m, n = c["BLOCK_M"], c["BLOCK_N"]
    return _tiles_bytes(c.get("num_stages", 1), elem, block_d, m, 2 * n, m, n)


def _bwd_need(c, elem, block_d):
    """The larger of the dk/dv kernel (k, v stay; q, do stream) and the dq kernel."""
    stages = c.get("num_stages", 1)
    m1, n1, m2, n2 = c["BLOCK_M1"], c["BLOCK_N1"], c["BLOCK_M2"], c["BLOCK_N2"]
    return max(_tiles_bytes(stages, elem, block_d, 2 * n1, 2 * m1, m1, n1),
               _tiles_bytes(stages, elem, block_d, 2 * m2, 2 * n2, m2, n2))


def _launch_options(cfg: dict) -> dict:
    """A config's launch options (num_warps, num_stages, waves_per_eu): all but its tiles."""
    return {k: v for k, v in cfg.items() if not k.startswith("BLOCK_")}


def _config(profile: Profile, table: str, dtype: torch.dtype, block_d: int, need) -> dict:
    """The first config of the profile's ``autotune.<table>`` whose tiles fit its shared
    memory (``need(cfg, elem, block_d)`` bytes), else the smallest."""
    configs = profile.autotune_configs(table) or _default_configs(profile, table)
    elem = dtype.itemsize
    limit = profile["limits.shared_memory_per_block"]
    fits = [c for c in configs if need(c, elem, block_d) <= limit]
    return fits[0] if fits else min(configs, key=lambda c: need(c, elem, block_d))


def _check(q, k, v, causal, causal_offset, profile, op="attention", **more):
    """(B, H, H_kv, Sq, Sk, D) after checking shapes, dtypes and options."""
    check_inputs(op, profile, DTYPES + (torch.float64,), q=q, k=k, v=v, **more)
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ShapeMismatchError(f"{op}: need q (B, H, Sq, D) and k, v (B, H_kv, Sk, D), got "
                                 f"q={tuple(q.shape)}, k={tuple(k.shape)}, v={tuple(v.shape)}")
    (B, H, Sq, D), (Bk, H_kv, Sk, Dk) = q.shape, k.shape
    if k.shape != v.shape or Bk != B or Dk != D:
        raise ShapeMismatchError(f"{op}: k and v must be (B, H_kv, Sk, D) with q's B and D, got "
                                 f"q={tuple(q.shape)}, k={tuple(k.shape)}, v={tuple(v.shape)}")
    if H_kv == 0 and H != 0 or H_kv and H % H_kv:
        raise ShapeMismatchError(f"{op}: key/value heads ({H_kv}) must divide query heads ({H})")
    if D > MAX_HEAD_DIM:
        raise ShapeMismatchError(f"{op}: head dim {D} is above the kernels' limit {MAX_HEAD_DIM}")
    if any(t is not None and t.shape != q.shape for t in more.values()):
        raise ShapeMismatchError(f"{op}: do must have q's shape {tuple(q.shape)}")
    if len({t.dtype for t in (q, k, v, *more.values()) if t is not None}) != 1:
        raise UnsupportedDtypeError(f"{op}: q, k, v must have one dtype, got {q.dtype}, "
                                    f"{k.dtype}, {v.dtype}")
    if str(q.dtype).removeprefix("torch.") not in profile["dtypes.dot"]:
        raise UnsupportedDtypeError(f"{op}: profile '{profile.name}' has no tl.dot for "
                                    f"{q.dtype} (dtypes.dot in {profile.source})")
    if causal_offset and not causal:
        raise ValueError(f"{op}: causal_offset={causal_offset} needs causal=True")
    return B, H, H_kv, Sq, Sk, D


def _common(q, profile, causal, D):
    """Keyword arguments every kernel takes."""
    block_d = max(16, next_power_of_2(D))
    # float32 dots are IEEE even with tf32 (unlike matmul), as in torch: softmax turns a
    # score's tf32 error (2^-11 of a few hundred) into 30% of an output (H100, wide_range)
    return dict(SELECT_LOADS=profile.select_loads, BLOCK_D=block_d, EVEN_D=D == block_d), \
        dict(CAUSAL=bool(causal), FP64=q.dtype == torch.float64, INPUT_PRECISION="ieee")


def attention_forward(q, k, v, *, causal: bool = False, scale: float | None = None,
                      causal_offset: int = 0, profile: Profile):
    """(o, lse): the output in q's dtype and each row's base-2 log-sum-exp of the scaled
    scores, [B * H, Sq] float32 (float64 inputs: float64; +inf for a row seeing no key)."""
    B, H, H_kv, Sq, Sk, D = _check(q, k, v, causal, causal_offset, profile)
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    o = torch.empty((B, H, Sq, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((B * H, Sq), device=q.device,
                      dtype=torch.float64 if q.dtype == torch.float64 else torch.float32)
    if o.numel() == 0 or Sk == 0:  # no key: every row attends to nothing
        return o.zero_(), lse.fill_(float("inf"))
    shape_kw, kw = _common(q, profile, causal, D)
    cfg = _config(profile, "attention", q.dtype, shape_kw["BLOCK_D"], _fwd_need)
    tiles = B * H * cdiv(Sq, cfg["BLOCK_M"])
    grid, stride = launch_grid(profile, tiles)
    launch(_attn_fwd, grid,
        q, k, v, o, lse, *q.stride(), *k.stride(), *v.stride(), *o.stride(),
        H, H // H_kv, Sq, Sk, D, tiles, scale * LOG2E, int(causal_offset),
        BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"], GRID_STRIDE=stride,
        **shape_kw, **kw, **_launch_options(cfg))
    return o, lse


def attention(q, k, v, *, causal: bool = False, scale: float | None = None,
              causal_offset: int = 0, profile: Profile) -> torch.Tensor:
    """softmax(scale * q @ k^T [causal mask]) @ v; scale defaults to 1 / sqrt(D)."""
    return attention_forward(q, k, v, causal=causal, scale=scale, causal_offset=causal_offset,
                             profile=profile)[0]


def attention_backward_from_saved(q, k, v, o, lse, do, causal, scale, causal_offset, profile):
    """(dq, dk, dv) from the forward's o and lse (what autograd saves)."""
    B, H, H_kv, Sq, Sk, D = _check(q, k, v, causal, causal_offset, profile,
                                   "attention_backward", do=do)
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    dq, dk, dv = (torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in (q, k, v))
    if dq.numel() == 0 or dk.numel() == 0:  # no query or no key: nothing flows
        return dq.zero_(), dk.zero_(), dv.zero_()
    shape_kw, kw = _common(q, profile, causal, D)
    cfg = _config(profile, "attention_backward", q.dtype, shape_kw["BLOCK_D"], _bwd_need)
    options = _launch_options(cfg)
    delta = torch.empty((B * H, Sq), dtype=lse.dtype, device=q.device)
    tiles = B * H * cdiv(Sq, cfg["BLOCK_M2"])
    grid, stride = launch_grid(profile, tiles)
    launch(_attn_bwd_delta, grid, o, do, delta, *o.stride(), *do.stride(), H, Sq, D, tiles,
           BLOCK_M=cfg["BLOCK_M2"], GRID_STRIDE=stride, **shape_kw, **options)
    common = (scale * LOG2E, scale, int(causal_offset))
    kv_tiles = B * H_kv * cdiv(Sk, cfg["BLOCK_N1"])
    kv_grid, kv_stride = launch_grid(profile, kv_tiles)
    launch(_attn_bwd_dkdv, kv_grid,
        q, k, v, do, dk, dv, lse, delta, *q.stride(), *k.stride(), *v.stride(), *do.stride(),
        *dk.stride(), H_kv, H // H_kv, Sq, Sk, D, kv_tiles, *common,
        BLOCK_M=cfg["BLOCK_M1"], BLOCK_N=cfg["BLOCK_N1"], GRID_STRIDE=kv_stride, **shape_kw,
        **kw, **options)
    launch(_attn_bwd_dq, grid,
        q, k, v, do, dq, lse, delta, *q.stride(), *k.stride(), *v.stride(), *do.stride(),
        *dq.stride(), H, H // H_kv, Sq, Sk, D, tiles, *common,
        BLOCK_M=cfg["BLOCK_M2"], BLOCK_N=cfg["BLOCK_N2"], GRID_STRIDE=stride, **shape_kw,
        **kw, **options)
    return dq, dk, dv


def attention_backward(q, k, v, do, *, causal: bool = False, scale: float | None = None,
                       causal_offset: int = 0, profile: Profile):
    """(dq, dk, dv) of :func:`attention` for the output gradient ``do`` (forward, then backward)."""
    o, lse = attention_forward(q, k, v, causal=causal, scale=scale,
                               causal_offset=causal_offset, profile=profile)
    return attention_backward_from_saved(q, k, v, o, lse, do, causal, scale, causal_offset,
                                         profile)


class AttentionFunction(torch.autograd.Function):
    """Differentiable :func:`attention`: gradients flow to q, k and v."""

    @staticmethod
    def forward(ctx, q, k, v, causal, scale, causal_offset, profile):
        o, lse = attention_forward(q, k, v, causal=causal, scale=scale,
                                   causal_offset=causal_offset, profile=profile)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.options = (causal, scale, causal_offset, profile)
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        return (*attention_backward_from_saved(q, k, v, o, lse, do, *ctx.options),
                None, None, None, None)


def attention_autograd(q, k, v, *, causal: bool = False, scale: float | None = None,
                       causal_offset: int = 0, profile: Profile):
    """:class:`AttentionFunction` with keyword options, for gradcheck."""
    return AttentionFunction.apply(q, k, v, causal, scale, causal_offset, profile)
