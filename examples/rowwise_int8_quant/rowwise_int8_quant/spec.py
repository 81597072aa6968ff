"""The op's description for triton-cts: its float64 reference, how to build its
arguments from a drawn input, its dtypes, its error model and the relation it satisfies.
Loaded by entry point (pyproject.toml, group ``triton_cts.ops``) or with
``pytest --op-module rowwise_int8_quant.spec``."""
import torch

from triton_cts.ops.spec import OpSpec

#: |frac(|x / scale|) - 1/2| below which float32 arithmetic may round either way: the
#: quotient's float32 rounding (127 * 2^-24 ~ 7.6e-6) and |v| + 0.5's, with room.
TIE_BAND = 1e-4


def _scaled(x):
    """x / scale in float64, with the float32 scale the op returns (0 for zero rows)."""
    x = x.double()
    amax = x.abs().amax(-1) if x.shape[-1] else x.new_zeros(x.shape[:-1])
    scale = (amax / 127).float().double()
    safe = torch.where(scale > 0, scale, 1.0)[..., None]
    return torch.where(scale[..., None] > 0, x / safe, 0.0), scale


def reference(x: torch.Tensor):
    v, scale = _scaled(x)
    q = torch.sign(v) * torch.floor(v.abs() + 0.5)
    return q, scale


def rounding_ties(x: torch.Tensor, dtype=None):
    """Where x / scale is within TIE_BAND of a half, a correct float32 kernel may round
    to either neighbour: q may be off by one there."""
    v, _ = _scaled(x)
    frac = v.abs() - torch.floor(v.abs())
    return (((frac - 0.5).abs() < TIE_BAND).double(), None)


def make_args(x: torch.Tensor, gen: torch.Generator):
    """The op takes finite inputs: inf and NaN of the drawn values become 0 (in place, so a
    strided input keeps its layout)."""
    x.masked_fill_(~torch.isfinite(x), 0.0)
    return (x,), {}


ROWWISE_INT8_QUANT = OpSpec(
    name="rowwise_int8_quant",
    description="row-wise int8 quantization with float32 per-row scales (absmax / 127)",
    reference=reference,
    reference_kernel="rowwise_int8_quant.kernel:quantize",
    dtypes=(torch.float16, torch.bfloat16, torch.float32),
    make_args=make_args,
    min_ndim=1,
    max_ndim=3,
    compile_shapes=((64, 4096), (7, 33)),
    conditioning=rounding_ties,
    # q(4x) == q(x): scaling by a power of two scales the scale exactly
    relations=("scale_invariance",),
    # one program per row, no atomics: the same input gives the same bits
    deterministic=("reference",),
)

OPS = (ROWWISE_INT8_QUANT,)
