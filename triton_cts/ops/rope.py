"""Rotary position embedding: half-split (GPT-NeoX) and interleaved (GPT-J) layouts,
forward, and the backward (the rotation by the opposite angles).

The drawn tensor is x, read as ``[..., S, H, D]`` (tokens, heads, head dim). make_args
builds the tables for ``offset + S + 3`` positions (offset drawn in [0, 8): decoding after
a cache) with the usual frequencies theta_i = 10000^(-2i/R), computed in float64 and
rounded to float32 (float64 for float64 x): the tables a model keeps. The rotary dim R is
D rounded down to even, so an odd head dim leaves one column to pass through (partial
rotary).

Error model: y1 = x1 cos - x2 sin is one float32 (float64) expression of two products,
rounded once to x's dtype. Its rounding error is a few ulp of |x1 cos| + |x2 sin|, which
dwarfs |y1| where the two products cancel: for values with a large offset (|x| ~ 1e4) a
float32 y1 near 0 errs by ~1e-3, beyond atol. ``error_scale`` multiplies atol by that
magnitude (at least 1), as matmul's does for its dot products; elsewhere torch's default
bounds hold (the output's own rounding).
"""
from __future__ import annotations

import torch

from triton_cts.ops.spec import OpSpec

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
ROPE_BASE = 10000.0
#: Table rows beyond offset + S (a model's tables are longer than any one batch).
EXTRA_POSITIONS = 3
MAX_OFFSET = 8


def _pairs(x, rotary: int, interleaved: bool):
    """(x1, x2) of the rotated columns, and the pass-through columns."""
    half = rotary // 2
    if interleaved:
        return x[..., 0:rotary:2], x[..., 1:rotary:2], x[..., rotary:]
    return x[..., :half], x[..., half:rotary], x[..., rotary:]


def _unpairs(y1, y2, rest, interleaved: bool):
    if interleaved:
        rotated = torch.stack((y1, y2), dim=-1).flatten(-2)
    else:
        rotated = torch.cat((y1, y2), dim=-1)
    return torch.cat((rotated, rest), dim=-1)


def _tables(cos, sin, seq_len: int, offset: int):
    """cos, sin rows of positions offset .. offset + S - 1, as [S, 1, R/2] (over heads)."""
    return cos[offset:offset + seq_len][:, None, :], sin[offset:offset + seq_len][:, None, :]


def rotate(x, cos, sin, *, offset=0, interleaved=False, rotary_dim=None, sign=1.0):
    rotary = x.shape[-1] if rotary_dim is None else rotary_dim
    c, s = _tables(cos.to(x.dtype), sin.to(x.dtype), x.shape[-3], offset)
    s = s * sign
    x1, x2, rest = _pairs(x, rotary, interleaved)
    return _unpairs(x1 * c - x2 * s, x2 * c + x1 * s, rest, interleaved)


def rope_reference(x, cos, sin, *, offset=0, rotary_dim=None):
    return rotate(x, cos, sin, offset=offset, interleaved=False, rotary_dim=rotary_dim)


def rope_interleaved_reference(x, cos, sin, *, offset=0, rotary_dim=None):
    return rotate(x, cos, sin, offset=offset, interleaved=True, rotary_dim=rotary_dim)


def rope_backward_reference(dy, cos, sin, *, offset=0, interleaved=False, rotary_dim=None):
    # the transpose of a rotation is the rotation by the opposite angle
    return rotate(dy, cos, sin, offset=offset, interleaved=interleaved,
                  rotary_dim=rotary_dim, sign=-1.0)


def _error_scale(x, cos, sin, *, offset=0, interleaved=False, rotary_dim=None):
    """Per element of y: |x1 cos| + |x2 sin| for its pair (the magnitude its rounding
    scales with; see the module's error model), at least 1."""
    rotary = x.shape[-1] if rotary_dim is None else rotary_dim
    c, s = _tables(cos.abs(), sin.abs(), x.shape[-3], offset)
    x1, x2, rest = _pairs(x.abs(), rotary, interleaved)
    m1, m2 = x1 * c + x2 * s, x2 * c + x1 * s
    magnitude = _unpairs(m1, m2, torch.zeros_like(rest), interleaved)
    return (magnitude.nan_to_num(0.0, 0.0, 0.0).clamp(min=1.0),)


