"""Faulty softmax implementations, each wrong on one value class, one layout or one
boundary row length only, and right everywhere else: the suites must catch every one in
every run, whatever the hypothesis seed (tests/test_planted_coverage.py).

One row-per-program softmax kernel (float32 only: other dtypes are not supported, which
keeps the check cheap) reads each row through its strides; a launcher decides the fault
from the input and the profile it is given, as a real launcher decides a path:

- a value class: the kernel corrupts its output where the input is of that class
  (normal, large-offset, wide-range, subnormal or integer-tied values, told by what they
  are), turns NaN into 0 before the max (``with_specials``) or writes 0 for rows that are
  all -inf where the answer is NaN (``neg_inf_rows``);
- a layout: a row-major view with gaps read as if each row were dense (``strided``), a
  column-major view read with its strides swapped (``transposed``), or a contiguous input
  read as rows padded to the block (``contiguous``, wrong where a row is not a power of
  two long);
- a boundary of the row length N: 1, a prime, or one of MAX_FUSED_SIZE, half of it and the
  elementwise block (counted in float32 under the profile given) minus one, itself or plus
  one: the kernel corrupts its output there, as an off-by-one in a path decision would.
"""
import re

import torch
import triton
import triton.language as tl

from triton_cts.execution.input_checks import check_inputs


@triton.jit
def _softmax_rows_kernel(X, Y, N, stride_r, stride_c, LIMIT, BLOCK: tl.constexpr,
                         READ: tl.constexpr, FAULT: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    if READ == "dense_rows":      # each row's elements taken as adjacent
        offs = row * stride_r + cols
    elif READ == "swapped":       # the row and column strides swapped
        offs = row * stride_c + cols * stride_r
    elif READ == "padded_rows":   # rows taken as padded to the block
        offs = row * BLOCK + cols
    else:
        offs = row * stride_r + cols * stride_c
    # never past the view's last element, wherever a faulty read points
    x = tl.load(X + offs, mask=(cols < N) & (offs < LIMIT), other=-float("inf"))
    if FAULT == "nan_to_zero":
        x = tl.where(x != x, 0.0, x)
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    y = e / tl.sum(e, axis=0)
    if FAULT == "zero_rows":
        y = tl.where(m == -float("inf"), 0.0, y)
    if FAULT == "corrupt":
        y = tl.where(cols == 0, y + 0.5, y)
    tl.store(Y + row * N + cols, y, mask=cols < N)


def _is_prime(n: int) -> bool:
    return n >= 2 and all(n % d for d in range(2, int(n ** 0.5) + 1))


def _of_class(x: torch.Tensor, kind: str) -> bool:
    """Whether ``x`` holds values of the class ``kind``, told by what they are."""
    finite = bool(torch.isfinite(x).all())
    size = float(x[torch.isfinite(x)].abs().max()) if x.numel() and torch.isfinite(x).any() \
        else 0.0
    if kind == "normal":
        return finite and 1e-3 <= size <= 100 and abs(float(x.mean())) < 10 \
            and not bool((x == x.round()).all())
    if kind == "large_offset":
        return finite and float(x.min()) > 100
    if kind == "wide_range":
        return size > 1000 and bool((x < 0).any())
    if kind == "tiny":
        return finite and 0 < size < 1e-30
    if kind == "ties":
        return finite and x.numel() >= 2 and bool((x == x.round()).all())
    raise ValueError(kind)


def _boundary(n: int, profile, name: str) -> bool:
    """Whether a row of ``n`` is at the boundary ``name`` (1, prime, fused-1 ... block+1)."""
    if name == "1":
        return n == 1
    if name == "prime":
        return _is_prime(n)
    base, step = re.fullmatch(r"(fused/2|fused|block)([+-]1)?", name).groups()
    fused = profile.max_fused_elements(torch.float32)
    size = {"fused": fused, "fused/2": fused // 2,
            "block": profile.elementwise_block(torch.float32)}[base]
    return n == size + int(step or 0)


def _softmax(x, profile, fault: str):
    check_inputs("softmax", profile, (torch.float32,), x=x)
    n = x.shape[-1] if x.dim() else 1  # a 0-d input: one row of one element
    rows = x if x.dim() == 2 else x.reshape(-1, n)
    r = rows.shape[0]
    y = torch.empty((r, n), dtype=x.dtype, device=x.device)
    if not rows.numel():
        return y.reshape(x.shape)
    sr, sc = rows.stride()
    read, kernel_fault = "by_strides", ""
    kind, _, what = fault.partition(":")
    if kind == "class" and what == "with_specials":
        kernel_fault = "nan_to_zero"
    elif kind == "class" and what == "neg_inf_rows":
        kernel_fault = "zero_rows"
    elif kind == "class":
        kernel_fault = "corrupt" if _of_class(x, what) else ""
    elif kind == "layout" and what == "strided" and n > 1 and sc > 1 and sr >= n * sc:
        read = "dense_rows"
    elif kind == "layout" and what == "transposed" and r > 1 and n > 1 and sr < sc:
        read = "swapped"
    elif kind == "layout" and what == "contiguous" and rows.is_contiguous() and r > 1:
        read = "padded_rows"
    elif kind == "boundary":
        kernel_fault = "corrupt" if x.dim() and _boundary(n, profile, what) else ""
    limit = (r - 1) * sr + (n - 1) * sc + 1
    _softmax_rows_kernel[(r,)](rows, y, n, sr, sc, limit, BLOCK=triton.next_power_of_2(n),
                               READ=read, FAULT=kernel_fault)
    return y.reshape(x.shape)


def _planted(fault: str):
    def softmax(x, *, profile):
        return _softmax(x, profile, fault)
    kind, _, what = fault.partition(":")
    if kind != "boundary":
        softmax.__name__ = f"softmax_wrong_on_{what}"
    else:
        softmax.__name__ = "softmax_wrong_at_" + {"1": "rows_of_1", "prime": "a_prime"}.get(
            what, what.replace("fused/2", "half_fused").replace("+1", "_plus_1")
            .replace("-1", "_minus_1"))
    return softmax


#: Each planted fault: its implementation's name in this module -> what it is wrong on
#: ("class:NAME", "layout:NAME" or "boundary:NAME", in the names of the report's input
#: coverage).
FAULTS = {}
for _fault in ([f"class:{k}" for k in ("normal", "large_offset", "wide_range", "tiny",
                                      "with_specials", "ties", "neg_inf_rows")]
               + [f"layout:{k}" for k in ("strided", "transposed", "contiguous")]
               + [f"boundary:{b}" for b in ("1", "prime", "fused-1", "fused", "fused+1",
                                            "fused/2-1", "fused/2", "fused/2+1", "block-1",
                                            "block", "block+1")]):
    _fn = _planted(_fault)
    globals()[_fn.__name__] = _fn
    FAULTS[_fn.__name__] = _fault
