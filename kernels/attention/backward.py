"""Attention backward (FlashAttention-2, Algorithm 2): delta = rowsum(o * do), then one
kernel over key tiles (dk and dv) and query tiles (dq): two launches, or one where the
profile takes it and the tiles are few (see the package docstring)."""
import math

import torch
import triton
import triton.language as tl

from ..fast_launch import PlannedLaunch, Replays, launch_plan
from ..grid_stride import block_range, launch_grid
from triton_cts.profiles import Profile, cdiv
from .forward import attention_forward
from .plan import (LOG2E, _bwd_need, _common, _config, _launch_options, backward_single_launch,
                   checked_shapes)
from .tiles import _key_blocks, _row_stats, _tile, _visible


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
def _dkdv_tile(tile, Q, K, V, DO, DK, DV, LSE, DELTA,
               stride_qb, stride_qh, stride_qm, stride_qd,
               stride_kb, stride_kh, stride_kn, stride_kd,
               stride_vb, stride_vh, stride_vn, stride_vd,
               stride_dob, stride_doh, stride_dom, stride_dod,
               stride_dkb, stride_dkh, stride_dkn, stride_dkd,
               H_KV, GROUP, SEQ_Q, SEQ_K, HEAD_DIM, qk_scale, sm_scale, causal_offset,
               CAUSAL: tl.constexpr, ACC: tl.constexpr, INPUT_PRECISION: tl.constexpr,
               SELECT_LOADS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               BLOCK_D: tl.constexpr, EVEN_D: tl.constexpr):
    """dk and dv of key tile ``tile`` (one key block of one batch and key/value head),
    summed over the query blocks of every query head that reads it."""
    num_n = tl.cdiv(SEQ_K, BLOCK_N)
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
def _dq_tile(tile, Q, K, V, DO, DQ, LSE, DELTA,
             stride_qb, stride_qh, stride_qm, stride_qd,
             stride_kb, stride_kh, stride_kn, stride_kd,
             stride_vb, stride_vh, stride_vn, stride_vd,
             stride_dob, stride_doh, stride_dom, stride_dod,
             stride_dqb, stride_dqh, stride_dqm, stride_dqd,
             H, GROUP, SEQ_Q, SEQ_K, HEAD_DIM, qk_scale, sm_scale, causal_offset,
             CAUSAL: tl.constexpr, ACC: tl.constexpr, INPUT_PRECISION: tl.constexpr,
             SELECT_LOADS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
             BLOCK_D: tl.constexpr, EVEN_D: tl.constexpr):
    """dq of query tile ``tile`` (one query block of one batch and head), summed over the
    key blocks it sees; causal tiles are taken longest first."""
    num_m = tl.cdiv(SEQ_Q, BLOCK_M)
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