def make_tables(positions: int, rotary: int, dtype: torch.dtype, device=None):
    """(cos, sin) ``[positions, rotary / 2]``: float64 angles rounded to ``dtype``."""
    half = rotary // 2
    if torch.device(device or "cpu").type == "meta":  # full-size captures: no values
        return tuple(torch.empty(positions, half, dtype=dtype, device="meta") for _ in "cs")
    inv_freq = ROPE_BASE ** (-torch.arange(half, dtype=torch.float64, device="cpu") * 2
                             / max(rotary, 1))
    angles = torch.arange(positions, dtype=torch.float64, device="cpu")[:, None] * inv_freq
    return angles.cos().to(dtype).to(device), angles.sin().to(dtype).to(device)


def _table_dtype(x):
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def _draw_tables(x, gen):
    offset = int(torch.randint(0, MAX_OFFSET, (), generator=gen, device="cpu"))
    rotary = x.shape[-1] - x.shape[-1] % 2
    cos, sin = make_tables(offset + x.shape[-3] + EXTRA_POSITIONS, rotary, _table_dtype(x),
                           x.device)
    return cos, sin, offset, rotary


def _forward_args(x, gen):
    cos, sin, offset, rotary = _draw_tables(x, gen)
    return (x, cos, sin), {"offset": offset, "rotary_dim": rotary}


def _backward_args(x, gen):
    cos, sin, offset, rotary = _draw_tables(x, gen)
    interleaved = bool(torch.randint(0, 2, (), generator=gen, device="cpu"))
    return (x, cos, sin), {"offset": offset, "rotary_dim": rotary, "interleaved": interleaved}


#: Llama-7B-like ([tokens, 32 heads, 128]), a head dim of 96, and an odd one (64 + 1).
COMPILE_SHAPES = ((512, 32, 128), (2, 64, 8, 96), (16, 4, 65))

ROPE = OpSpec(
    name="rope",
    description="rotary position embedding, half-split (GPT-NeoX) layout, x [..., S, H, D]",
    reference=rope_reference,
    reference_kernel="kernels.rope:rope",
    autograd="kernels.rope:rope_autograd",
    dtypes=FLOATS,
    make_args=_forward_args,
    min_ndim=3,
    max_ndim=4,
    error_scale=_error_scale,
    compile_shapes=COMPILE_SHAPES,
    relations=("rotation_preserves_norm", "rope_backward_inverts"),
)

ROPE_INTERLEAVED = OpSpec(
    name="rope_interleaved",
    description="rotary position embedding, interleaved (GPT-J) layout, x [..., S, H, D]",
    reference=rope_interleaved_reference,
    reference_kernel="kernels.rope:rope_interleaved",
    autograd="kernels.rope:rope_interleaved_autograd",
    dtypes=FLOATS,
    make_args=_forward_args,
    min_ndim=3,
    max_ndim=4,
    error_scale=lambda *a, **k: _error_scale(*a, interleaved=True, **k),
    compile_shapes=COMPILE_SHAPES,
    relations=("rotation_preserves_norm",),  # the inverse: declared on rope
)

ROPE_BACKWARD = OpSpec(
    name="rope_backward",
    description="rotary position embedding, gradient with respect to x (either layout)",
    reference=rope_backward_reference,
    reference_kernel="kernels.rope:rope_backward",
    dtypes=FLOATS,
    make_args=_backward_args,
    min_ndim=3,
    max_ndim=4,
    error_scale=_error_scale,
    compile_shapes=COMPILE_SHAPES,
    relations=("rotation_preserves_norm",),
)

OPS = (ROPE, ROPE_INTERLEAVED, ROPE_BACKWARD)
