"""Scans, sorts and reductions as primitive ops, along the last axis of a 2-D tensor:

- ``tl_cumsum`` / ``tl_cumprod``: forward and ``reverse=True``, within the bound of any
  order of summation (multiplication) of a prefix of n terms: n * u * (the sum of
  |terms|); for products ((1 + u)^n - 1) relative; u the unit roundoff of the dtype the
  scan runs in;
- ``tl_associative_scan``: a user combine function that does not commute (composing
  affine maps x -> a * x + b, integers that wrap), exact, forward and reverse;
- ``tl_sort`` (ascending, descending) and ``tl_topk``: exact, ties included; where NaN
  goes is recorded, not judged;
- ``tl_argmax``: ``tl.argmax`` / ``tl.argmin`` with ``tie_break_left=True`` (the first
  index of the extreme value, exact) and ``False`` (any index holding it; which one is
  recorded);
- ``tl_max_nan``: ``tl.max`` / ``tl.min`` (what a row holding NaN gives is recorded) and
  ``tl.reduce`` over ``tl.maximum`` / ``tl.minimum`` with ``propagate_nan=ALL`` (NaN,
  exact);
- ``tl_reduce_size1``: sum, max, min and argmax over an axis of size 1 (the element
  itself, bit for bit).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from triton_cts.ops.language import primitive_op

SUITE = "test_language_ops"
FLOATS = (torch.float16, torch.bfloat16, torch.float32)
SCAN_DTYPES = FLOATS + (torch.int32, torch.int64)
AFFINE_DTYPES = (torch.int32, torch.int64)
SORT_DTYPES = FLOATS + (torch.int32, torch.int64)
SHAPES_2D = ((4, 64), (3, 37))


@dataclass(frozen=True)
class ScanPrimitive:
    """A scan, sort or reduction primitive; ``kind`` names it for the suite."""

    kind: str


def scan_bound(x64: torch.Tensor, kind: str, dtype: torch.dtype, reverse: bool = False):
    """Elementwise bound on a computed prefix sum (product) of float64 ``x64`` rows run in
    ``dtype``: n * u * the prefix's sum of |x| ((n - 1) additions and the rounding of the
    result); for products ((1 + u)^n - 1) * |the prefix product|; n the prefix length,
    over any order of the operations. Integers: 0 (exact, wrapping)."""
    if not dtype.is_floating_point:
        return torch.zeros_like(x64)
    u = float(torch.finfo(dtype).eps) / 2
    x = x64.flip(1) if reverse else x64
    n = torch.arange(1, x.shape[1] + 1, dtype=torch.float64)
    if kind == "cumsum":
        bound = (n - 1) * u * x.abs().cumsum(1) + u * x.abs().cumsum(1)
    else:
        bound = ((1 + u) ** n - 1) * x.abs().cumprod(1)
    return bound.flip(1) if reverse else bound


def affine_reference(b: torch.Tensor, a: torch.Tensor, reverse: bool):
    """The b part of composing the maps x -> a * x + b along each row, exactly, wrapped to
    the dtype: forward, lane j holds the maps 0..j applied in order; reverse (Triton's
    reverse scan: flip, scan, flip), the maps n-1 down to j applied in that order."""
    bits = b.element_size() * 8
    mask = (1 << bits) - 1
    out = []
    for row_a, row_b in zip(a.tolist(), b.tolist()):
        pairs = list(zip(row_a, row_b))
        if reverse:
            pairs = pairs[::-1]
        acc_a, acc_b, done = None, None, []
        for pa, pb in pairs:
            if acc_a is None:
                acc_a, acc_b = pa & mask, pb & mask
            else:  # (acc then this map)
                acc_a, acc_b = (acc_a * pa) & mask, (acc_b * pa + pb) & mask
            done.append(acc_b - (1 << bits) if acc_b >> (bits - 1) else acc_b)
        out.append(done[::-1] if reverse else done)
    return torch.tensor(out, dtype=b.dtype).reshape(b.shape)


def _cumsum_reference(x):
    return x.cumsum(1), x.flip(1).cumsum(1).flip(1)


def _cumprod_reference(x):
    return x.cumprod(1), x.flip(1).cumprod(1).flip(1)


def _affine_reference(b, a):
    return affine_reference(b, a, False), affine_reference(b, a, True)


def _sort_reference(x):
    return x.sort(1).values, x.sort(1, descending=True).values


def _topk_reference(x, k=1):
    return x.topk(k, 1).values


def _arg_reference(x):
    first_max = x.argmax(1)
    first_min = x.argmin(1)
    return torch.stack([first_max, first_min, first_max, first_min]).to(torch.int32)


def _nan_reference(x):
    return torch.stack([x.amax(1), x.amin(1), x.amax(1), x.amin(1)])


def _size1_reference(x):
    return torch.stack([x, x, x, x]), torch.zeros(x.shape, dtype=torch.int32)


def _rows(x: torch.Tensor) -> torch.Tensor:
    return x if x.dim() == 2 else x.reshape(-1, x.shape[-1])


def _pow2_rows(x: torch.Tensor) -> torch.Tensor:
    """x's rows cut to a power-of-two length (sorts and arg reductions take whole rows)."""
    x = _rows(x)
    n = 1 << (max(1, x.shape[1]).bit_length() - 1)
    return x[:, :n]


