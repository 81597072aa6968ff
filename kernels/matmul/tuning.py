"""The matmul's configs and autotuners, from the profile's ``[[autotune.matmul]]`` and
``[[autotune.matmul_tma]]`` tables: pruned to what fits shared memory and registers, and
kept one per config set and mode (see :mod:`kernels.matmul`); and the family's tuning
(``[tuning.matmul]``, declared here)."""
import torch
import triton
from triton import knobs

from ..fast_launch import launch_plan
from .kernels import _matmul_kernel, _matmul_tma_kernel
from triton_cts.execution import launches
from triton_cts.profiles import Profile, cdiv
from triton_cts.profiles.fields import count
from triton_cts.profiles.plausible import Range
from triton_cts.profiles.tuning import declare_tuning

FAMILY = "matmul"
TUNING = declare_tuning(FAMILY, {
    "added_c_tiles": count(
        "float32 C tiles [BLOCK_SIZE_M, BLOCK_SIZE_N] the epilogue of a matmul added into "
        "its output holds on chip at once (the pruner's bound); 1 where absent",
        plausible=Range(1, 16, "float32 C tiles an added-into product's epilogue holds: 1 on "
                               "GPUs, 4 on the Ascend NPU"), default=1, unit="tiles"),
    "pointer_max_work": count(
        "M*N*K up to which matmul runs its pointer kernel where the profile also has "
        "[[autotune.matmul_tma]] configs; every size takes those where absent",
        plausible=Range(1, 2**63 - 1, "M*N*K of a product: 512^3 on the Hopper profiles"),
        default=0, default_text="0 (every size the descriptors take runs that kernel)",
        unit="multiply-adds"),
})


def added_c_tiles(profile: Profile) -> int:
    """Float32 C tiles the epilogue of a matmul added into its output holds on chip at
    once, besides the pipelined A and B tiles (1 where absent: the tile crossing shared
    memory to the accumulator's layout)."""
    return profile.tuning(FAMILY)["added_c_tiles"]


def pointer_max_work(profile: Profile) -> int:
    """M*N*K up to which matmul runs its pointer kernel on a target that also has its
    tensor-descriptor kernel (0 where absent: every size the descriptors take runs it)."""
    return profile.tuning(FAMILY)["pointer_max_work"]

#: Keys of a config table that are launch options, not kernel meta-parameters.
_OPTION_KEYS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


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


def _prune(shared_bytes: int, registers_per_thread: int, warp_size: int, tma: bool = False,
           added_c_tiles: int = 1):
    """Drop configs whose pipelined A and B tiles (num_stages copies; with tensor
    descriptors also the C tile the store is staged in), or the ``added_c_tiles`` float32
    C tiles of an added-into product's epilogue (``tuning.matmul.added_c_tiles``; on GPUs
    the C tile read crosses shared memory to the accumulator's layout once the pipeline's
    buffers are free: amd-gfx942 cross-compiles used exactly BLOCK_SIZE_M x BLOCK_SIZE_N x
    4 bytes, 131072 at 128 x 256 against its 65536 of LDS), exceed shared memory, and, for
    IEEE float32 dots where the profile models registers, those whose FMA accumulator
    takes over 1 / FMA_ACCUMULATOR_SHARE of a thread's registers; keep the smallest one if
    none fits, so tuning always has a candidate."""
    def prune(configs, named_args, **kwargs):
        a = named_args["A_DESC"].base if tma else named_args["A"]
        elem = a.element_size()
        fma = (a.dtype == torch.float32 and kwargs.get("INPUT_PRECISION") == "ieee"
               and registers_per_thread > 0)
        added = {**named_args, **kwargs}.get("ACCUMULATE", False)

        def need(c):
            kw = c.kwargs
            tiles = (kw["BLOCK_SIZE_M"] + kw["BLOCK_SIZE_N"]) * kw["BLOCK_SIZE_K"] * elem
            staged_c = (kw["BLOCK_SIZE_M"] * kw["BLOCK_SIZE_N"] * elem // kw.get("C_SPLIT", 1)
                        if tma and named_args["C_STAGED"] else 0)
            epilogue = (added_c_tiles * kw["BLOCK_SIZE_M"] * kw["BLOCK_SIZE_N"] * 4
                        if added else 0)
            return max(max(c.num_stages, 1) * tiles + staged_c, epilogue)

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


