"""Cross-compile captured launches for a profile's target, with no hardware.

The JIT's own binder (``create_function_from_signature``) turns the captured arguments into
the specialization a real launch would compile (integer 1 becomes constexpr, pointers and
ints divisible by 16 get ``tt.divisibility``), so the compiled kernel is the one the device
would run. Its resource use is read from the binary:

- CUDA: ``cuobjdump --dump-resource-usage`` on the cubin (REG, STACK, LOCAL; the tool ships
  inside the triton wheel); shared memory from Triton's metadata.
- HIP: the amdgcn assembly's metadata (VGPR/SGPR/AGPR counts, spills, ScratchSize and
  LLVM's occupancy); LDS from Triton's metadata (the assembly's LDS fields read 0 because
  Triton's LDS is dynamic).

Triton checks none of the limits at compile time (they fail at the first launch, or
never), so :func:`limit_violations` holds the kernel against the profile: threads per
block and shared memory over the limit are failures. Spills and occupancy under the
profile's ``compile.min_occupancy_waves`` are quality warnings
(:class:`CompileQualityWarning`).

Occupancy is resident waves (warps) per SIMD (warp scheduler): LLVM's number on HIP,
capped by what the LDS lets stay resident; on CUDA computed like NVIDIA's occupancy
calculator from registers, shared memory, warp and block slots.
"""
from __future__ import annotations

import contextlib
import copy
import fcntl
import hashlib
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import triton
from triton.compiler import ASTSource, make_backend
from triton.runtime.autotuner import Autotuner
from triton.runtime.jit import create_function_from_signature

from triton_cts import CHECKOUT
from triton_cts.execution import launches
from triton_cts.execution.launches import Launch
from triton_cts.profiles import Profile


class CompileQualityWarning(UserWarning):
    """A kernel compiles within the limits but spills or runs under the occupancy floor."""


def use_project_cache() -> str:
    """Compile into the checkout's ``.cache/triton`` unless ``TRITON_CACHE_DIR`` says
    otherwise, so reruns (and CI caches) hit the same folder. Returns the folder."""
    if not os.environ.get("TRITON_CACHE_DIR"):
        os.environ["TRITON_CACHE_DIR"] = str(CHECKOUT / ".cache" / "triton")
    return os.environ["TRITON_CACHE_DIR"]


@dataclass
class CompiledStats:
    kernel: str
    target: str
    config: str                      # the launch's meta-parameters, as a stable label
    num_warps: int
    num_stages: int
    threads_per_block: int
    shared_bytes: int                # shared memory / LDS per block
    registers: int                   # per thread: CUDA REG; HIP total VGPRs (arch + AGPR)
    spills: int                      # CUDA: stack bytes; HIP: spilled VGPRs + SGPRs
    scratch_bytes: int               # per-thread local memory / scratch
    occupancy: float                 # resident waves per SIMD: the minimum of the limiters
    occupancy_registers: float       # limited by registers (LLVM's number on HIP)
    occupancy_shared: float          # limited by shared memory / LDS
    sgprs: int | None = None         # HIP only
    agprs: int | None = None         # HIP only (CDNA accumulation registers)
    constexprs: dict[str, Any] = field(default_factory=dict)
    grid: tuple[int, int, int] = (1, 1, 1)
    violations: list[str] = field(default_factory=list)
    quality: list[str] = field(default_factory=list)
    ttir: str = field(default="", repr=False)   # for the IO lint

    def record(self, **extra) -> dict:
        """A JSON-able summary for ``record_property("compile_stats", ...)``."""
        out = {"kernel": self.kernel, "target": self.target, "config": self.config,
               "num_warps": self.num_warps, "num_stages": self.num_stages,
               "threads_per_block": self.threads_per_block, "shared": self.shared_bytes,
               "registers": self.registers, "spills": self.spills,
               "scratch": self.scratch_bytes, "occupancy": self.occupancy,
               "occupancy_registers": self.occupancy_registers,
               "occupancy_shared": self.occupancy_shared,
               "grid": list(self.grid), "violations": list(self.violations),
               "quality": list(self.quality)}
        if self.sgprs is not None:
            out.update(sgprs=self.sgprs, agprs=self.agprs)
        out.update(extra)
        return out


