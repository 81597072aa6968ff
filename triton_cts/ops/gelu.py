"""GELU (tanh approximation)."""
import torch

from triton_cts.ops.spec import OpSpec, randn

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
# last: a size 16 does not divide, so the kernels' tail (TAIL) compiles too
COMPILE_SHAPES = ((4096,), (1024, 4096), (11, 2999))


def reference(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x.double(), approximate="tanh")


def reference_backward(dy: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    x = x.double().requires_grad_()
    with torch.enable_grad():
        y = torch.nn.functional.gelu(x, approximate="tanh")
        (dx,) = torch.autograd.grad(y, x, dy.double())
    return dx


GELU = OpSpec(
    name="gelu",
    description="GELU, tanh approximation, forward",
    reference=reference,
    reference_kernel="kernels.gelu:gelu",
    autograd="kernels.gelu:gelu_autograd",
    dtypes=FLOATS,
    make_args=lambda x, gen: ((x,), {}),
    min_ndim=0,
    max_ndim=4,
    compile_shapes=COMPILE_SHAPES,
)

GELU_BACKWARD = OpSpec(
    name="gelu_backward",
    description="GELU, tanh approximation, gradient with respect to the input",
    reference=reference_backward,
    reference_kernel="kernels.gelu:gelu_backward",
    dtypes=FLOATS,
    make_args=lambda x, gen: ((randn(x.shape, gen, x.dtype, x.device, drawn_in=torch.float32),
                               x), {}),
    min_ndim=0,
    max_ndim=4,
    compile_shapes=COMPILE_SHAPES,
)

OPS = (GELU, GELU_BACKWARD)
