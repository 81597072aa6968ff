"""Dtype helpers the ops, suites, kernels and benchmarks share."""
from __future__ import annotations

import torch

#: The signed integer dtype of each element width in bytes.
_SIGNED = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def int_dtype(width: int) -> torch.dtype:
    """The signed integer dtype of ``width`` bytes (a float's bits viewed as an integer)."""
    try:
        return _SIGNED[width]
    except KeyError:
        raise ValueError(f"no signed integer dtype of {width} bytes; widths: "
                         f"{', '.join(map(str, _SIGNED))}") from None


def has_int_dtype(width: int) -> bool:
    return width in _SIGNED


def bits(t: torch.Tensor) -> torch.Tensor:
    """``t``'s elements as the signed integers of their bits: equal where the bits are
    (a NaN equals the same NaN, -0.0 differs from 0.0)."""
    return t.contiguous().view(int_dtype(t.element_size()))