@triton.jit
def _attn_bwd_grads(
    Q, K, V, DO,                  # pointers to q, do [B, H, Sq, D] and k, v [B, H_kv, Sk, D]
    DQ, DK, DV,                   # pointers to dq (q's dtype) and dk, dv (k's dtype)
    LSE, DELTA,                   # pointers to the forward's lse and rowsum(o * do), float32
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_dob, stride_doh, stride_dom, stride_dod,
    stride_dqb, stride_dqh, stride_dqm, stride_dqd,
    stride_dkb, stride_dkh, stride_dkn, stride_dkd,   # dk and dv share this layout
    H, H_KV, GROUP, SEQ_Q, SEQ_K, HEAD_DIM,   # GROUP = H // H_KV (1, a constexpr, without GQA)
    KV_TILES,                     # B * H_kv * cdiv(SEQ_K, BLOCK_N1): the dk/dv tiles
    NUM_TILES,                    # the launch's tiles (see DKDV_TILES and DQ_TILES)
    qk_scale, sm_scale, causal_offset,
    CAUSAL: tl.constexpr, FP64: tl.constexpr, INPUT_PRECISION: tl.constexpr,
    SELECT_LOADS: tl.constexpr,
    BLOCK_M1: tl.constexpr, BLOCK_N1: tl.constexpr, BLOCK_M2: tl.constexpr,
    BLOCK_N2: tl.constexpr, BLOCK_D: tl.constexpr, EVEN_D: tl.constexpr,
    DKDV_TILES: tl.constexpr, DQ_TILES: tl.constexpr,   # which tiles: dk/dv, dq, or dk/dv then dq
    GRID_STRIDE: tl.constexpr,
):
    pid = tl.program_id(0)
    ACC: tl.constexpr = tl.float64 if FP64 else tl.float32  # accumulators
    step, stop = block_range(pid, NUM_TILES, GRID_STRIDE)
    # both kinds in one launch: the tiles are independent (each reads only q, k, v, do, lse
    # and delta), and a launch costs the host more than a small backward. A program walks
    # its dk/dv tiles, then its dq tiles, in two loops (one of them runs no step), not in
    # one loop branching on the tile: compiled for sm_90 (triton 3.6), that branch gave
    # wrong dq on fp16/bf16 inputs of head dim 33 read with a stride of 2 (57.19 against
    # 2.60, 18732 of 35937 elements) where the two loops give torch's
    kv_stop = stop
    if DQ_TILES:
        kv_stop = tl.minimum(stop, KV_TILES)
    if DKDV_TILES:
        for tile in range(pid, kv_stop, step):
            _dkdv_tile(tile, Q, K, V, DO, DK, DV, LSE, DELTA,
                       stride_qb, stride_qh, stride_qm, stride_qd,
                       stride_kb, stride_kh, stride_kn, stride_kd,
                       stride_vb, stride_vh, stride_vn, stride_vd,
                       stride_dob, stride_doh, stride_dom, stride_dod,
                       stride_dkb, stride_dkh, stride_dkn, stride_dkd,
                       H_KV, GROUP, SEQ_Q, SEQ_K, HEAD_DIM, qk_scale, sm_scale, causal_offset,
                       CAUSAL, ACC, INPUT_PRECISION, SELECT_LOADS, BLOCK_M1, BLOCK_N1,
                       BLOCK_D, EVEN_D)
    if DQ_TILES:
        first = pid
        offset = 0
        if DKDV_TILES:  # the dq tiles follow the dk/dv ones: the program's first past them
            first = pid + tl.cdiv(tl.maximum(KV_TILES - pid, 0), step) * step
            offset = KV_TILES
        for tile in range(first, stop, step):
            _dq_tile(tile - offset, Q, K, V, DO, DQ, LSE, DELTA,
                     stride_qb, stride_qh, stride_qm, stride_qd,
                     stride_kb, stride_kh, stride_kn, stride_kd,
                     stride_vb, stride_vh, stride_vn, stride_vd,
                     stride_dob, stride_doh, stride_dom, stride_dod,
                     stride_dqb, stride_dqh, stride_dqm, stride_dqd,
                     H, GROUP, SEQ_Q, SEQ_K, HEAD_DIM, qk_scale, sm_scale, causal_offset,
                     CAUSAL, ACC, INPUT_PRECISION, SELECT_LOADS, BLOCK_M2, BLOCK_N2,
                     BLOCK_D, EVEN_D)


def attention_backward_from_saved(q, k, v, o, lse, do, causal, scale, causal_offset, profile):
    """(dq, dk, dv) from the forward's o and lse (what autograd saves)."""
    shapes = checked_shapes(q, k, v, causal, causal_offset, profile, "attention_backward",
                            do=do)
    B, H, H_kv, Sq, Sk, D = shapes
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    dq, dk, dv = (torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in (q, k, v))
    if dq.numel() == 0 or dk.numel() == 0:  # no query or no key: nothing flows
        return dq.zero_(), dk.zero_(), dv.zero_()
    delta = torch.empty((B * H, Sq), dtype=lse.dtype, device=q.device)
    # the checks' entry stands for the profile, the options and q, k, v, do's shapes and
    # dtypes; the kernels also take the strides, o's and lse's dtypes and the scale
    tensors = (q, k, v, o, lse, do, dq, dk, dv, delta)
    key = (q.stride(), k.stride(), v.stride(), o.stride(), do.stride(), o.dtype, lse.dtype,
           scale)
    if _REPLAYS.replay(shapes, key, tensors):
        return dq, dk, dv
    delta_launch, grads_launches, tiles, kv_tiles = _plan(
        profile, q.dtype, B, H, H_kv, Sq, Sk, D, bool(causal))
    # the query heads of a key/value head are an argument, not H // H_KV in the kernel:
    # Triton makes an argument of 1 a constexpr, so without grouped heads the dk/dv loop
    # over them unrolls (computed, it kept the accumulators live across a runtime loop:
    # sm_90, bf16, head dim 128, causal: 237 registers and no spills -> 255 and 536 bytes)
    with _REPLAYS.record(shapes, key, tensors):
        delta_launch(o, do, delta, *o.stride(), *do.stride(), H, Sq, D, tiles)
        for grads_launch, launch_tiles in grads_launches:
            grads_launch(q, k, v, do, dq, dk, dv, lse, delta, *q.stride(), *k.stride(),
                         *v.stride(), *do.stride(), *dq.stride(), *dk.stride(), H, H_kv,
                         H // H_kv, Sq, Sk, D, kv_tiles, launch_tiles, scale * LOG2E, scale,
                         int(causal_offset))
    return dq, dk, dv