# --------------------------------------------------------------------------------------
# Compiling a captured launch
# --------------------------------------------------------------------------------------
def specialize(launch: Launch, target) -> tuple[ASTSource, dict]:
    """The source and options a real launch of ``launch`` would compile for ``target``."""
    fn = launch.kernel
    backend = make_backend(target)
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    kwargs = dict(launch.kwargs)
    bound, specialization, options = binder(*launch.args, **kwargs)
    options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound, specialization,
                                                          options)
    return ASTSource(fn, signature, constexprs, attrs), options.__dict__


def compile_launch(launch: Launch, profile: Profile) -> CompiledStats:
    fn = launch.kernel
    target = profile.gpu_target()
    src, options = specialize(launch, target)
    constexprs = src.constants
    compiled = _compile_once(src, target, options)
    md = compiled.metadata
    params = fn.params
    # Some backends clamp an over-large num_warps silently (gfx942 caps at 1024 threads):
    # judge what the launcher asked for, not what the compiler kept.
    num_warps = max(int(md.num_warps), int(launch.kwargs.get("num_warps", md.num_warps)))
    meta = {params[k[0]].name: v for k, v in constexprs.items()
            if len(k) == 1 and params[k[0]].is_constexpr}
    usage = _resource_usage(md.hash, profile.backend, compiled.asm)
    stats = CompiledStats(
        kernel=launch.name,
        target=f"{profile.backend}:{profile.arch}",
        config=config_label(meta, num_warps, int(md.num_stages), options.get("maxnreg")),
        num_warps=num_warps,
        num_stages=int(md.num_stages),
        threads_per_block=num_warps * profile.warp_size,
        shared_bytes=int(md.shared),
        constexprs=meta,
        grid=launch.grid,
        occupancy=0.0, occupancy_shared=0.0,
        ttir=compiled.asm["ttir"],
        **usage,
    )
    _fill_occupancy(stats, profile)
    stats.violations = limit_violations(stats, profile)
    stats.quality = quality_issues(stats, profile)
    return stats


def _compile_once(src: ASTSource, target, options: dict):
    """``triton.compile``, one process at a time per Triton cache key. Profiles that share a
    target and launch constants (nvidia-sm90 and nvidia-sm90-h200) produce the same
    kernels: an xdist worker that reaches one while another compiles it waits and then
    reads it from Triton's cache instead of compiling it a second time."""
    from triton._C.libtriton import get_cache_invalidating_env_vars
    from triton.runtime.cache import get_cache_key

    backend = make_backend(target)
    parsed = backend.parse_options(dict(options, **src.parse_options()))
    key = get_cache_key(src, backend, parsed, env_vars=get_cache_invalidating_env_vars())
    locks = Path(use_project_cache()) / "triton-cts-locks"
    locks.mkdir(parents=True, exist_ok=True)
    with open(locks / f"{hashlib.sha256(key.encode()).hexdigest()}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return triton.compile(src, target=target, options=options)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def config_label(meta: dict[str, Any], num_warps: int, num_stages: int,
                 maxnreg: int | None = None) -> str:
    """``BLOCK_SIZE=1024, num_warps=4, num_stages=3``: the meta-parameters in order, and
    the register cap where the launch set one (``maxnreg=32``)."""
    parts = [f"{k}={v}" for k, v in meta.items()]
    parts += [f"num_warps={num_warps}", f"num_stages={num_stages}"]
    return ", ".join(parts + ([f"maxnreg={maxnreg}"] if maxnreg else []))


_USAGE: dict[tuple[str, str], dict] = {}   # (kernel hash, backend) -> resource usage


