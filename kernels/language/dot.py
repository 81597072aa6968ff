"""``tl.dot`` as a primitive: C = A @ B (+ ACC) for small 2-D tiles.

Each program computes one [BLOCK_M, BLOCK_N] tile of C and walks K in BLOCK_K steps, the
last one masked where K is ragged (EVEN_K false), so a dot over any K >= 1 is one
``tl.dot`` per step on zero-padded tiles. The accumulator starts at zero (``tl.dot(a, b)``
on the first step, then ``tl.dot(a, b, acc)``) or, with USE_ACC, at a loaded accumulator
(accumulation into an existing tensor).

What is varied is what the language lets a kernel choose: the input dtype (float16,
bfloat16, float32, int8, the profile's float8 formats), ``input_precision`` for float32
("ieee", "tf32", "tf32x3", each only where the profile's target runs it) and
``out_dtype`` (float32, int32 for int8, float16 for float16 inputs).

Tiles are the dims rounded up to a power of two, at least the smallest dot Triton's
backends accept (16 x 16 x 16; K at least 32 bytes deep for 8-bit inputs, NVIDIA's
``min_dot_size``) and at most the profile's smallest matmul tile. On select-load
profiles (SIMD NPUs) masked-off lanes would still be read, so offsets are clamped to the
last row / column and the tail is zeroed with a select instead.
"""
import torch
import triton
import triton.language as tl

from triton_cts.execution.input_checks import (ShapeMismatchError, UnsupportedDtypeError,
                                               check_inputs)
from triton_cts.profiles import Profile, cdiv, next_power_of_2

FLOAT8 = (torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz)
DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.int8) + FLOAT8
#: input_precision values of ``tl.dot`` for float32 inputs this module knows.
PRECISIONS = ("ieee", "tf32", "tf32x3")
#: Smallest tl.dot Triton lowers on every backend: M, N, K >= 16.
MIN_DOT = 16
#: 8-bit operands need K 32 deep on NVIDIA (backends/nvidia/compiler.py: min_dot_size).
MIN_K_BYTES = 32


@triton.jit
def _dot_kernel(
    A,                            # pointer to A [M, K]
    B,                            # pointer to B [K, N]
    ACC,                          # pointer to the accumulator [M, N] (read with USE_ACC)
    C,                            # pointer to C [M, N], dtype OUT_DTYPE
    M, N, K,                      # matrix sizes
    stride_am, stride_ak,         # elements between rows / columns of A
    stride_bk, stride_bn,         # elements between rows / columns of B
    stride_cm, stride_cn,         # elements between rows / columns of C and ACC
    INPUT_PRECISION: tl.constexpr,  # "ieee", "tf32" or "tf32x3"
    OUT_DTYPE: tl.constexpr,      # tl.dot's out_dtype (the accumulator's type)
    USE_ACC: tl.constexpr,        # start from ACC instead of zero
    SELECT_LOADS: tl.constexpr,   # masked-off lanes must read a valid address
    EVEN_K: tl.constexpr,         # K % BLOCK_K == 0: no mask along K
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    # a 1-D grid (SIMD NPUs flatten grids): tiles numbered row by row
    pid = tl.program_id(0)
    pid_m = pid // tl.cdiv(N, BLOCK_N)
    pid_n = pid % tl.cdiv(N, BLOCK_N)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    if SELECT_LOADS:
        # every lane reads a real element: ragged rows / columns repeat the last one
        offs_am = tl.minimum(offs_m, M - 1)
        offs_bn = tl.minimum(offs_n, N - 1)
    else:
        offs_am = offs_m
        offs_bn = offs_n
    a_ptrs = A + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = B + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    c_offs = offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    if USE_ACC:
        if SELECT_LOADS:
            acc = tl.load(ACC + offs_am[:, None] * stride_cm + offs_bn[None, :] * stride_cn)
        else:
            acc = tl.load(ACC + c_offs, mask=c_mask, other=0.0)
        acc = acc.to(OUT_DTYPE)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=OUT_DTYPE)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        if SELECT_LOADS:
            # the K tail re-reads the last column of A (row of B), then is zeroed
            k_back = tl.minimum(offs_k, k_left - 1) - offs_k
            a = tl.load(a_ptrs + k_back[None, :] * stride_ak)
            b = tl.load(b_ptrs + k_back[:, None] * stride_bk)
            a = tl.where(offs_k[None, :] < k_left, a, tl.zeros_like(a))
            b = tl.where(offs_k[:, None] < k_left, b, tl.zeros_like(b))
        elif EVEN_K:
            a = tl.load(a_ptrs, mask=offs_m[:, None] < M, other=0.0)
            b = tl.load(b_ptrs, mask=offs_n[None, :] < N, other=0.0)
        else:  # ragged K: the tail of the last step is zero in both operands
            a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
            b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION, out_dtype=OUT_DTYPE)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    tl.store(C + c_offs, acc.to(C.dtype.element_ty), mask=c_mask)


# --------------------------------------------------------------------------------------
# Launchers
# --------------------------------------------------------------------------------------
def accepted_precisions(profile: Profile) -> tuple[str, ...]:
    """The float32 input precisions the profile's target runs: "ieee" everywhere, "tf32"
    and its three-pass "tf32x3" where the profile says its tensor cores run tf32
    (``dtypes.tf32``)."""
    return PRECISIONS if profile["dtypes.tf32"] else ("ieee",)


