"""Rotary position embedding (RoPE), forward and backward, in both layouts.

x holds tokens by heads by head dim, ``[..., S, H, D]`` (the leading dims are batches of S
tokens); ``cos`` and ``sin`` are tables ``[P, R/2]`` of cos(p * theta_i), sin(p * theta_i)
for positions p and pair index i, R the rotary dim (even, at most D). Token s of a
sequence sits at position ``offset + s`` (decoding after a cache of ``offset`` tokens).
Each pair (x1, x2) of the first R columns is rotated by the angle of its position:

    y1 = x1 cos - x2 sin,   y2 = x2 cos + x1 sin

- half-split (GPT-NeoX, Llama): pair i is (x[i], x[i + R/2]);
- interleaved (GPT-J): pair i is (x[2i], x[2i + 1]).

Columns past R pass through unchanged (partial rotary, as GPT-NeoX's rotary_pct). The
backward is the transpose, a rotation by the opposite angle: the same kernel with sin
negated.

A program walks whole tokens (a grid-stride loop capped at the profile's MAX_GRID_NUM):
the token's position is a scalar, so its cos/sin slice is loaded once per pair block as a
vector and broadcast over the heads, and no offset is a division of a lane index. The
tile is [BLOCK_H heads, BLOCK_P pairs], two elements a pair, sized to the profile's
elementwise block. The math runs in float32 (float64 for float64 x) and rounds once.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .compute import to_compute
from .grid_stride import block_range, launch_grid
from triton_cts.execution.input_checks import ShapeMismatchError, check_inputs
from triton_cts.profiles import Profile, next_power_of_2
from .fast_launch import PassedChecks, launch, launch_plan, signature

DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
TABLE_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


@triton.jit
def _load_tile(PTR, offs, load_offs, mask, SELECT_LOADS: tl.constexpr):
    # zero where mask is false; SELECT_LOADS: every address is valid, select afterwards
    if SELECT_LOADS:
        v = tl.load(PTR + load_offs)
        return tl.where(mask, v, tl.zeros_like(v))
    else:
        return tl.load(PTR + offs, mask=mask, other=0)


@triton.jit
def _rope_kernel(
    X,                          # pointer to the input, contiguous [n_tokens, H, D]
    COS,                        # pointer to the cos table, contiguous [P, half]
    SIN,                        # pointer to the sin table, like COS
    Y,                          # pointer to the output, like X
    n_tokens,                   # tokens (every leading dim and S)
    seq_len,                    # S: token t sits at position offset + t % S
    n_heads,                    # H
    head_dim,                   # D
    half,                       # R / 2: pairs rotated per head
    offset,                     # position of each sequence's first token
    BLOCK_H: tl.constexpr,      # heads per tile
    BLOCK_P: tl.constexpr,      # pairs (and pass-through columns) per tile
    INTERLEAVED: tl.constexpr,  # GPT-J pairs (2i, 2i + 1), else GPT-NeoX (i, i + half)
    BACKWARD: tl.constexpr,     # rotate by the opposite angle (the transpose)
    SELECT_LOADS: tl.constexpr, # clamp masked-off lanes to valid addresses, select after
    COMPUTE_FP64: tl.constexpr, # float64 inputs are computed in float64, others in float32
    GRID_STRIDE: tl.constexpr,  # fewer programs than tokens: each walks several
):
    pid = tl.program_id(0).to(tl.int64)
    step, stop = block_range(pid, n_tokens, GRID_STRIDE)
    row_len = n_heads * head_dim
    for token in range(pid, stop, step):
        pos = token % seq_len + offset
        base = token * row_len
        for p0 in range(0, half, BLOCK_P):
            pairs = p0 + tl.arange(0, BLOCK_P)
            pmask = pairs < half
            safe_pairs = tl.minimum(pairs, half - 1)
            c = _load_tile(COS + pos * half, pairs, safe_pairs, pmask, SELECT_LOADS)
            s = _load_tile(SIN + pos * half, pairs, safe_pairs, pmask, SELECT_LOADS)
            c = to_compute(c, COMPUTE_FP64)
            s = to_compute(s, COMPUTE_FP64)
            if BACKWARD:
                s = -s
            for h0 in range(0, n_heads, BLOCK_H):
                heads = h0 + tl.arange(0, BLOCK_H)
                rows = heads[:, None] * head_dim
                safe_rows = tl.minimum(heads, n_heads - 1)[:, None] * head_dim
                if INTERLEAVED:
                    # one contiguous load of the pairs' 2 * BLOCK_P columns, split into
                    # (x[2i], x[2i + 1]): a stride-2 load is a gather on SIMD NPUs
                    cols = 2 * p0 + tl.arange(0, 2 * BLOCK_P)
                    mask = (heads < n_heads)[:, None] & (cols < 2 * half)[None, :]
                    offs = base + rows + cols[None, :]
                    x = _load_tile(X, offs, base + safe_rows
                                   + tl.minimum(cols, 2 * half - 1)[None, :], mask, SELECT_LOADS)
                    x = to_compute(x, COMPUTE_FP64)
                    x1, x2 = tl.split(tl.reshape(x, [BLOCK_H, BLOCK_P, 2]))
                    y1 = x1 * c[None, :] - x2 * s[None, :]
                    y2 = x2 * c[None, :] + x1 * s[None, :]
                    y = tl.reshape(tl.join(y1, y2), [BLOCK_H, 2 * BLOCK_P])
                    tl.store(Y + offs, y.to(Y.dtype.element_ty), mask=mask)
                else:
                    # pair i is (x[i], x[i + half]): two contiguous loads
                    mask = (heads < n_heads)[:, None] & pmask[None, :]
                    col2, safe2 = pairs + half, safe_pairs + half
                    offs1, offs2 = base + rows + pairs[None, :], base + rows + col2[None, :]
                    x1 = _load_tile(X, offs1, base + safe_rows + safe_pairs[None, :], mask,
                                    SELECT_LOADS)
                    x2 = _load_tile(X, offs2, base + safe_rows + safe2[None, :], mask,
                                    SELECT_LOADS)
                    x1 = to_compute(x1, COMPUTE_FP64)
                    x2 = to_compute(x2, COMPUTE_FP64)
                    y1 = x1 * c[None, :] - x2 * s[None, :]
                    y2 = x2 * c[None, :] + x1 * s[None, :]
                    tl.store(Y + offs1, y1.to(Y.dtype.element_ty), mask=mask)
                    tl.store(Y + offs2, y2.to(Y.dtype.element_ty), mask=mask)
        # columns past the rotary dim are copied
        for c0 in range(2 * half, head_dim, BLOCK_P):
            cols = c0 + tl.arange(0, BLOCK_P)
            safe_cols = tl.minimum(cols, head_dim - 1)
            for h0 in range(0, n_heads, BLOCK_H):
                heads = h0 + tl.arange(0, BLOCK_H)
                mask = (heads < n_heads)[:, None] & (cols < head_dim)[None, :]
                offs = base + heads[:, None] * head_dim + cols[None, :]
                safe = base + tl.minimum(heads, n_heads - 1)[:, None] * head_dim \
                    + safe_cols[None, :]
                v = _load_tile(X, offs, safe, mask, SELECT_LOADS)
                tl.store(Y + offs, v, mask=mask)


# --------------------------------------------------------------------------------------
# Launchers
# --------------------------------------------------------------------------------------
def _tile(profile: Profile, dtype: torch.dtype, n_heads: int, width: int) -> tuple[int, int]:
    """(BLOCK_H, BLOCK_P): pairs first (a whole head's where it fits), then heads, so a
    tile of 2 * BLOCK_H * BLOCK_P elements fills the profile's elementwise block."""
    block = profile.elementwise_block(dtype)
    block_p = max(1, min(next_power_of_2(max(width, 1)), block // 2))
    block_h = max(1, min(next_power_of_2(n_heads), block // (2 * block_p)))
    return block_h, block_p


#: Inputs (signature, offset and rotary dim) that passed :func:`_check`, per profile
_CHECKS = PassedChecks()


def _check(op: str, x, cos, sin, offset: int, rotary_dim: int | None, profile: Profile) -> int:
    """The rotary dim R, after checking shapes and options."""
    check_inputs(op, profile, DTYPES, x=x)
    check_inputs(op, profile, TABLE_DTYPES, cos=cos, sin=sin)
    if x.dim() < 3:
        raise ShapeMismatchError(f"{op}: x must be [..., S, H, D] (tokens, heads, head dim), "
                                 f"got shape {tuple(x.shape)}")
    seq_len, head_dim = x.shape[-3], x.shape[-1]
    rotary = head_dim if rotary_dim is None else int(rotary_dim)
    if rotary % 2 or not 0 <= rotary <= head_dim:
        raise ShapeMismatchError(f"{op}: rotary_dim must be even and in [0, head dim "
                                 f"{head_dim}], got {rotary}")
    if cos.shape != sin.shape or cos.dim() != 2:
        raise ShapeMismatchError(f"{op}: cos and sin must be tables of one shape [positions, "
                                 f"rotary_dim / 2], got cos={tuple(cos.shape)}, "
                                 f"sin={tuple(sin.shape)}")
    if int(offset) < 0:
        raise ValueError(f"{op}: offset must be >= 0, got {offset}")
    if cos.shape[1] != rotary // 2 or cos.shape[0] < int(offset) + seq_len:
        raise ShapeMismatchError(
            f"{op}: cos/sin must be at least [offset + S, rotary_dim / 2] = "
            f"[{int(offset) + seq_len}, {rotary // 2}], got {tuple(cos.shape)}")
    return rotary


def _apply(op: str, x, cos, sin, offset: int, interleaved: bool, rotary_dim, backward: bool,
           profile: Profile) -> torch.Tensor:
    rotary = _CHECKS.checked(profile, (op, offset, rotary_dim, signature(x, cos, sin)), x,
                             _check, op, x, cos, sin, offset, rotary_dim, profile)
    x = x.contiguous()
    y = torch.empty_like(x)
    seq_len, n_heads, head_dim = x.shape[-3:]
    n_tokens = x.shape[:-2].numel()
    if y.numel() == 0:
        return y  # no launch: a zero grid crashes some backends
    half = rotary // 2
    grid, meta = _plan(profile, n_tokens, n_heads, max(half, head_dim - rotary), x.dtype)
    launch(_rope_kernel, grid,
        x, cos.contiguous(), sin.contiguous(), y, n_tokens, seq_len, n_heads, head_dim, half,
        int(offset), INTERLEAVED=bool(interleaved), BACKWARD=backward, **meta)
    return y


@launch_plan
def _plan(profile: Profile, n_tokens: int, n_heads: int, width: int,
          dtype: torch.dtype) -> tuple:
    """(grid, constexprs and num_warps) of a launch over ``n_tokens`` tokens, tiles sized
    for ``width`` pairs (or pass-through columns) a head."""
    block_h, block_p = _tile(profile, dtype, n_heads, width)
    grid, grid_stride = launch_grid(profile, n_tokens)
    return grid, dict(BLOCK_H=block_h, BLOCK_P=block_p, SELECT_LOADS=profile.select_loads,
                      COMPUTE_FP64=dtype == torch.float64, GRID_STRIDE=grid_stride,
                      num_warps=profile.num_warps_for(2 * block_h * block_p))


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *, offset: int = 0,
         interleaved: bool = False, rotary_dim: int | None = None,
         profile: Profile) -> torch.Tensor:
    """RoPE of ``x`` ``[..., S, H, D]`` with tables ``[P, R/2]`` (P >= offset + S), the
    first ``rotary_dim`` (R, default D) columns rotated in the half-split layout or, with
    ``interleaved``, the GPT-J one; a new contiguous tensor of x's dtype."""
    return _apply("rope", x, cos, sin, offset, interleaved, rotary_dim, False, profile)


def rope_interleaved(x, cos, sin, *, offset: int = 0, rotary_dim: int | None = None,
                     profile: Profile) -> torch.Tensor:
    """:func:`rope` in the interleaved (GPT-J) layout."""
    return _apply("rope_interleaved", x, cos, sin, offset, True, rotary_dim, False, profile)


def rope_backward(dy: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *, offset: int = 0,
                  interleaved: bool = False, rotary_dim: int | None = None,
                  profile: Profile) -> torch.Tensor:
    """Gradient of :func:`rope` with respect to x: ``dy`` rotated by the opposite angles."""
    return _apply("rope_backward", dy, cos, sin, offset, interleaved, rotary_dim, True, profile)


class RopeFunction(torch.autograd.Function):
    """Differentiable :func:`rope`. The tables' gradients (which training never needs:
    they are constants of the positions) are computed by torch from the float64-exact
    formula, so that gradcheck, which perturbs every floating input, checks the kernels'
    gradient with respect to x."""

    @staticmethod
    def forward(ctx, x, cos, sin, offset, interleaved, rotary_dim, profile):
        ctx.save_for_backward(x, cos, sin)
        ctx.options = (offset, interleaved, rotary_dim, profile)
        return _apply("rope", x, cos, sin, offset, interleaved, rotary_dim, False, profile)

    @staticmethod
    def backward(ctx, dy):
        x, cos, sin = ctx.saved_tensors
        offset, interleaved, rotary_dim, profile = ctx.options
        dx = _apply("rope_backward", dy.contiguous(), cos, sin, offset, interleaved,
                    rotary_dim, True, profile)
        dcos = dsin = None
        if ctx.needs_input_grad[1] or ctx.needs_input_grad[2]:
            dcos, dsin = _table_grads(dy, x, cos, offset, interleaved, rotary_dim)
        return dx, dcos, dsin, None, None, None, None


def _table_grads(dy, x, cos, offset, interleaved, rotary_dim):
    """d/dcos and d/dsin of sum(dy * rope(x)), summed over every token at each position."""
    rotary = x.shape[-1] if rotary_dim is None else rotary_dim
    half, seq_len = rotary // 2, x.shape[-3]
    if interleaved:
        x1, x2, g1, g2 = x[..., 0:rotary:2], x[..., 1:rotary:2], dy[..., 0:rotary:2], \
            dy[..., 1:rotary:2]
    else:
        x1, x2, g1, g2 = x[..., :half], x[..., half:rotary], dy[..., :half], dy[..., half:rotary]
    per_token_c = (g1 * x1 + g2 * x2).sum(-2).reshape(-1, seq_len, half).sum(0)
    per_token_s = (g2 * x1 - g1 * x2).sum(-2).reshape(-1, seq_len, half).sum(0)
    dcos, dsin = torch.zeros_like(cos), torch.zeros_like(cos)
    dcos[offset:offset + seq_len] = per_token_c.to(cos.dtype)
    dsin[offset:offset + seq_len] = per_token_s.to(cos.dtype)
    return dcos, dsin


def rope_autograd(x, cos, sin, *, offset: int = 0, interleaved: bool = False,
                  rotary_dim: int | None = None, profile: Profile) -> torch.Tensor:
    """Differentiable :func:`rope`."""
    return RopeFunction.apply(x, cos, sin, offset, interleaved, rotary_dim, profile)


def rope_interleaved_autograd(x, cos, sin, *, offset: int = 0, rotary_dim: int | None = None,
                              profile: Profile) -> torch.Tensor:
    """Differentiable :func:`rope_interleaved`."""
    return RopeFunction.apply(x, cos, sin, offset, True, rotary_dim, profile)