def _resource_usage(kernel_hash: str, backend: str, asm: dict) -> dict:
    key = (kernel_hash, backend)
    if key not in _USAGE:
        _USAGE[key] = _cuda_usage(asm["cubin"]) if backend == "cuda" else _hip_usage(asm["amdgcn"])
    return dict(_USAGE[key])


def _cuda_usage(cubin: bytes) -> dict:
    tool = Path(triton.knobs.nvidia.cuobjdump.path)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        run = subprocess.run([str(tool), "--dump-resource-usage", str(path)],
                             capture_output=True, text=True, check=False)
    if run.returncode != 0:
        raise RuntimeError(f"{tool} --dump-resource-usage failed: {run.stderr.strip()}")
    m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:\d+ LOCAL:(\d+)", run.stdout)
    if m is None:
        raise RuntimeError(f"no resource usage in the output of {tool}: {run.stdout!r}")
    regs, stack, local = map(int, m.groups())
    return {"registers": regs, "spills": stack, "scratch_bytes": local + stack,
            "occupancy_registers": -1.0}


def _hip_usage(amdgcn: str) -> dict:
    def first(pattern: str) -> int:
        m = re.search(pattern, amdgcn, re.MULTILINE)
        if m is None:
            raise RuntimeError(f"no '{pattern}' in the amdgcn assembly")
        return int(m.group(1))

    vgprs = first(r"^\s*; NumVgprs:\s*(\d+)")
    total = re.search(r"^\s*; TotalNumVgprs:\s*(\d+)", amdgcn, re.MULTILINE)
    agprs = re.search(r"^\s*; NumAgprs:\s*(\d+)", amdgcn, re.MULTILINE)
    return {
        "registers": int(total.group(1)) if total else vgprs,
        "agprs": int(agprs.group(1)) if agprs else 0,
        "sgprs": first(r"^\s*\.sgpr_count:\s*(\d+)"),
        "spills": first(r"^\s*\.vgpr_spill_count:\s*(\d+)")
                  + first(r"^\s*\.sgpr_spill_count:\s*(\d+)"),
        "scratch_bytes": first(r"^\s*; ScratchSize:\s*(\d+)"),
        "occupancy_registers": float(first(r"^\s*; Occupancy:\s*(\d+)")),
    }


