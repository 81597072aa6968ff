"""The input-size budget of the suites, per execution mode, and the shapes at the real
profile's boundaries that device mode checks.

- Interpreter mode draws inputs of at most :data:`INTERPRETER_NUMEL` elements: the
  interpreter costs about half a millisecond per program on a CPU. Its fallback,
  multi-row and grid-stride paths are reached through derived profiles with tiny
  constants instead.
- Device mode draws inputs of at most :data:`DEVICE_NUMEL` elements, and checks each
  implementation at the real profile's boundaries (:func:`boundary_shapes`): rows one
  element either side of MAX_FUSED_SIZE (in the dtype and in float32), one past the
  elementwise block, more blocks than MAX_GRID_NUM programs (so grid-stride loops loop),
  and reductions over millions of elements; each bounded by the device memory a worker
  may use (:func:`device_memory_problem`).
- ``TRITON_CTS_MAX_NUMEL`` overrides the random draws' cap in every mode (not the
  boundary shapes, which are what the profile says). It is read only here, and the plugin
  reads it at start-up, so a bad value stops the run as a usage error instead of failing
  every reference kernel later.
"""
from __future__ import annotations

import os

import torch

from triton_cts.errors import UsageError

ENV_VAR = "TRITON_CTS_MAX_NUMEL"
#: Elements of one drawn input in interpreter mode (and compile mode's captures).
INTERPRETER_NUMEL = 1 << 11
#: Elements of one drawn input in device mode: a million, so that random shapes span
#: many programs; the profile's boundaries are checked by boundary_shapes.
DEVICE_NUMEL = 1 << 20
#: Elements of a full reduction checked at scale (the "large_reduction" boundary), and
#: the length of the long rows (and the count of the short ones) of the row boundaries.
LARGE_REDUCTION_NUMEL = (1 << 24) + 1
LONG_ROW = (1 << 21) + 1
#: Rows of the boundary shapes whose row length is a block size: about this many elements.
BOUNDARY_ROW_NUMEL = 1 << 20


def max_numel_override() -> int | None:
    """The cap set in ``TRITON_CTS_MAX_NUMEL``, or None where it is unset or empty (the
    suites' default applies). Anything but a positive int is a :class:`UsageError`."""
    text = os.environ.get(ENV_VAR)
    if text is None or not text.strip():
        return None
    try:
        value = int(text.strip())
    except ValueError:
        value = None
    if value is None or value < 1:
        raise UsageError(f"{ENV_VAR}={text!r}: expected a positive int (the most elements "
                         f"one drawn input may have); unset it for the default")
    return value


def max_numel(mode) -> int:
    """The most elements one drawn input may have in ``mode`` (``TRITON_CTS_MAX_NUMEL``
    where set)."""
    override = max_numel_override()
    if override is not None:
        return override
    return DEVICE_NUMEL if str(mode) == "device" else INTERPRETER_NUMEL


def _fit(op, rows: int, n: int) -> tuple[int, ...]:
    """(rows, n) as a shape ``op`` accepts: flattened for 1-D ops, with unit middle dims
    for ops of more dims (the last dim stays the one kernels block over)."""
    if op.max_ndim < 2:
        return (rows * n,)
    if op.min_ndim > 2:
        return (rows,) + (1,) * (op.min_ndim - 2) + (n,)
    return (rows, n)


def boundary_shapes(op, profile, dtype: torch.dtype) -> dict[str, tuple[int, ...]]:
    """Named shapes at ``profile``'s real boundaries for ``op`` on ``dtype``:

    - ``fused_limit`` and ``fused_limit_plus_1``: rows of MAX_FUSED_SIZE elements and one
      more (fused kernel against tiled fallback), also counted in float32 (``_f32``), the
      dtype 16-bit rows are held in;
    - ``elementwise_block_plus_1``: rows one element past the elementwise block;
    - ``grid_capped``: MAX_GRID_NUM + 1 rows, each as long as the elementwise block and the
      row stack: more elementwise blocks than programs for elementwise ops, more row
      blocks than programs for row ops (a row fills a program's stack), so grid-stride
      loops loop;
    - ``long_rows`` (4 rows of 2M elements) and ``many_short_rows`` (2M rows of 4): row
      reductions over millions of elements, and per-column ones (batch norm);
      ``large_reduction`` for ops of one dim: 16M + 1 elements.

    Rows at a block size come with enough rows for about :data:`BOUNDARY_ROW_NUMEL`
    elements. Shapes are laid out as ``op`` takes them (see ``_fit``)."""
    wide = torch.float32 if dtype.itemsize < 4 else dtype

    def rows_for(n: int) -> int:
        return max(1, BOUNDARY_ROW_NUMEL // n)

    out: dict[str, tuple[int, ...]] = {}
    for label, counted_in in (("", dtype), ("_f32", wide)):
        if label and counted_in == dtype:
            continue
        fused = profile.max_fused_elements(counted_in)
        out[f"fused_limit{label}"] = _fit(op, rows_for(fused), fused)
        out[f"fused_limit{label}_plus_1"] = _fit(op, rows_for(fused + 1), fused + 1)
    block = profile.elementwise_block(dtype)
    out["elementwise_block_plus_1"] = _fit(op, rows_for(block + 1), block + 1)
    row = max(block, profile.row_stack_elements(dtype))
    out["grid_capped"] = _fit(op, profile.max_grid_num + 1, row)
    if op.max_ndim < 2:
        out["large_reduction"] = (LARGE_REDUCTION_NUMEL,)
    else:
        out["long_rows"] = _fit(op, 4, LONG_ROW)
        out["many_short_rows"] = _fit(op, LONG_ROW, 4)
    return out


#: Bytes of device memory one element of a boundary case may take beyond
#: :data:`OWN_DTYPE_COPIES` copies in its own dtype: the float64 reference, the upcast input
#: and the comparison's float64 temporaries.
BYTES_PER_ELEMENT = 32
#: The case's input and the call's copy of it, each twice as large in the strided layout
#: (every other element of a wider buffer), the output and its guard.
OWN_DTYPE_COPIES = 6


def device_memory_problem(numel: int, dtype: torch.dtype) -> str | None:
    """Why a case of ``numel`` elements does not fit the device memory this process may
    use (its share of its own device: the workers on that device under ``-n N``), or None."""
    from triton_cts.execution import device_set, devices
    if not devices.available():
        return "no accelerator attached"
    total = devices.total_memory()  # the current device, the worker's own: any backend
    workers = device_set.workers_on_this_device()
    share = int(0.8 * total / workers)
    need = numel * (BYTES_PER_ELEMENT + OWN_DTYPE_COPIES * dtype.itemsize)
    if need > share:
        assignment = device_set.current()
        on = f" of device {assignment.index}" if assignment and assignment.index is not None \
            else ""
        return (f"needs about {need / 2**30:.1f} GiB of device memory; each of {workers} "
                f"worker(s){on} may use {share / 2**30:.1f} GiB (run with fewer -n workers)")
    return None
