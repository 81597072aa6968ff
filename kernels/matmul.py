"""Matrix multiplication C = A @ B for 2-D A (M x K) and B (K x N).

Each program computes [BLOCK_SIZE_M, BLOCK_SIZE_N] tiles of C, accumulating
[BLOCK_SIZE_K]-deep products in float32 with ``tl.dot``. Tiles are numbered in grouped
order: GROUP_SIZE_M rows of tiles are walked column by column, so programs running at the
same time share rows of A and columns of B in L2 instead of each streaming its own.

The grid is 1-D and capped at the profile's MAX_GRID_NUM; when there are more tiles than
that (and only then: GRID_STRIDE), each program walks tiles with a grid-stride loop, so
any matrix size launches within axis 0's limit.

Ragged edges (M, N, K not multiples of the block) are masked, K only where it is ragged
(EVEN_K); on select-load profiles (SIMD NPUs) masked-off lanes would still be read, so
offsets are clamped to the last row or column (those rows and columns are computed and
never stored) and the K tail is zeroed with a select instead. Strides are passed, so
transposed or sliced inputs work as they are.

Where the profile has ``[[autotune.matmul_tma]]`` configs (targets with tensor descriptors,
TMA on Hopper, where they were measured faster), 16-bit products larger than the
profile's ``launch.matmul_pointer_max_work`` (M*N*K: smaller ones launch faster through
pointers, Triton encoding host descriptors on every launch) whose matrices a
descriptor takes (unit column stride, 16-byte aligned base and rows) run a persistent
kernel instead: one program per compute unit walks the tiles in the same grouped order,
loading tiles through descriptors, which also bound the ragged edges; so do float32
products in tf32 on targets whose tf32 dots read K-major operands (below), B read
through a descriptor over B^T. Everything else (IEEE float32, strided views, other
targets) runs the pointer kernel above.

fp32 inputs use ``input_precision="tf32"`` only where the profile says the hardware runs
tf32 (``dtypes.tf32``), else "ieee". The output has the input dtype. Where the target's
tf32 dots read both operands K-major from shared memory (``dtypes.tf32_k_major``: Hopper's
wgmma), an operand that is not (a row-major B) is first copied K-major: otherwise every
tile of it is transposed into shared memory a 4-byte element at a time (sm_90 PTX:
``cp.async.ca`` of 4 bytes where K-major B gets 16-byte ``cp.async.cg``), and the product
ran at 46-147 TFLOP/s over 40 tiles, against up to 303 K-major, on an H100.

Block sizes, GROUP_SIZE_M, num_warps and num_stages come from the profile's
``[[autotune.matmul]]`` configs, autotuned once per power-of-two bucket of (M, N, K)
(the sizes rounded up): a config that wins at 3000 wins at 4096 as well, and a caller
whose sizes vary (the chunks of a fused linear cross-entropy, sequence lengths) would
otherwise tune every config again, and compile each for the new sizes, on every new
size. Only when a profile has none
does the launcher fall back to a small built-in list (sized to the profile's default
num_warps). Configs whose pipelined tiles cannot fit the profile's shared memory are
pruned before tuning, and so are IEEE float32 configs whose FMA accumulator would crowd a
thread's registers (``limits.registers_per_thread``). Without a device (interpreter, or
launches captured for cross-compilation) the autotuner's benchmark runs each config once
and times nothing. Once the autotuner has picked a config for a bucket, later calls
launch the pick directly (``fast_launch.tuned_launch``): the autotuner's and Triton's
per-call work cost more than a small product's kernel.
"""
import dataclasses
import functools

import torch
import triton
import triton.language as tl
from triton import knobs

from .fast_launch import PassedChecks, Replays, launch, launch_plan, signature, tuned_launch
from .grid_stride import block_range, launch_grid
from triton_cts.execution import launches
from triton_cts.execution.input_checks import (ShapeMismatchError, UnsupportedDtypeError,
                                               check_inputs)
from triton_cts.profiles import Profile, cdiv, next_power_of_2

DTYPES = (torch.float16, torch.bfloat16, torch.float32)