# --------------------------------------------------------------------------------------
# Occupancy and verdicts
# --------------------------------------------------------------------------------------
def _fill_occupancy(stats: CompiledStats, profile: Profile) -> None:
    comp = profile["compile"]
    simds, warps = comp["simds_per_cu"], max(stats.num_warps, 1)
    max_waves = comp["max_waves_per_simd"]
    slots = comp["max_blocks_per_cu"]
    blocks_by_warps = max_waves * simds // warps
    blocks_by_shared = (comp["shared_memory_per_cu"] // stats.shared_bytes
                        if stats.shared_bytes else slots)
    blocks = min(slots, blocks_by_warps, blocks_by_shared)
    stats.occupancy_shared = _waves(blocks, warps, simds, max_waves)
    if stats.occupancy_registers < 0:  # CUDA: registers by the occupancy calculator
        unit = comp.get("register_allocation_unit", 1)
        per_warp = -(-stats.registers * profile.warp_size // unit) * unit
        regs = profile["limits.registers_per_sm"]
        blocks_by_regs = (regs // per_warp // warps) if per_warp else slots
        stats.occupancy_registers = _waves(min(slots, blocks_by_warps, blocks_by_regs),
                                           warps, simds, max_waves)
    stats.occupancy = min(stats.occupancy_registers, stats.occupancy_shared)


def _waves(blocks: int, warps: int, simds: int, max_waves: int) -> float:
    return round(min(blocks * warps / simds, max_waves), 2)


def limit_violations(stats: CompiledStats, profile: Profile) -> list[str]:
    """What the compiled kernel asks for beyond the profile's limits (Triton checks none of
    these at compile time: they fail at the first launch, or never)."""
    out = []
    where = f"{stats.kernel} [{stats.config}]"
    max_threads = profile["limits.max_threads_per_block"]
    if stats.threads_per_block > max_threads:
        out.append(f"{where}: num_warps {stats.num_warps} x warp size {profile.warp_size} = "
                   f"{stats.threads_per_block} threads > limits.max_threads_per_block {max_threads}")
    max_shared = profile["limits.shared_memory_per_block"]
    if stats.shared_bytes > max_shared:
        out.append(f"{where}: {stats.shared_bytes} bytes of shared memory > "
                   f"limits.shared_memory_per_block {max_shared}")
    if stats.occupancy_registers == 0 and stats.threads_per_block <= max_threads:
        out.append(f"{where}: {stats.registers} registers per thread x {stats.threads_per_block} "
                   f"threads exceed limits.registers_per_sm {profile['limits.registers_per_sm']}")
    return out


def quality_issues(stats: CompiledStats, profile: Profile) -> list[str]:
    """Legal but slow: spills, scratch, occupancy under the profile's floor."""
    out = []
    where = f"{stats.kernel} [{stats.config}]"
    if stats.spills or stats.scratch_bytes:
        out.append(f"{where}: spills {stats.spills} ({'bytes of stack' if stats.sgprs is None else 'registers'}), "
                   f"scratch {stats.scratch_bytes} bytes per thread")
    floor = profile["compile.min_occupancy_waves"]
    if stats.occupancy < floor and not stats.violations:
        limiter = "registers" if stats.occupancy_registers <= stats.occupancy_shared else "shared memory"
        out.append(f"{where}: occupancy {stats.occupancy} waves per SIMD < "
                   f"compile.min_occupancy_waves {floor} (limited by {limiter}: "
                   f"{stats.registers} registers, {stats.shared_bytes} bytes shared)")
    return out


# --------------------------------------------------------------------------------------
# Autotuned kernels: every config is a kernel the device may run
# --------------------------------------------------------------------------------------
@contextlib.contextmanager
def every_autotune_config():
    """While launches are captured, an autotuned kernel launches each config its own
    ``early_config_prune`` keeps (the autotuner may pick any of them) instead of
    benchmarking; each captured launch carries the ``triton.Config`` as ``autotune_config``.
    Configs the launcher prunes can never run and are not compiled."""
    original = Autotuner.run

    def run(self, *args, **kwargs):
        if not launches.capturing():
            return original(self, *args, **kwargs)
        self.nargs = dict(zip(self.arg_names, args))
        configs = self.configs
        if self.early_config_prune:
            configs = self.early_config_prune(self.configs, self.nargs, **kwargs) or configs
        try:
            for config in configs:
                if config.pre_hook is not None:  # e.g. tensor descriptors' tile shapes
                    config.pre_hook({**self.nargs, **kwargs, **config.all_kwargs()})
                with launches.record_launches() as log:
                    self.fn.run(*args, **kwargs, **config.all_kwargs())
                for launch in log:
                    launch.autotune_config = config
                    # the next config's pre-hook changes these objects in place: keep
                    # this config's copy (tensors and scalars are not changed)
                    launch.args = tuple(_snapshot(a) for a in launch.args)
        finally:
            self.nargs = None

    Autotuner.run = run
    try:
        yield
    finally:
        Autotuner.run = original


def _snapshot(arg):
    """A shallow copy of a launch argument that is neither a tensor nor a scalar (a tensor
    descriptor, whose tile shape a config's pre-hook sets)."""
    if arg is None or isinstance(arg, (torch.Tensor, bool, int, float, str)):
        return arg
    return copy.copy(arg)


__all__ = ["CompiledStats", "CompileQualityWarning", "compile_launch", "limit_violations",
           "quality_issues", "every_autotune_config", "use_project_cache", "config_label"]