def _autotuner(profile: Profile, tma: bool, accumulate: bool = False):
    """The autotuned pointer kernel (``tma``: the tensor-descriptor kernel; ``accumulate``:
    the one that adds into C) for ``profile``: a fresh one while launches are captured
    (every config is launched, and captured, for every shape), else one per config set
    and mode, so that interpreter picks never leak into device runs, looked up once per
    profile."""
    if launches.capturing():
        return (_tma_autotuner if tma else _pointer_autotuner)(profile, accumulate)[1]()
    return _kept_autotuner(profile, tma, accumulate, bool(knobs.runtime.interpret))


@launch_plan
def _kept_autotuner(profile: Profile, tma: bool, accumulate: bool, interpret: bool):
    key, make = (_tma_autotuner if tma else _pointer_autotuner)(profile, accumulate)
    if (key, interpret) not in _AUTOTUNED:
        _AUTOTUNED[key, interpret] = make()
    return _AUTOTUNED[key, interpret]


def _restored(accumulate: bool, c: str) -> list[str] | None:
    """What the autotuner restores after timing each config: C where the product is added
    into it (else every timed run would add once more)."""
    return [c] if accumulate else None


def _pointer_autotuner(profile: Profile, accumulate: bool):
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
        do_bench=launches.autotune_timer, restore_value=_restored(accumulate, "C"),
        prune_configs_by={"early_config_prune": _prune(shared, registers, profile.warp_size,
                                                       added_c_tiles=added_c_tiles(profile))},
    )(triton.heuristics(heuristics)(_matmul_kernel))
    return (tuple(tuple(sorted(t.items())) for t in tables), shared, registers, max_grid,
            added_c_tiles(profile), accumulate), make


#: Dtypes the tensor-descriptor kernel takes in any layout: the 16-bit floats it was
#: measured with. float32 takes it only as tf32, A row-major and B K-major
#: (:func:`kernels.matmul._tma_layout`).
TMA_DTYPES = (torch.float16, torch.bfloat16)


def _set_tma_blocks(nargs) -> None:
    """Each config's pre-hook: the descriptors' tiles are the config's blocks (C's a
    C_SPLIT-th of the C tile)."""
    bm, bn, bk = nargs["BLOCK_SIZE_M"], nargs["BLOCK_SIZE_N"], nargs["BLOCK_SIZE_K"]
    nargs["A_DESC"].block_shape = [bk, bm] if nargs["A_M_MAJOR"] else [bm, bk]
    nargs["B_DESC"].block_shape = [bn, bk] if nargs["B_K_MAJOR"] else [bk, bn]
    if nargs["C_STAGED"]:
        nargs["C_OUT"].block_shape = [bm, bn // nargs.get("C_SPLIT", 1)]


def _tma_autotuner(profile: Profile, accumulate: bool):
    """(what the tensor-descriptor kernel's autotuner depends on, a function that makes it)"""
    tables = profile.autotune_configs("matmul_tma")
    configs = [_to_config(t, pre_hook=_set_tma_blocks) for t in tables]
    shared = profile["limits.shared_memory_per_block"]
    make = lambda: triton.autotune(  # noqa: E731
        # descriptors carry no dtype the autotuner would add to the key: INPUT_PRECISION
        # keeps the configs of 16-bit and tf32 products apart, the layouts those of each
        # way the tiles are read and stored (C through pointers is a tensor: its dtype is
        # in the key)
        configs=configs, key=["M_BUCKET", "N_BUCKET", "K_BUCKET", "A_M_MAJOR", "B_K_MAJOR",
                              "C_STAGED", "INPUT_PRECISION"],
        do_bench=launches.autotune_timer, restore_value=_restored(accumulate, "C_OUT"),
        prune_configs_by={"early_config_prune": _prune(shared, 0, profile.warp_size, tma=True)},
    )(_matmul_tma_kernel)
    return ("tma", tuple(tuple(sorted(t.items())) for t in tables), shared, accumulate), make
