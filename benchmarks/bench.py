"""What one benchmark case is (:class:`Bench`) and how an op's cases are declared
(:class:`BenchSpec`): its shapes, the bytes or FLOPs that define its floor, and the
function that builds its tensors and calls. The table of every op's spec is
``benchmarks.cases.BENCHES``; the builders live in ``cases``, ``llm_cases`` and
``attention_cases``, which import this module and nothing else of the benchmarks."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Callable

import torch


@dataclass(frozen=True)
class Bench:
    op: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    ours: Callable[[], object]
    torch_eager: Callable[[], object]
    bytes: int = 0     # memory-bound: bytes of one read of inputs + one write of outputs
    flops: int = 0     # compute-bound: floating-point operations
    args: tuple = ()   # the op's arguments, as its OpSpec.make_args builds them
    kwargs: dict = field(default_factory=dict)  # and its keyword options
    precision: str = ""  # float32 dots: "tf32" or "ieee" (its % of peak is of that peak)

    @property
    def cell(self) -> dict:
        """The bench's op, dtype and shape as every results file writes them (the key
        ``python -m benchmarks.goals`` matches goals on)."""
        return {"op": self.op, "dtype": str(self.dtype).removeprefix("torch."),
                "shape": "x".join(map(str, self.shape))}


#: How the sweep may resize an op: MxN rows (``--shape``), N x N x N (``--size``).
SWEEP_KINDS = ("rows", "sizes")


@dataclass(frozen=True)
class BenchSpec:
    """The benchmark of one op. ``build(op, shape, dtype, profile)`` makes the tensors on
    the device and returns the op's benches at ``shape`` (one, or one per precision or
    masking), their figures left out: ``bytes(bench_shape, dtype)`` (memory-bound: one read
    of every input and one write of every output) or ``flops(bench_shape)`` (compute-bound)
    give them. ``op``: the OpSpec whose reference kernel the bench times."""

    op: str
    build: Callable[..., list[Bench]]
    shapes: tuple[tuple[int, ...], ...]   # what ``python -m benchmarks`` times
    small_shape: tuple[int, ...]          # launch-overhead timing: the GPU is never the limit
    bytes: Callable[[tuple, torch.dtype], int] | None = None
    flops: Callable[[tuple], int] | None = None
    sweep: str | None = None              # one of SWEEP_KINDS; None: not swept

    def __post_init__(self):
        if (self.bytes is None) == (self.flops is None):
            raise ValueError(f"bench of '{self.op}': give bytes (memory-bound) or flops "
                             f"(compute-bound), exactly one")
        if self.sweep is not None and self.sweep not in SWEEP_KINDS:
            raise ValueError(f"bench of '{self.op}': sweep must be one of {SWEEP_KINDS} or "
                             f"None, got {self.sweep!r}")

    def benches(self, shape, dtype, profile) -> list[Bench]:
        """The benches at ``shape`` with their bytes or FLOPs from the model."""
        out = []
        for bench in self.build(shape, dtype, profile):
            figure = {"bytes": self.bytes(bench.shape, dtype)} if self.bytes \
                else {"flops": self.flops(bench.shape)}
            out.append(dataclasses.replace(bench, **figure))
        return out


def moved(*tensors: int | float) -> Callable[[tuple, torch.dtype], int]:
    """A bytes model: ``tensors`` counts of full-shape tensors of the bench's dtype moved."""
    return lambda shape, dtype: int(sum(tensors) * math.prod(shape)) * dtype.itemsize


def randn(shape, dtype, seed: int = 0) -> torch.Tensor:
    # a generator of its own: a library call that fails CUDA-graph capture can leave the
    # default CUDA generator registered with the aborted graph, and every later
    # torch.randn on the device then raises "Offset increment outside graph capture"
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(shape, device="cuda", dtype=dtype, generator=gen)
