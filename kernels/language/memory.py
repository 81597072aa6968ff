"""Memory primitives: block pointers, tensor descriptors, ``other=`` on masked loads, and
cache and eviction hints.

- ``_block_ptr_kernel`` / ``_descriptor_kernel``: load a [BLOCK_M, BLOCK_N] block at
  (row0, col0) of an M x N matrix that may hang over its edges, once padded with zeros
  and once with NaN (``boundary_check`` and ``padding_option`` of a block pointer,
  ``padding_option`` of a tensor descriptor), and store twice the block back at the same
  place in an M x N output, where only the part inside the matrix may be written.
- ``_hinted_copy_kernel``: a masked load with ``other=`` and one cache / eviction hint
  (or ``volatile``), stored with a store hint: every hint must be accepted on every
  target and change nothing in the result.

Block pointers were removed from Triton 3.9 (``tl.make_block_ptr`` raises), and a tensor
descriptor needs 16-byte aligned rows; the launchers say so instead of launching.
"""
import torch
import triton
import triton.language as tl

from triton_cts.execution import devices
from triton_cts.execution.input_checks import (ShapeMismatchError, UnsupportedDtypeError,
                                               check_inputs)
from triton_cts.profiles import Profile, next_power_of_2

DTYPES = (torch.float16, torch.bfloat16, torch.float32)
HINT_DTYPES = (torch.float32, torch.int32)
#: (load cache_modifier, eviction_policy, store cache_modifier, volatile load): the
#: defaults, then each hint the language takes, one at a time.
HINTS = (("", "", "", False), (".ca", "", "", False), (".cg", "", "", False),
         (".cv", "", "", False), ("", "evict_first", "", False), ("", "evict_last", "", False),
         ("", "", ".wb", False), ("", "", ".cg", False), ("", "", ".cs", False),
         ("", "", ".wt", False), ("", "", "", True))
#: Tensor descriptors need the base and every stride but the last 16-byte aligned.
DESCRIPTOR_ALIGN = 16


