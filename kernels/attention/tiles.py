"""JIT helpers of the attention kernels: tiles and per-row statistics read with masks (or,
on select-load profiles, from clamped addresses and zeroed with a select), the causal mask
and the split of a query block's keys into unmasked and masked blocks."""
import triton
import triton.language as tl


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