def default_out_dtype(dtype: torch.dtype) -> torch.dtype:
    """What a dot of ``dtype`` inputs accumulates in unless told: int32 for int8, else
    float32."""
    return torch.int32 if dtype == torch.int8 else torch.float32


def _out_dtypes(dtype: torch.dtype) -> tuple[torch.dtype, ...]:
    """The out_dtype values tl.dot takes for ``dtype`` inputs."""
    if dtype == torch.int8:
        return (torch.int32,)
    if dtype == torch.float16:
        return (torch.float32, torch.float16)
    return (torch.float32,)


def _tile(profile: Profile, dim: int, floor: int, key: str) -> int:
    """A dim's tile: its power of two, at least ``floor``, at most the profile's smallest
    matmul tile along that axis (``[[autotune.matmul]]``; none: the floor)."""
    configs = profile.autotune_configs("matmul") or []
    cap = min((c[key] for c in configs), default=floor)
    return max(floor, min(next_power_of_2(max(dim, 1)), cap))


def _tl_dtype(dtype: torch.dtype):
    return {torch.float32: tl.float32, torch.float16: tl.float16, torch.int32: tl.int32}[dtype]


def dot(a: torch.Tensor, b: torch.Tensor, acc: torch.Tensor | None = None, *,
        input_precision: str = "ieee", out_dtype: torch.dtype | None = None,
        profile: Profile) -> torch.Tensor:
    """``acc + a @ b`` (``a @ b`` without ``acc``) for 2-D ``a`` (M x K) and ``b`` (K x N) of
    one dtype, computed by ``tl.dot`` with ``input_precision`` and ``out_dtype`` (default
    float32, int32 for int8); the result has dtype ``out_dtype``, or ``acc``'s."""
    check_inputs("tl_dot", profile, DTYPES, a=a, b=b)
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ShapeMismatchError(f"tl_dot: need a (M x K) and b (K x N), got a={tuple(a.shape)}, "
                                 f"b={tuple(b.shape)}")
    if a.dtype != b.dtype:
        raise UnsupportedDtypeError(f"tl_dot: a and b must have one dtype, got {a.dtype} and "
                                    f"{b.dtype}")
    name = str(a.dtype).removeprefix("torch.")
    if name not in profile["dtypes.dot"]:
        raise UnsupportedDtypeError(f"tl_dot: profile '{profile.name}' has no tl.dot for {name} "
                                    f"(dtypes.dot in {profile.source})")
    if input_precision not in PRECISIONS:
        raise ValueError(f"tl_dot: input_precision must be one of {PRECISIONS}, got "
                         f"'{input_precision}'")
    if input_precision != "ieee":
        if a.dtype != torch.float32:
            raise UnsupportedDtypeError(f"tl_dot: input_precision '{input_precision}' applies to "
                                        f"float32 inputs, not {name}")
        if input_precision not in accepted_precisions(profile):
            raise UnsupportedDtypeError(
                f"tl_dot: profile '{profile.name}' does not run input_precision "
                f"'{input_precision}' (dtypes.tf32 = false in {profile.source})")
    out_dtype = acc.dtype if acc is not None else (out_dtype or default_out_dtype(a.dtype))
    if out_dtype not in _out_dtypes(a.dtype):
        raise UnsupportedDtypeError(
            f"tl_dot: out_dtype {out_dtype} is not one tl.dot takes for {name} inputs "
            f"({', '.join(str(d).removeprefix('torch.') for d in _out_dtypes(a.dtype))})")
    M, K = a.shape
    N = b.shape[1]
    if acc is not None and tuple(acc.shape) != (M, N):
        raise ShapeMismatchError(f"tl_dot: acc must be {M} x {N}, got {tuple(acc.shape)}")
    c = torch.empty((M, N), dtype=out_dtype, device=a.device)
    if M == 0 or N == 0:
        return c
    block_k = _tile(profile, K, max(MIN_DOT, MIN_K_BYTES // a.element_size()), "BLOCK_SIZE_K")
    block_m = _tile(profile, M, MIN_DOT, "BLOCK_SIZE_M")
    block_n = _tile(profile, N, MIN_DOT, "BLOCK_SIZE_N")
    grid = (cdiv(M, block_m) * cdiv(N, block_n),)
    _dot_kernel[grid](
        a, b, acc if acc is not None else c, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        INPUT_PRECISION=input_precision, OUT_DTYPE=_tl_dtype(out_dtype),
        USE_ACC=acc is not None, SELECT_LOADS=profile.select_loads,
        EVEN_K=K % block_k == 0, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
        num_warps=profile["launch.default_num_warps"],
    )
    return c


def dot_tf32(a, b, *, profile: Profile) -> torch.Tensor:
    """``a @ b`` with ``input_precision="tf32"`` (float32 inputs)."""
    return dot(a, b, input_precision="tf32", profile=profile)


def dot_tf32x3(a, b, *, profile: Profile) -> torch.Tensor:
    """``a @ b`` with ``input_precision="tf32x3"`` (float32 inputs)."""
    return dot(a, b, input_precision="tf32x3", profile=profile)


def dot_acc(a, b, acc, *, profile: Profile) -> torch.Tensor:
    """``acc + a @ b``, accumulating in ``acc``'s dtype (``out_dtype``)."""
    return dot(a, b, acc, profile=profile)
