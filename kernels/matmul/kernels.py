"""The matmul kernels: the pointer kernel (any strides, any target), the persistent
tensor-descriptor kernel (TMA on Hopper) and the K-major copy some tf32 products take first.
What each does and when it runs: :mod:`kernels.matmul`."""
import triton
import triton.language as tl

from ..grid_stride import block_range

@triton.jit(do_not_specialize=["M_BUCKET", "N_BUCKET", "K_BUCKET", "K_CONTIGUOUS"])
def _matmul_kernel(
    A,                            # pointer to A [M, K]
    B,                            # pointer to B [K, N]
    C,                            # pointer to C [M, N]: A's dtype or float32
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
    ACCUMULATE: tl.constexpr = False,  # C += A @ B: C is read and added in float32
):
    pid = tl.program_id(0)  # tile numbers fit int32; element offsets are widened below
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    # The grid-stride loop only where the grid is capped (it cost up to 13%)
    # measured: benchmarks/results/h200.jsonl, experiment "comments"
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

        c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
        if ACCUMULATE:
            # the clamped rows and columns: a select-load target reads masked-off lanes
            acc += tl.load(C + offs_am[:, None].to(tl.int64) * stride_cm
                           + offs_bn[None, :] * stride_cn, mask=c_mask).to(tl.float32)
        c_ptrs = C + offs_m[:, None].to(tl.int64) * stride_cm + offs_n[None, :] * stride_cn
        tl.store(c_ptrs, acc.to(C.dtype.element_ty), mask=c_mask)


@triton.jit(do_not_specialize=["M_BUCKET", "N_BUCKET", "K_BUCKET"])
def _matmul_tma_kernel(
    A_DESC,                       # tensor descriptor of A [M, K], tiles [BLOCK_SIZE_M, BLOCK_SIZE_K],
                                  # or with A_M_MAJOR of A^T [K, M], tiles [BLOCK_SIZE_K, BLOCK_SIZE_M]
    B_DESC,                       # tensor descriptor of B [K, N], tiles [BLOCK_SIZE_K, BLOCK_SIZE_N],
                                  # or with B_K_MAJOR of B^T [N, K], tiles [BLOCK_SIZE_N, BLOCK_SIZE_K]
    C_OUT,                        # with C_STAGED: tensor descriptor of C [M, N], tiles
                                  # [BLOCK_SIZE_M, BLOCK_SIZE_N]; else a pointer to C, contiguous
    M, N, K,                      # matrix sizes
    M_BUCKET, N_BUCKET, K_BUCKET,  # next powers of two of M, N, K: the autotune key only
    A_M_MAJOR: tl.constexpr,      # A's M is contiguous (16-bit): its tiles are read transposed
    B_K_MAJOR: tl.constexpr,      # B's K is contiguous: its tiles are read transposed
    C_STAGED: tl.constexpr,       # C is stored through its descriptor, staged in shared memory
    ACCUMULATE: tl.constexpr,     # C += A @ B (C through pointers): C is read and added in float32
    INPUT_PRECISION: tl.constexpr,  # "tf32" for float32 dots; with the layouts, the autotune key
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
    so float32 stores C through pointers, masked, and so does a product added into C
    (ACCUMULATE). The transposed tiles of an M-major A or a K-major B are what the
    tensor cores' 16-bit dots read from shared memory as they are. With C_SPLIT = 2 a 16-bit C tile is
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
            if A_M_MAJOR:
                a = A_DESC.load([offs_k, offs_m]).T
            else:
                a = A_DESC.load([offs_m, offs_k])
            if B_K_MAJOR:
                b = B_DESC.load([offs_n, offs_k]).T
            else:
                b = B_DESC.load([offs_k, offs_n])
            acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
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
            halves = acc.reshape(BLOCK_SIZE_M, 2, BLOCK_SIZE_N // 2)
            left, right = halves.permute(0, 2, 1).split()
            cols = offs_n + tl.arange(0, BLOCK_SIZE_N // 2)
            mask = (rows[:, None] < M) & (cols[None, :] < N)
            if ACCUMULATE:
                left += tl.load(c_rows + cols[None, :], mask=mask).to(tl.float32)
            tl.store(c_rows + cols[None, :], left.to(C_OUT.dtype.element_ty), mask=mask)
            cols += BLOCK_SIZE_N // 2
            mask = (rows[:, None] < M) & (cols[None, :] < N)
            if ACCUMULATE:
                right += tl.load(c_rows + cols[None, :], mask=mask).to(tl.float32)
            tl.store(c_rows + cols[None, :], right.to(C_OUT.dtype.element_ty), mask=mask)


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