#: The backward's launches, replayed for inputs of one signature, layout and scale
_REPLAYS = Replays()


@launch_plan
def _plan(profile: Profile, dtype: torch.dtype, B: int, H: int, H_kv: int, Sq: int, Sk: int,
          D: int, causal: bool) -> tuple[PlannedLaunch, tuple, int, int]:
    """The backward's launches: delta over query tiles of BLOCK_M2 rows, then the
    gradients' (each with its number of tiles), and the numbers of query and key tiles
    (tiles from the profile's first config that fits).

    dk/dv over key tiles of BLOCK_N1 keys and dq over the query tiles are one launch where
    the profile takes it (``tuning.attention.backward_single_launch``: measured on the
    H200 alone) and all of them fit one program per compute unit: such a call is bound by
    the host. Past that, two launches: one launch of every tile ran slower
    (benchmarks/results/h200.jsonl, experiment "comments"). The gradients are bitwise the
    same either way.
    """
    shape_kw, kw = _common(dtype, profile, causal, D)
    cfg = _config(profile, "attention_backward", dtype, shape_kw["BLOCK_D"], _bwd_need)
    options = _launch_options(cfg)
    tiles = B * H * cdiv(Sq, cfg["BLOCK_M2"])
    grid, stride = launch_grid(profile, tiles)
    kv_tiles = B * H_kv * cdiv(Sk, cfg["BLOCK_N1"])
    meta = dict(BLOCK_M1=cfg["BLOCK_M1"], BLOCK_N1=cfg["BLOCK_N1"], BLOCK_M2=cfg["BLOCK_M2"],
                BLOCK_N2=cfg["BLOCK_N2"], **shape_kw, **kw, **options)

    def grads(n_tiles: int, dkdv: bool, dq: bool) -> tuple[PlannedLaunch, int]:
        grads_grid, grads_stride = launch_grid(profile, n_tiles)
        return PlannedLaunch(_attn_bwd_grads, grads_grid, DKDV_TILES=dkdv, DQ_TILES=dq,
                             GRID_STRIDE=grads_stride, **meta), n_tiles
    if backward_single_launch(profile) and kv_tiles + tiles <= profile.compute_units:
        launches = (grads(kv_tiles + tiles, True, True),)
    else:
        launches = (grads(kv_tiles, True, False), grads(tiles, False, True))
    return (PlannedLaunch(_attn_bwd_delta, grid, BLOCK_M=cfg["BLOCK_M2"], GRID_STRIDE=stride,
                          **shape_kw, **options),
            launches, tiles, kv_tiles)


def attention_backward(q, k, v, do, *, causal: bool = False, scale: float | None = None,
                       causal_offset: int = 0, profile: Profile):
    """(dq, dk, dv) of :func:`attention` for the output gradient ``do`` (forward, then backward)."""
    o, lse = attention_forward(q, k, v, causal=causal, scale=scale,
                               causal_offset=causal_offset, profile=profile)
    return attention_backward_from_saved(q, k, v, o, lse, do, causal, scale, causal_offset,
                                         profile)