@triton.jit
def _block_ptr_kernel(X, Y, ZERO, NAN, M, N, stride_xm, stride_ym, row0, col0,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    src = tl.make_block_ptr(X, (M, N), (stride_xm, 1), (row0, col0), (BLOCK_M, BLOCK_N), (1, 0))
    zero = tl.load(src, boundary_check=(0, 1), padding_option="zero")
    nan = tl.load(src, boundary_check=(0, 1), padding_option="nan")
    block = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    tl.store(ZERO + block, zero)
    tl.store(NAN + block, nan)
    dst = tl.make_block_ptr(Y, (M, N), (stride_ym, 1), (row0, col0), (BLOCK_M, BLOCK_N), (1, 0))
    tl.store(dst, zero * 2, boundary_check=(0, 1))


@triton.jit
def _descriptor_kernel(X, Y, ZERO, NAN, M, N, stride_xm, stride_ym, row0, col0,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    src_zero = tl.make_tensor_descriptor(X, [M, N], [stride_xm, 1], [BLOCK_M, BLOCK_N],
                                         padding_option="zero")
    src_nan = tl.make_tensor_descriptor(X, [M, N], [stride_xm, 1], [BLOCK_M, BLOCK_N],
                                        padding_option="nan")
    zero = src_zero.load([row0, col0])
    nan = src_nan.load([row0, col0])
    block = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    tl.store(ZERO + block, zero)
    tl.store(NAN + block, nan)
    dst = tl.make_tensor_descriptor(Y, [M, N], [stride_ym, 1], [BLOCK_M, BLOCK_N])
    dst.store([row0, col0], zero * 2)


@triton.jit
def _hinted_copy_kernel(X, Y, n, other,
                        LOAD_CACHE: tl.constexpr, EVICTION: tl.constexpr,
                        STORE_CACHE: tl.constexpr, VOLATILE: tl.constexpr,
                        BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n, other=other, cache_modifier=LOAD_CACHE,
                eviction_policy=EVICTION, volatile=VOLATILE)
    tl.store(Y + offs, x, cache_modifier=STORE_CACHE, eviction_policy=EVICTION)


# --------------------------------------------------------------------------------------
# Launchers
# --------------------------------------------------------------------------------------
class _Refuses:
    """A stand-in for Triton's semantic object: any use of it means the builtin went on
    to build IR, that is, it was not removed."""

    def __getattr__(self, name):
        raise LookupError(name)


def block_pointers_removed() -> str | None:
    """Why this Triton has no block pointers (its ``tl.make_block_ptr`` raises), or None."""
    try:
        tl.core.make_block_ptr.__wrapped__(None, None, None, None, None, None,
                                           _semantic=_Refuses())
    except NotImplementedError as exc:
        return f"tl.make_block_ptr in triton {triton.__version__}: {exc}"
    except Exception:  # noqa: BLE001 - it went on to use the semantic: present
        return None
    return None


def descriptors_missing(profile: Profile) -> str | None:
    """Why ``tl.make_tensor_descriptor`` cannot be checked for ``profile``, or None."""
    if not hasattr(tl, "make_tensor_descriptor"):
        return f"triton {triton.__version__} has no tl.make_tensor_descriptor"
    if profile.select_loads:
        # what the IO lint reports for the descriptor kernel's upstream TTIR
        return (f"profile '{profile.name}' reads every lane of a masked load (io.load = "
                f"'select'), and a descriptor's out-of-bounds padding lowers to masked loads "
                f"that read outside the tensor; the select-load toolchain the profile "
                f"describes (triton-ascend 3.2) has no tl.make_tensor_descriptor")
    return None


def _block_checks(op: str, x: torch.Tensor, row0: int, col0: int, block: tuple[int, int],
                  profile: Profile) -> None:
    check_inputs(op, profile, DTYPES, x=x)
    if x.dim() != 2 or x.stride(1) != 1:
        raise ShapeMismatchError(f"{op}: needs a 2-D tensor with unit column stride, got "
                                 f"shape {tuple(x.shape)} strides {x.stride()}")
    if row0 < 0 or col0 < 0:
        raise ShapeMismatchError(f"{op}: block offsets must be >= 0, got ({row0}, {col0})")
    for b in block:
        if b < 1 or b & (b - 1):
            raise ShapeMismatchError(f"{op}: block dims must be powers of two, got {block}")


def block_ptr(x: torch.Tensor, row0: int = 0, col0: int = 0, *, block=(16, 16),
              profile: Profile):
    """(zero-padded block, NaN-padded block, output): the [bm, bn] block of ``x`` at
    (row0, col0) loaded through ``tl.make_block_ptr`` with ``boundary_check=(0, 1)``, and
    an M x N output where twice the block was stored at the same place with
    ``boundary_check`` (elements outside the block stay as allocated)."""
    _block_checks("tl_block_ptr", x, row0, col0, block, profile)
    removed = block_pointers_removed()
    if removed:
        raise UnsupportedDtypeError(f"tl_block_ptr: {removed}")
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    zero = torch.empty(block, dtype=x.dtype, device=x.device)
    nan = torch.empty(block, dtype=x.dtype, device=x.device)
    M, N = x.shape
    if M == 0 or N == 0:
        return zero.zero_(), nan.fill_(float("nan")), y
    _block_ptr_kernel[(1,)](x, y, zero, nan, M, N, x.stride(0), y.stride(0), row0, col0,
                            BLOCK_M=block[0], BLOCK_N=block[1],
                            num_warps=profile.num_warps_for(block[0] * block[1], x.dtype))
    return zero, nan, y


def _aligned(t: torch.Tensor) -> torch.Tensor:
    """``t`` itself if a descriptor can address it, else a copy whose rows start on
    DESCRIPTOR_ALIGN bytes (a view into a wider buffer)."""
    per_row = max(1, DESCRIPTOR_ALIGN // t.element_size())
    if t.data_ptr() % DESCRIPTOR_ALIGN == 0 and t.stride(0) % per_row == 0:
        return t
    width = -(-t.shape[1] // per_row) * per_row
    wide = torch.zeros((t.shape[0], width), dtype=t.dtype, device=t.device)
    wide[:, :t.shape[1]] = t
    return wide[:, :t.shape[1]]


def _device_scratch(size: int, alignment: int, stream):
    """Global scratch a kernel that builds tensor descriptors needs on the accelerator."""
    return torch.empty(size, dtype=torch.int8, device=devices.device_type())


def tensor_descriptor(x: torch.Tensor, row0: int = 0, col0: int = 0, *, block=(16, 16),
                      profile: Profile):
    """As :func:`block_ptr`, through ``tl.make_tensor_descriptor`` (loads padded with
    zeros and with NaN; the store writes only inside the matrix)."""
    _block_checks("tl_tensor_descriptor", x, row0, col0, block, profile)
    missing = descriptors_missing(profile)
    if missing:
        raise UnsupportedDtypeError(f"tl_tensor_descriptor: {missing}")
    if block[1] * x.element_size() < DESCRIPTOR_ALIGN:
        raise ShapeMismatchError(f"tl_tensor_descriptor: a block row must span at least "
                                 f"{DESCRIPTOR_ALIGN} bytes, got {block}")
    if col0 * x.element_size() % DESCRIPTOR_ALIGN:
        raise ShapeMismatchError(f"tl_tensor_descriptor: a block's first column must start on "
                                 f"{DESCRIPTOR_ALIGN} bytes (Triton's interpreter asserts it), "
                                 f"got col0={col0} of {x.dtype}")
    M, N = x.shape
    src = _aligned(x)
    # the output: an aligned buffer (rows padded), poisoned like any other output
    per_row = max(1, DESCRIPTOR_ALIGN // x.element_size())
    wide = torch.empty((M, max(1, -(-N // per_row)) * per_row), dtype=x.dtype, device=x.device)
    y = wide[:, :N]
    zero = torch.empty(block, dtype=x.dtype, device=x.device)
    nan = torch.empty(block, dtype=x.dtype, device=x.device)
    if M == 0 or N == 0:
        return zero.zero_(), nan.fill_(float("nan")), y
    if x.device.type not in ("cpu", "meta"):  # compiled on an accelerator
        triton.set_allocator(_device_scratch)
    _descriptor_kernel[(1,)](src, y, zero, nan, M, N, src.stride(0), y.stride(0), row0, col0,
                             BLOCK_M=block[0], BLOCK_N=block[1],
                             num_warps=profile.num_warps_for(block[0] * block[1], x.dtype))
    return zero, nan, y


def hinted_loads(x: torch.Tensor, other: float = 0.0, *, profile: Profile) -> torch.Tensor:
    """[len(HINTS), BLOCK]: row h is 1-D ``x`` loaded with mask ``offs < n``,
    ``other=other`` and hint ``HINTS[h]``, then stored with its store hint; BLOCK is the
    next power of two above n, so at least one lane is masked off."""
    check_inputs("tl_load_hints", profile, HINT_DTYPES, x=x)
    if x.dim() != 1:
        raise ShapeMismatchError(f"tl_load_hints: needs a 1-D tensor, got {tuple(x.shape)}")
    n = x.numel()
    block = next_power_of_2(n + 1)
    if block > profile.elementwise_block(x.dtype):
        raise ShapeMismatchError(f"tl_load_hints: {n} elements do not fit one block of "
                                 f"profile '{profile.name}' ({profile.elementwise_block(x.dtype)})")
    out = torch.empty((len(HINTS), block), dtype=x.dtype, device=x.device)
    src = x.contiguous() if n else torch.zeros(1, dtype=x.dtype, device=x.device)
    for h, (load_cache, eviction, store_cache, volatile) in enumerate(HINTS):
        _hinted_copy_kernel[(1,)](src, out[h], n, other, LOAD_CACHE=load_cache,
                                  EVICTION=eviction, STORE_CACHE=store_cache,
                                  VOLATILE=volatile, BLOCK=block,
                                  num_warps=profile.num_warps_for(block, x.dtype))
    return out