def _affine_args(x, gen):
    b = _rows(x)
    a = torch.randint(-3, 4, b.shape, generator=gen).to(b.dtype)
    return (b, a), {}


def _scan_op(name, kind, reference, dtypes, make_args, description, shapes=SHAPES_2D,
             kernel=None, gaps=None):
    return primitive_op(
        name=name, suite=SUITE, primitive=ScanPrimitive(kind), description=description,
        reference=reference, reference_kernel=f"kernels.language.scans:{kernel or kind}",
        dtypes=dtypes, make_args=make_args, min_ndim=1, max_ndim=2, compile_shapes=shapes,
        mode_gaps=gaps or {},
    )


OPS = (
    _scan_op("tl_cumsum", "cumsum", _cumsum_reference, SCAN_DTYPES,
             lambda x, gen: ((_rows(x),), {}),
             "(tl.cumsum(x, 1), tl.cumsum(x, 1, reverse=True)), in x's dtype"),
    _scan_op("tl_cumprod", "cumprod", _cumprod_reference, SCAN_DTYPES,
             lambda x, gen: ((_rows(x),), {}),
             "(tl.cumprod(x, 1), tl.cumprod(x, 1, reverse=True)), in x's dtype"),
    _scan_op("tl_associative_scan", "affine", _affine_reference, AFFINE_DTYPES, _affine_args,
             "tl.associative_scan of a non-commuting combine (affine maps), forward and "
             "reverse", kernel="affine_scan"),
    _scan_op("tl_sort", "sort", _sort_reference, SORT_DTYPES,
             lambda x, gen: ((_pow2_rows(x),), {}),
             "(tl.sort(x, 1), tl.sort(x, 1, descending=True)) of power-of-two rows"),
    _scan_op("tl_topk", "topk", _topk_reference, SORT_DTYPES,
             lambda x, gen: ((_pow2_rows(x), 4), {}),
             "tl.topk(x, k, dim=1) of power-of-two rows (the k largest, descending)"),
    _scan_op("tl_argmax", "arg", _arg_reference, SORT_DTYPES,
             lambda x, gen: ((_pow2_rows(x),), {}),
             "tl.argmax / tl.argmin along rows, tie_break_left True then False",
             kernel="arg_reduce"),
    _scan_op("tl_max_nan", "nan", _nan_reference, FLOATS, lambda x, gen: ((_rows(x),), {}),
             "tl.max / tl.min along rows, and tl.reduce of tl.maximum / tl.minimum with "
             "propagate_nan=ALL", kernel="nan_reduce"),
    _scan_op("tl_reduce_size1", "size1", _size1_reference, SORT_DTYPES,
             lambda x, gen: ((x.reshape(-1),), {}),
             "tl.sum, tl.max, tl.min, tl.argmax over an axis of size 1 (the element itself)",
             shapes=((64,), (37,)), kernel="size1_reduce"),
)
