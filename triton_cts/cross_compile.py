"""Cross-compile captured launches for a profile's target, with no hardware.

The JIT's own binder (``create_function_from_signature``) turns the captured arguments into
the specialization a real launch would compile (integer 1 becomes constexpr, pointers and
ints divisible by 16 get ``tt.divisibility``), so the compiled kernel is the one the device
would run. The result is held against the profile's limits.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import triton
from triton.compiler import ASTSource, make_backend
from triton.runtime.jit import create_function_from_signature

from triton_cts.launches import Launch
from triton_cts.profiles import Profile


@dataclass
class CompiledStats:
    kernel: str
    target: str
    num_warps: int
    threads_per_block: int
    shared_bytes: int
    constexprs: dict[str, Any]
    grid: tuple[int, int, int]
    violations: list[str] = field(default_factory=list)


def compile_launch(launch: Launch, profile: Profile) -> CompiledStats:
    fn = launch.kernel
    target = profile.gpu_target()
    backend = make_backend(target)
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    kwargs = dict(launch.kwargs)
    bound, specialization, options = binder(*launch.args, **kwargs)
    options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound, specialization,
                                                          options)
    compiled = triton.compile(ASTSource(fn, signature, constexprs, attrs), target=target,
                              options=options.__dict__)
    md = compiled.metadata
    names = [p.name for p in fn.params]
    # Some backends clamp an over-large num_warps silently (gfx942 caps at 1024 threads):
    # judge what the launcher asked for, not what the compiler kept.
    num_warps = max(int(md.num_warps), int(launch.kwargs.get("num_warps", md.num_warps)))
    stats = CompiledStats(
        kernel=launch.name,
        target=f"{profile.backend}:{profile.arch}",
        num_warps=num_warps,
        threads_per_block=num_warps * profile.warp_size,
        shared_bytes=int(md.shared),
        constexprs={names[k[0]]: v for k, v in constexprs.items() if len(k) == 1},
        grid=launch.grid,
    )
    stats.violations = limit_violations(stats, profile)
    return stats


def limit_violations(stats: CompiledStats, profile: Profile) -> list[str]:
    """What the compiled kernel asks for beyond the profile's limits (Triton checks none of
    these at compile time: they fail at the first launch, or never)."""
    out = []
    max_threads = profile["limits.max_threads_per_block"]
    if stats.threads_per_block > max_threads:
        out.append(f"{stats.kernel}: num_warps {stats.num_warps} x warp size {profile.warp_size} = "
                   f"{stats.threads_per_block} threads > limits.max_threads_per_block {max_threads}")
    max_shared = profile["limits.shared_memory_per_block"]
    if stats.shared_bytes > max_shared:
        out.append(f"{stats.kernel}: {stats.shared_bytes} bytes of shared memory > "
                   f"limits.shared_memory_per_block {max_shared}")
    return out
