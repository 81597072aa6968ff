"""The precision a kernel computes in, as torch's CUDA kernels do (opmath_type in ATen's
OpMathType.h): float64 inputs in float64, every narrower float in float32."""
import triton
import triton.language as tl


@triton.jit
def to_compute(v, COMPUTE_FP64: tl.constexpr):
    """``v`` in float64 where the kernel computes in float64, else in float32."""
    return v.to(tl.float64) if COMPUTE_FP64 else v.to(tl.float32)