#: Keys of a config table that are launch options, not kernel meta-parameters.
_OPTION_KEYS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


@triton.jit(do_not_specialize=["M_BUCKET", "N_BUCKET", "K_BUCKET", "K_CONTIGUOUS"])
def _matmul_kernel(
    A,                            # pointer to A [M, K]
    B,                            # pointer to B [K, N]
    C,                            # pointer to C [M, N], same dtype as A
    M, N, K,                      # matrix sizes
    M_BUCKET, N_BUCKET, K_BUCKET,  # next powers of two of M, N, K: the autotune key only
    K_CONTIGUOUS,                 # 2 if A's K is contiguous, + 1 if B's: the autotune key only
    stride_am, stride_ak,         # elements between rows / columns of A
    stride_bk, stride_bn,         # elements between rows / columns of B
    stride_cm, stride_cn,         # elements between rows / columns of C
    INPUT_PRECISION: tl.constexpr,  # "tf32" or "ieee" for fp32 dots
    SELECT_LOADS: tl.constexpr,   # masked-off lanes must read a valid address
    BLOCK_SIZE_M: tl.constexpr,   # tile rows
    BLOCK_SIZE_N: tl.constexpr,   # tile columns
    BLOCK_SIZE_K: tl.constexpr,   # depth of one tl.dot step
    GROUP_SIZE_M: tl.constexpr,   # rows of tiles walked together (grouped ordering)
    GRID_STRIDE: tl.constexpr,    # fewer programs than tiles: each walks several
    EVEN_K: tl.constexpr,         # K % BLOCK_SIZE_K == 0: no mask along K
):
    pid = tl.program_id(0)  # tile numbers fit int32; element offsets are widened below
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    # The grid-stride loop only where the grid is capped: the persistent loop around the
    # pipelined K loop and masks along K together cost up to 13% a config on an H200
    # (bf16, 4096^3 and 8192^3)
    step, stop = block_range(pid, num_pid_m * num_pid_n, GRID_STRIDE)
    for tile in range(pid, stop, step):
        # grouped ordering: tile -> (pid_m, pid_n), column-major inside a group of rows
        group_id = tile // num_pid_in_group
        first_pid_m = group_id * GROUP_SIZE_M
        group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_SIZE_M)
        pid_m = first_pid_m + (tile % num_pid_in_group) % group_size_m
        pid_n = (tile % num_pid_in_group) // group_size_m

        offs_m = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
        offs_n = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
        offs_k = tl.arange(0, BLOCK_SIZE_K)
        if SELECT_LOADS:
            # every lane reads a real element: ragged rows/columns repeat the last one
            offs_am = tl.minimum(offs_m, M - 1)
            offs_bn = tl.minimum(offs_n, N - 1)
        else:
            # a tile starts at a multiple of its size and is contiguous: lets the
            # compiler vectorize the loads when A is column-major or B row-major
            offs_am = tl.max_contiguous(tl.multiple_of(offs_m, BLOCK_SIZE_M), BLOCK_SIZE_M)
            offs_bn = tl.max_contiguous(tl.multiple_of(offs_n, BLOCK_SIZE_N), BLOCK_SIZE_N)
        # int64 row offsets: a matrix past 2^31 elements is addressed exactly
        a_ptrs = A + offs_am[:, None].to(tl.int64) * stride_am + offs_k[None, :] * stride_ak
        b_ptrs = B + offs_k[:, None] * stride_bk + offs_bn[None, :].to(tl.int64) * stride_bn

        acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
            k_left = K - k * BLOCK_SIZE_K
            if SELECT_LOADS:
                # the K tail re-reads the last column (row of B), then is zeroed
                k_back = tl.minimum(offs_k, k_left - 1) - offs_k
                a = tl.load(a_ptrs + k_back[None, :] * stride_ak)
                b = tl.load(b_ptrs + k_back[:, None] * stride_bk)
                a = tl.where(offs_k[None, :] < k_left, a, 0.0)
                b = tl.where(offs_k[:, None] < k_left, b, 0.0)
            elif EVEN_K:  # masks only on the ragged M / N edges
                a = tl.load(a_ptrs, mask=offs_m[:, None] < M, other=0.0)
                b = tl.load(b_ptrs, mask=offs_n[None, :] < N, other=0.0)
            else:
                a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
                b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
            acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
            a_ptrs += BLOCK_SIZE_K * stride_ak
            b_ptrs += BLOCK_SIZE_K * stride_bk

        c_ptrs = C + offs_m[:, None].to(tl.int64) * stride_cm + offs_n[None, :] * stride_cn
        c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
        tl.store(c_ptrs, acc.to(C.dtype.element_ty), mask=c_mask)


