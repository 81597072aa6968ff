"""GELU (tanh approximation)."""
import torch

from triton_cts.registry import OpSpec

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def reference(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x.double(), approximate="tanh")


GELU = OpSpec(
    name="gelu",
    description="GELU, tanh approximation, forward",
    reference=reference,
    reference_kernel="kernels.gelu:gelu",
    dtypes=FLOATS,
    make_args=lambda x, gen: ((x,), {}),
    min_ndim=0,
    max_ndim=4,
    compile_shapes=((4096,), (1024, 4096)),
)
