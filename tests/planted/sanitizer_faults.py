"""GELU launchers with memory-safety faults that give the right answer: the numerics
suite's comparison and the guard region behind each output cannot see them; only
``--sanitize`` (NVIDIA's compute-sanitizer) can. Each computes GELU like the reference
kernel and adds one fault:

- :func:`gelu_reads_past_input` (memcheck): one program too many, with an unmasked load,
  reads a block past the end of the input; its stores are masked.
- :func:`gelu_writes_far_past_output` (memcheck): stores the last element a second time
  2^24 elements further on, far past the end of the output and its guard.
- :func:`gelu_reads_uninitialized_workspace` (initcheck): reads a workspace it allocated
  with ``torch.empty_strided`` (not poisoned by the suites, never written) before
  writing it, and uses the value only when accumulating, which it never does.
- :func:`gelu_shared_memory_race` (racecheck): Triton places barriers around every
  shared-memory access it generates, so the race comes from inline PTX: every thread
  stores to the first word of the kernel's shared memory (``global_smem``, which holds
  the scratch of a cross-warp reduction) and loads it back, with no barrier between the
  warps.
"""
import torch
import triton
import triton.language as tl

from kernels.gelu import DTYPES
from triton_cts.execution.input_checks import check_inputs

#: How far past the end of the output :func:`gelu_writes_far_past_output` stores.
FAR = 1 << 24
#: Each thread stores its value to the first shared word and loads it back; between the
#: store of one warp and the load of another there is no barrier (a read-after-write
#: hazard between warps).
RACE_ASM = tl.constexpr("""{
.reg .u32 %smem_word;
mov.u32 %smem_word, global_smem;
st.shared.u32 [%smem_word], $1;
ld.shared.u32 $0, [%smem_word];
}""")


@triton.jit
def _gelu(x, COMPUTE_FP64: tl.constexpr):
    x = x.to(tl.float64) if COMPUTE_FP64 else x.to(tl.float32)
    u = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    return x / (1.0 + tl.exp(-2.0 * u))


@triton.jit
def _gelu_unmasked_load_kernel(X, Y, n, BLOCK: tl.constexpr, COMPUTE_FP64: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs)  # no mask
    tl.store(Y + offs, _gelu(x, COMPUTE_FP64).to(Y.dtype.element_ty), mask=offs < n)


@triton.jit
def _gelu_far_store_kernel(X, Y, n, BLOCK: tl.constexpr, COMPUTE_FP64: tl.constexpr,
                           FAR_OFFSET: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = _gelu(tl.load(X + offs, mask=mask, other=0.0), COMPUTE_FP64).to(Y.dtype.element_ty)
    tl.store(Y + offs, y, mask=mask)
    tl.store(Y + offs + FAR_OFFSET, y, mask=offs == n - 1)  # a wrong offset


@triton.jit(do_not_specialize=["ACCUMULATE"])
def _gelu_workspace_kernel(X, WS, Y, n, ACCUMULATE, BLOCK: tl.constexpr,
                           COMPUTE_FP64: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = _gelu(tl.load(X + offs, mask=mask, other=0.0), COMPUTE_FP64)
    prev = tl.load(WS + offs, mask=mask, other=0.0)  # read even when not accumulating
    acc = tl.where(ACCUMULATE != 0, prev + y, y)
    tl.store(WS + offs, acc, mask=mask)
    tl.store(Y + offs, acc.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _gelu_smem_race_kernel(X, Y, BLOCK_MAX, n, BLOCK: tl.constexpr,
                           COMPUTE_FP64: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = _gelu(tl.load(X + offs, mask=mask, other=0.0), COMPUTE_FP64)
    tl.store(Y + offs, y.to(Y.dtype.element_ty), mask=mask)
    # a per-block statistic: a reduction across warps, through shared memory
    tl.store(BLOCK_MAX + pid, tl.max(tl.where(mask, tl.abs(y.to(tl.float32)), 0.0), axis=0))
    tl.inline_asm_elementwise(RACE_ASM, "=r,r", [offs], dtype=tl.int32, is_pure=False, pack=1)


def _prepare(name, x, profile):
    check_inputs(name, profile, DTYPES, x=x)
    x = x.contiguous()
    return x, torch.empty_like(x), x.numel()


def _block(profile, x, n):
    return profile.elementwise_block(x.dtype, n)


def gelu_reads_past_input(x, *, profile):
    """GELU whose grid has one program too many and whose load is unmasked: the last
    programs read past the end of ``x``."""
    x, y, n = _prepare("gelu", x, profile)
    if n:
        block = _block(profile, x, n)
        _gelu_unmasked_load_kernel[(triton.cdiv(n, block) + 1,)](
            x, y, n, BLOCK=block, COMPUTE_FP64=x.dtype == torch.float64)
    return y


def gelu_writes_far_past_output(x, *, profile):
    """GELU that also stores its last element a second time, :data:`FAR` elements
    further on."""
    x, y, n = _prepare("gelu", x, profile)
    if n:
        block = _block(profile, x, n)
        _gelu_far_store_kernel[(triton.cdiv(n, block),)](
            x, y, n, BLOCK=block, COMPUTE_FP64=x.dtype == torch.float64, FAR_OFFSET=FAR)
    return y


def gelu_reads_uninitialized_workspace(x, *, profile):
    """GELU through a workspace that the kernel reads before it is ever written."""
    x, y, n = _prepare("gelu", x, profile)
    if n:
        acc = torch.float64 if x.dtype == torch.float64 else torch.float32
        workspace = torch.empty_strided((n,), (1,), dtype=acc, device=x.device)
        block = _block(profile, x, n)
        _gelu_workspace_kernel[(triton.cdiv(n, block),)](
            x, workspace, y, n, 0, BLOCK=block, COMPUTE_FP64=x.dtype == torch.float64)
    return y


def gelu_shared_memory_race(x, *, profile):
    """GELU that also records each block's max |y|, with inline PTX racing on the
    reduction's shared memory. Four warps per program, so the race is between warps."""
    x, y, n = _prepare("gelu", x, profile)
    if n:
        block = max(_block(profile, x, n), 128)
        block_max = torch.empty_strided((triton.cdiv(n, block),), (1,), dtype=torch.float32,
                                        device=x.device)
        _gelu_smem_race_kernel[(triton.cdiv(n, block),)](
            x, y, block_max, n, BLOCK=block, COMPUTE_FP64=x.dtype == torch.float64,
            num_warps=4)
    return y
