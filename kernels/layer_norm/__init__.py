"""Layer norm and RMS norm over the last dimension: forward and five backward strategies.

    x'   = dropout(x * rowscale) + residual        (each piece optional)
    y    = (x' - mean) * rstd * weight + bias      rstd = 1 / sqrt(var(x') + eps)
    y    = x' * rstd * weight (+ bias)             RMS mode: rstd = 1 / sqrt(mean(x'^2) + eps)

The family is split where it divides:

- :mod:`.tiles`: what forward and backward share: JIT helpers for tiles, rows and the
  optional inputs, tile sizes from the profile, argument checks;
- :mod:`.plan`: the forward's launch (strategy, tiles, warps, grid) from the profile and
  its tuning table, and the row-group layout both directions take;
- :mod:`.plan_backward`: the backward's launches (strategy, each kernel's tiles, warps
  and grid, the column sums of its partial rows), likewise;
- :mod:`.forward`: the fused and tiled forward kernels and ``layer_norm`` / ``rms_norm``;
- :mod:`.backward`: the fused backward kernel, its two strategies (atomic, partial) and
  every backward entry point;
- :mod:`.long_rows`: the tiled and column strategies for rows past the fused backward;
- :mod:`.row_groups`: rows past it split over groups of resident programs (the default
  where the profile has its tile);
- :mod:`.column_sums`: the fixed-order column sum of partial rows (partial, columns,
  row groups);
- :mod:`.autograd`: differentiable wrappers for gradcheck.

The launchers are exported here, so implementations are named ``kernels.layer_norm:<name>``.
"""
from .autograd import LayerNormFunction, layer_norm_autograd, rms_norm_autograd
from .backward import (layer_norm_backward, layer_norm_backward_atomic,
                       layer_norm_backward_columns, layer_norm_backward_partial,
                       layer_norm_backward_row_groups, layer_norm_backward_tiled,
                       rms_norm_backward)
from .forward import (LayerNormOutput, layer_norm, layer_norm_forward,
                      layer_norm_forward_row_groups, layer_norm_residual_dropout, rms_norm)
from .tiles import DTYPES, MASK_DTYPES, STAT_DTYPES

__all__ = [
    "DTYPES", "STAT_DTYPES", "MASK_DTYPES", "LayerNormOutput", "LayerNormFunction",
    "layer_norm", "layer_norm_forward", "layer_norm_forward_row_groups",
    "layer_norm_residual_dropout", "rms_norm",
    "layer_norm_backward", "layer_norm_backward_atomic", "layer_norm_backward_partial",
    "layer_norm_backward_tiled", "layer_norm_backward_columns",
    "layer_norm_backward_row_groups", "rms_norm_backward",
    "layer_norm_autograd",
    "rms_norm_autograd",
]