@triton.jit(do_not_specialize=["M_BUCKET", "N_BUCKET", "K_BUCKET"])
def _matmul_tma_kernel(
    A_DESC,                       # tensor descriptor of A [M, K], tiles [BLOCK_SIZE_M, BLOCK_SIZE_K]
    B_DESC,                       # tensor descriptor of B [K, N], tiles [BLOCK_SIZE_K, BLOCK_SIZE_N],
                                  # or with B_K_MAJOR of B^T [N, K], tiles [BLOCK_SIZE_N, BLOCK_SIZE_K]
    C_OUT,                        # with C_STAGED: tensor descriptor of C [M, N], tiles
                                  # [BLOCK_SIZE_M, BLOCK_SIZE_N]; else a pointer to C, contiguous
    M, N, K,                      # matrix sizes
    M_BUCKET, N_BUCKET, K_BUCKET,  # next powers of two of M, N, K: the autotune key only
    B_K_MAJOR: tl.constexpr,      # B's K is contiguous: its tiles are read transposed
    C_STAGED: tl.constexpr,       # C is stored through its descriptor, staged in shared memory
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
    NUM_PROGRAMS: tl.constexpr,   # the persistent grid: one program per compute unit
    C_SPLIT: tl.constexpr = 1,    # with C_STAGED: the C tile is stored in this many column
                                  # pieces (1 or 2), each staged alone
    FLATTEN: tl.constexpr = 0,    # 1: the tile and K loops are pipelined as one loop
):
    """Persistent matmul on tensor descriptors (TMA on Hopper): NUM_PROGRAMS programs walk
    the tiles in grouped order, so the grid is launched once per compute unit and the
    next tile's loads start while the last tile's result is stored. The descriptors
    bound every load (and with C_STAGED the store): out-of-range rows, columns and the K
    tail read as zeros and are not written. A float32 C tile staged in shared memory
    would leave too little of it for the pipelined A and B tiles (128 x 256 x 4 bytes),
    so float32 stores C through pointers, masked. With C_SPLIT = 2 a 16-bit C tile is
    staged and stored a half at a time (half the shared memory, and the second half's
    conversion overlaps the first half's store); with FLATTEN the compiler pipelines the
    two loops as one, so the next tile's first loads are issued before this tile's store
    (``tl.range(flatten=True)``). The profile's configs say where either was measured
    faster."""
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    for tile in tl.range(pid, num_pid_m * num_pid_n, NUM_PROGRAMS, flatten=FLATTEN == 1):
        group_id = tile // num_pid_in_group
        first_pid_m = group_id * GROUP_SIZE_M
        group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_SIZE_M)
        pid_m = first_pid_m + (tile % num_pid_in_group) % group_size_m
        pid_n = (tile % num_pid_in_group) // group_size_m
        offs_m = pid_m * BLOCK_SIZE_M
        offs_n = pid_n * BLOCK_SIZE_N
        acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
            offs_k = k * BLOCK_SIZE_K
            if B_K_MAJOR:
                b = B_DESC.load([offs_n, offs_k]).T
            else:
                b = B_DESC.load([offs_k, offs_n])
            acc = tl.dot(A_DESC.load([offs_m, offs_k]), b, acc)
        if C_STAGED and C_SPLIT == 2:
            left, right = acc.reshape(BLOCK_SIZE_M, 2, BLOCK_SIZE_N // 2).permute(0, 2, 1).split()
            C_OUT.store([offs_m, offs_n], left.to(C_OUT.dtype))
            C_OUT.store([offs_m, offs_n + BLOCK_SIZE_N // 2], right.to(C_OUT.dtype))
        elif C_STAGED:
            C_OUT.store([offs_m, offs_n], acc.to(C_OUT.dtype))
        else:
            # two halves of the tile, each with its own pointers: the whole tile's held a
            # second 128 registers a thread next to the accumulator's
            rows = offs_m + tl.arange(0, BLOCK_SIZE_M)
            c_rows = C_OUT + rows[:, None].to(tl.int64) * N
            halves = acc.to(C_OUT.dtype.element_ty).reshape(BLOCK_SIZE_M, 2, BLOCK_SIZE_N // 2)
            left, right = halves.permute(0, 2, 1).split()
            cols = offs_n + tl.arange(0, BLOCK_SIZE_N // 2)
            tl.store(c_rows + cols[None, :], left, mask=(rows[:, None] < M) & (cols[None, :] < N))
            cols += BLOCK_SIZE_N // 2
            tl.store(c_rows + cols[None, :], right, mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def _contiguous_kernel(
    SRC,                          # pointer to a 2-D view [R, C], any strides
    DST,                          # pointer to its contiguous copy [R, C]
    R, C,                         # sizes
    stride_r, stride_c,           # elements between rows / columns of SRC
    BLOCK: tl.constexpr,          # tiles of BLOCK x BLOCK elements
    GRID_STRIDE: tl.constexpr,    # fewer programs than tiles: each walks several
):
    """DST = SRC, row-major. A transposed view (stride_r == 1, which Triton specializes)
    is read along its columns and written along its rows: the compiler moves each tile
    through shared memory between the two coalesced orders."""
    pid = tl.program_id(0)
    num_c = tl.cdiv(C, BLOCK)
    step, stop = block_range(pid, tl.cdiv(R, BLOCK) * num_c, GRID_STRIDE)
    for tile in range(pid, stop, step):
        rows = (tile // num_c) * BLOCK + tl.arange(0, BLOCK)
        cols = (tile % num_c) * BLOCK + tl.arange(0, BLOCK)
        mask = (rows[:, None] < R) & (cols[None, :] < C)
        rows = rows.to(tl.int64)  # a matrix past 2^31 elements is addressed exactly
        x = tl.load(SRC + rows[:, None] * stride_r + cols[None, :] * stride_c, mask=mask)
        tl.store(DST + rows[:, None] * C + cols[None, :], x, mask=mask)


# --------------------------------------------------------------------------------------
# Autotuning from the profile
# --------------------------------------------------------------------------------------
def _default_configs(profile: Profile) -> list[dict[str, int]]:
    """Fallback used ONLY when the profile has no [[autotune.matmul]] table: two modest
    tiles at the profile's default num_warps."""
    warps = profile["launch.default_num_warps"]
    return [
        {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8,
         "num_warps": warps, "num_stages": 2},
        {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8,
         "num_warps": warps, "num_stages": 2},
    ]


def _to_config(table: dict[str, int], pre_hook=None) -> triton.Config:
    table = dict(table)
    options = {k: table.pop(k) for k in _OPTION_KEYS if k in table}
    return triton.Config(table, **options, pre_hook=pre_hook)


#: An IEEE float32 dot has no tensor-core path: it is lowered to FMAs, and each thread
#: holds its share of the accumulator tile AND the A and B fragments it multiplies. A config
#: whose accumulator takes more than this share of a thread's registers spills: measured on
#: nvidia-sm90 (triton 3.9, 512 x 1024 x 4096), 64 accumulator registers a thread compiled
#: to 166-206 registers and no spill, 128 to 255 registers and 72-152 bytes of spills, at
#: 1.7-2.5x the compile time, and spilled FMA tiles never win the tuning.
FMA_ACCUMULATOR_SHARE = 3


def _fma_accumulator_registers(config, warp_size: int) -> int:
    kw = config.kwargs
    return kw["BLOCK_SIZE_M"] * kw["BLOCK_SIZE_N"] // (config.num_warps * warp_size)


def _prune(shared_bytes: int, registers_per_thread: int, warp_size: int, tma: bool = False):
    """Drop configs whose pipelined A and B tiles (num_stages copies; with tensor
    descriptors also the C tile the store is staged in) exceed shared memory, and, for
    IEEE float32 dots where the profile models registers, those whose FMA accumulator
    takes over 1 / FMA_ACCUMULATOR_SHARE of a thread's registers; keep the smallest one
    if none fits, so tuning always has a candidate."""
    def prune(configs, named_args, **kwargs):
        a = named_args["A_DESC"].base if tma else named_args["A"]
        elem = a.element_size()
        fma = (a.dtype == torch.float32 and kwargs.get("INPUT_PRECISION") == "ieee"
               and registers_per_thread > 0)

        def need(c):
            kw = c.kwargs
            tiles = (kw["BLOCK_SIZE_M"] + kw["BLOCK_SIZE_N"]) * kw["BLOCK_SIZE_K"] * elem
            staged_c = (kw["BLOCK_SIZE_M"] * kw["BLOCK_SIZE_N"] * elem // kw.get("C_SPLIT", 1)
                        if tma and named_args["C_STAGED"] else 0)
            return max(c.num_stages, 1) * tiles + staged_c

        def fits(c):
            if need(c) > shared_bytes:
                return False
            return not fma or (_fma_accumulator_registers(c, warp_size) * FMA_ACCUMULATOR_SHARE
                               <= registers_per_thread)
        fitting = [c for c in configs if fits(c)]
        return fitting or [min(configs, key=need)]
    return prune


def _tiles(meta) -> int:
    return (cdiv(meta["M"], meta["BLOCK_SIZE_M"])
            * cdiv(meta["N"], meta["BLOCK_SIZE_N"]))


#: (what an autotuner depends on, interpreted) -> the autotuner
_AUTOTUNED: dict = {}


def _autotuner(profile: Profile, tma: bool):
    """The autotuned pointer kernel (``tma``: the tensor-descriptor kernel) for
    ``profile``: a fresh one while launches are captured (every config is launched, and
    captured, for every shape), else one per config set and mode, so that interpreter
    picks never leak into device runs, looked up once per profile."""
    if launches.capturing():
        return (_tma_autotuner if tma else _pointer_autotuner)(profile)[1]()
    return _kept_autotuner(profile, tma, bool(knobs.runtime.interpret))


@launch_plan
def _kept_autotuner(profile: Profile, tma: bool, interpret: bool):
    key, make = (_tma_autotuner if tma else _pointer_autotuner)(profile)
    if (key, interpret) not in _AUTOTUNED:
        _AUTOTUNED[key, interpret] = make()
    return _AUTOTUNED[key, interpret]


def _pointer_autotuner(profile: Profile):
    """(what the pointer kernel's autotuner depends on, a function that makes it)"""
    tables = profile.autotune_configs("matmul") or _default_configs(profile)
    configs = [_to_config(t) for t in tables]
    shared = profile["limits.shared_memory_per_block"]
    registers = profile.registers_per_thread
    max_grid = profile.max_grid_num
    # per config: whether the tiles outnumber the capped grid, and whether K is ragged
    heuristics = {
        "GRID_STRIDE": lambda a: _tiles(a) > max_grid,
        "EVEN_K": lambda a: a["K"] % a["BLOCK_SIZE_K"] == 0,
    }
    make = lambda: triton.autotune(  # noqa: E731
        # the precision is part of the key: tf32 and IEEE float32 dots keep different configs
        # and so is the layout: a config tuned with row-major B can lose 3x on K-major B
        configs=configs, key=["M_BUCKET", "N_BUCKET", "K_BUCKET", "K_CONTIGUOUS",
                              "INPUT_PRECISION"],
        do_bench=launches.autotune_timer,
        prune_configs_by={"early_config_prune": _prune(shared, registers, profile.warp_size)},
    )(triton.heuristics(heuristics)(_matmul_kernel))
    return (tuple(tuple(sorted(t.items())) for t in tables), shared, registers, max_grid), make


#: Dtypes the tensor-descriptor kernel takes with B row-major: the 16-bit floats it was
#: measured with. float32 takes it only as tf32 with B K-major (:func:`_takes_tma`).
TMA_DTYPES = (torch.float16, torch.bfloat16)


def _set_tma_blocks(nargs) -> None:
    """Each config's pre-hook: the descriptors' tiles are the config's blocks (C's a
    C_SPLIT-th of the C tile)."""
    bm, bn, bk = nargs["BLOCK_SIZE_M"], nargs["BLOCK_SIZE_N"], nargs["BLOCK_SIZE_K"]
    nargs["A_DESC"].block_shape = [bm, bk]
    nargs["B_DESC"].block_shape = [bn, bk] if nargs["B_K_MAJOR"] else [bk, bn]
    if nargs["C_STAGED"]:
        nargs["C_OUT"].block_shape = [bm, bn // nargs.get("C_SPLIT", 1)]


def _tma_autotuner(profile: Profile):
    """(what the tensor-descriptor kernel's autotuner depends on, a function that makes it)"""
    tables = profile.autotune_configs("matmul_tma")
    configs = [_to_config(t, pre_hook=_set_tma_blocks) for t in tables]
    shared = profile["limits.shared_memory_per_block"]
    make = lambda: triton.autotune(  # noqa: E731
        # descriptors carry no dtype the autotuner would add to the key: C_STAGED (16-bit)
        # and B_K_MAJOR (float32's) keep the configs of 16-bit and float32 products apart
        configs=configs, key=["M_BUCKET", "N_BUCKET", "K_BUCKET", "B_K_MAJOR", "C_STAGED"],
        do_bench=launches.autotune_timer,
        prune_configs_by={"early_config_prune": _prune(shared, 0, profile.warp_size, tma=True)},
    )(_matmul_tma_kernel)
    return ("tma", tuple(tuple(sorted(t.items())) for t in tables), shared), make


def _takes_tma(a: torch.Tensor, b: torch.Tensor, profile: Profile, fp32_tf32: bool,
               any_size: bool = False) -> bool:
    """Whether the tensor-descriptor kernel runs this product: the profile has its configs
    (``autotune.matmul_tma``: the target has tensor descriptors and they were measured
    faster), the product is larger than ``launch.matmul_pointer_max_work`` (M*N*K; unless
    ``any_size``), and every matrix is what a descriptor takes (unit stride along its
    rows, 16-byte aligned base and row stride): 16-bit A, B and C row-major (C is allocated
    contiguous), or float32 as tf32 on a target whose tf32 dots read K-major operands,
    A row-major and B K-major (C is then stored through pointers)."""
    if not profile.has_autotune_configs("matmul_tma"):
        return False
    if not any_size and a.shape[0] * a.shape[1] * b.shape[1] <= profile.matmul_pointer_max_work:
        return False
    elem = a.element_size()

    def described(t):
        return t.stride(1) == 1 and t.stride(0) * elem % 16 == 0 and t.data_ptr() % 16 == 0
    if a.dtype in TMA_DTYPES:
        return b.shape[1] * elem % 16 == 0 and described(a) and described(b)
    return fp32_tf32 and profile.tf32_k_major and described(a) and described(b.t())


def _descriptor(t: torch.Tensor):
    """A host tensor descriptor of the 2-D ``t``, with placeholder tiles (each config's
    pre-hook sets its own), made without the constructor's checks: :func:`_takes_tma`
    made them (unit last stride, 16-byte aligned base and rows) and the sizes are
    positive; they cost more than the rest of a small product's launch."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    desc = object.__new__(TensorDescriptor)
    desc.__dict__.update(_field_defaults(TensorDescriptor), base=t, shape=t.shape,
                         strides=t.stride(), block_shape=[16, 16])
    return desc


@functools.cache
def _field_defaults(cls) -> dict:
    """The default values of a dataclass's fields (Triton versions add descriptor fields)."""
    return {f.name: f.default for f in dataclasses.fields(cls)
            if f.default is not dataclasses.MISSING}


def _matmul_tma(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, profile: Profile) -> None:
    M, K = a.shape
    N = b.shape[1]
    k_major = a.dtype == torch.float32  # tf32, B K-major (_takes_tma)
    a_desc = _descriptor(a)
    b_desc = _descriptor(b.t() if k_major else b)
    c_out = c if k_major else _descriptor(c)
    programs = min(profile.compute_units, profile.max_grid_num)
    grid = lambda META: (min(programs, _tiles(META)),)  # noqa: E731
    buckets = (next_power_of_2(M), next_power_of_2(N), next_power_of_2(K))
    # B_K_MAJOR and C_STAGED positional: the configs' pre-hook and pruning read them
    tuned_launch(_autotuner(profile, tma=True), grid,
                 (a_desc, b_desc, c_out, M, N, K, *buckets, k_major, not k_major),
                 {"NUM_PROGRAMS": programs}, (*buckets, k_major))


def _contiguous(x: torch.Tensor, profile: Profile, out: torch.Tensor | None = None) -> torch.Tensor:
    """A contiguous copy of the 2-D view ``x`` (into ``out`` where given), by
    :func:`_contiguous_kernel` with square tiles of the profile's elementwise block."""
    if out is None:
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    side = 1 << (profile.elementwise_block(x.dtype).bit_length() - 1) // 2
    grid, grid_stride = launch_grid(profile, cdiv(x.shape[0], side) * cdiv(x.shape[1], side))
    launch(_contiguous_kernel, grid, x, out, *x.shape, *x.stride(), BLOCK=side,
           GRID_STRIDE=grid_stride, num_warps=profile.num_warps_for(side * side))
    return out


#: Inputs (signature and input_precision) that passed :func:`_check`, per profile
_CHECKS = PassedChecks()
#: The launches of calls on inputs of one layout, replayed (small products' Python)
_REPLAYS = Replays()


def _check(a: torch.Tensor, b: torch.Tensor, input_precision, profile: Profile) -> None:
    """What :func:`matmul` takes: the errors name the problem."""
    check_inputs("matmul", profile, DTYPES, a=a, b=b)
    if input_precision not in (None, "ieee", "tf32"):
        raise ValueError(f"matmul: input_precision must be None, 'ieee' or 'tf32', got "
                         f"{input_precision!r}")
    if input_precision == "tf32" and not profile["dtypes.tf32"]:
        raise UnsupportedDtypeError(f"matmul: profile '{profile.name}' runs no tf32 dots "
                                    f"(dtypes.tf32 in {profile.source})")
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ShapeMismatchError(f"matmul: need a (M x K) and b (K x N), got a={tuple(a.shape)}, "
                                 f"b={tuple(b.shape)}")
    if a.dtype != b.dtype:
        raise UnsupportedDtypeError(f"matmul: a and b must have one dtype, got {a.dtype} and {b.dtype}")
    if str(a.dtype).removeprefix("torch.") not in profile["dtypes.dot"]:
        raise UnsupportedDtypeError(f"matmul: profile '{profile.name}' has no tl.dot for {a.dtype} "
                                    f"(dtypes.dot in {profile.source})")


def matmul(a: torch.Tensor, b: torch.Tensor, *, profile: Profile,
           input_precision: str | None = None) -> torch.Tensor:
    """``a @ b`` for 2-D ``a`` (M x K) and ``b`` (K x N) of one dtype; returns M x N.
    ``input_precision`` of float32 dots: "tf32" or "ieee"; None: tf32 where the profile's
    tensor cores run it (``dtypes.tf32``), else ieee."""
    return _matmul(a, b, profile, input_precision, any_size=False)


def matmul_tma(a: torch.Tensor, b: torch.Tensor, *, profile: Profile,
               input_precision: str | None = None) -> torch.Tensor:
    """:func:`matmul` with the tensor-descriptor kernel at every size where the matrices
    allow it, small products included (:func:`matmul` runs those up to
    ``launch.matmul_pointer_max_work`` on the pointer kernel, whose launch costs less): the
    variant through which the suites, which draw small products, check that kernel. A
    profile without ``[[autotune.matmul_tma]]`` configs declines it."""
    if not profile.has_autotune_configs("matmul_tma"):
        raise UnsupportedDtypeError(f"matmul_tma: profile '{profile.name}' has no "
                                    f"tensor-descriptor matmul ([[autotune.matmul_tma]] in "
                                    f"{profile.source})")
    return _matmul(a, b, profile, input_precision, any_size=True)


def _matmul(a: torch.Tensor, b: torch.Tensor, profile: Profile, input_precision,
            any_size: bool) -> torch.Tensor:
    try:
        # what the launches depend on besides the profile (the replay key, see Replays)
        key = (input_precision, any_size, a.shape, b.shape, a.stride(), b.stride(), a.dtype,
               b.dtype, a.device, b.device)
        c = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
        a_op, b_op, copies = _k_major_operands(a, b, profile, input_precision)
    except (AttributeError, IndexError, TypeError):
        key, tensors = None, ()  # not 2-D tensors: the checks say what is wrong
    else:
        # a_op and b_op are a and b where no copy is made: only the tensors made here
        # are added, so that a tensor in two places means a is b (see Replays)
        tensors = (a, b, c, *[t for t in (a_op, b_op, *[t for pair in copies for t in pair])
                              if t is not a and t is not b])
        if _REPLAYS.replay(profile, key, tensors):
            return c
    _CHECKS.checked(profile, (input_precision, signature(a, b)), a, _check, a, b,
                    input_precision, profile)
    M, K = a.shape
    N = b.shape[1]
    if M == 0 or N == 0:
        return c
    if K == 0:
        return c.zero_()
    with _REPLAYS.record(profile, key, tensors):
        _launch_matmul(a_op, b_op, c, copies, profile, input_precision, any_size)
    return c


def _tf32(a: torch.Tensor, profile: Profile, input_precision) -> bool:
    """Whether a float32 product runs as tf32 (None: where the profile's tensor cores do)."""
    if a.dtype != torch.float32:
        return False
    return input_precision == "tf32" or (input_precision is None and bool(profile["dtypes.tf32"]))


def _k_major_operands(a: torch.Tensor, b: torch.Tensor, profile: Profile, input_precision):
    """(A and B as the kernel takes them, the (source, destination) pairs of the K-major
    copies that make them): the target's tf32 dots read both operands K-major from shared
    memory; one that is not gets its copy there transposed a 4-byte element at a time, in
    every tile, for the whole product: a K-major copy first costs one pass over it. The
    buffers and views are made before the launches, so that a replayed call has its own."""
    if not (_tf32(a, profile, input_precision) and profile.tf32_k_major):
        return a, b, ()
    copies = []
    if a.stride(1) != 1:
        copies.append((a, torch.empty(a.shape, dtype=a.dtype, device=a.device)))
        a = copies[-1][1]
    if b.stride(0) != 1:
        copies.append((b.t(), torch.empty(b.shape[::-1], dtype=b.dtype, device=b.device)))
        b = copies[-1][1].t()
    return a, b, tuple(copies)


def _launch_matmul(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, copies: tuple,
                   profile: Profile, input_precision, any_size: bool) -> None:
    M, K = a.shape
    N = b.shape[1]
    fp32_tf32 = _tf32(a, profile, input_precision)
    for source, destination in copies:
        _contiguous(source, profile, destination)
    if _takes_tma(a, b, profile, fp32_tf32, any_size):
        _matmul_tma(a, b, c, profile)
        return
    grid = lambda META: (profile.capped_grid(_tiles(META)),)  # noqa: E731
    buckets = (next_power_of_2(M), next_power_of_2(N), next_power_of_2(K))
    k_contiguous = 2 * (a.stride(1) == 1) + (b.stride(0) == 1)
    precision = "tf32" if fp32_tf32 else "ieee"
    tuned_launch(_autotuner(profile, tma=False), grid,
                 (a, b, c, M, N, K, *buckets, k_contiguous,
                  a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1)),
                 {"INPUT_PRECISION": precision, "SELECT_LOADS": profile.select_loads},
                 (*buckets, k_contiguous, precision, a.dtype))
