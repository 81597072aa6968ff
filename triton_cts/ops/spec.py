"""What an op is: its :class:`OpSpec`, one per op, declared in the op family modules beside
this one (``triton_cts/ops/<family>.py``) and listed in :mod:`triton_cts.ops.catalog`.

An OpSpec holds the op's float64 torch reference, the dtypes and shapes it accepts, how to
build its arguments from one input tensor, tolerance defaults and error models, and the
reference kernel's launcher. Suites iterate the catalog; they hold no per-op code.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

import torch


def randn(shape, gen: torch.Generator, dtype: torch.dtype, device,
          drawn_in: torch.dtype | None = None) -> torch.Tensor:
    """Standard normal values of ``shape``, drawn in ``drawn_in`` (default ``dtype``) and
    rounded to ``dtype``, on ``device`` (pass ``x.device``): from ``gen`` itself on the
    CPU; on an accelerator from a generator there seeded from ``gen``, so that the millions
    of values of a boundary case are not drawn by a worker's one CPU thread. The values
    depend on where they are drawn, as the drawn input's do
    (``suites/strategies.py::make_values``)."""
    drawn_in = drawn_in or dtype
    device = torch.device(device)
    if device.type == "cpu":
        return torch.randn(shape, generator=gen, dtype=drawn_in).to(dtype)
    if device.type == "meta":
        return torch.empty(shape, dtype=dtype, device=device)
    seed = int(torch.randint(0, 2**62, (), generator=gen))
    local = torch.Generator(device).manual_seed(seed)
    return torch.randn(shape, generator=local, dtype=drawn_in, device=device).to(dtype)


@dataclass(frozen=True)
class OpSpec:
    """Metadata of one op. ``make_args(x, generator)`` builds the call's positional
    arguments and keyword options from the drawn input ``x`` and a CPU generator; ``x`` is
    on the accelerator for device mode's boundary cases (millions of elements), so tensors
    made from ``x`` stay on its device and large extra ones are drawn there
    (:func:`randn`); small ones made on the CPU are moved beside ``x`` after the call.
    ``reference`` takes the same arguments upcast to float64 and returns the expected
    output(s)."""

    name: str
    description: str
    reference: Callable[..., torch.Tensor]
    reference_kernel: str                       # "kernels.<family>:<launcher>"
    dtypes: tuple[torch.dtype, ...]
    make_args: Callable[[torch.Tensor, torch.Generator], tuple[tuple, dict]]
    min_ndim: int = 1
    max_ndim: int = 4
    tolerances: Mapping[torch.dtype, tuple[float, float]] = field(default_factory=dict)
    #: Shapes the compile suite cross-compiles (the launcher's specializations at these).
    compile_shapes: tuple[tuple[int, ...], ...] = ((4096,),)
    #: Other reference-kernel strategies for the same op, name -> "module:function"; each
    #: is registered as implementation "reference/<name>" and checked like the default.
    variants: Mapping[str, str] = field(default_factory=dict)
    #: Metamorphic relations that hold for the op (names from suites/relations.py).
    relations: tuple[str, ...] = ()
    #: (rtol, atol) for float32 where the profile runs float32 dots as tf32, on a device.
    tf32_tolerance: tuple[float, float] | None = None
    #: Where rounding error grows with the inputs' magnitude rather than the result's (a
    #: dot product of large terms that cancel), ``error_scale(*args64)`` gives, per output,
    #: the magnitude atol is multiplied by; None keeps atol as is.
    error_scale: Callable[..., tuple] | None = None
    #: Where an input is a rounded copy of something an implementation may also recompute
    #: (the float32 mean and rstd a backward receives), two answers are right: the
    #: gradient at the statistics given and the one at the exact statistics.
    #: ``ambiguity(*args64)`` gives, per output, the elementwise gap between them (or None);
    #: it is added to the bound.
    ambiguity: Callable[..., tuple] | None = None
    #: Where the op is ill-conditioned at some inputs, so that any correct implementation
    #: errs by more than the output's rounding (a normalisation of values whose mean dwarfs
    #: their spread: the computed mean carries a rounding error proportional to the
    #: values' magnitude, which the division by the spread amplifies; a softmax backward
    #: whose dy - sum(dy * y) cancels), ``conditioning(*args64, dtype=input_dtype)`` gives,
    #: per output, the absolute error such an implementation may make (or None); it is
    #: added to the bound. Models in triton_cts/ops/error_models.py.
    conditioning: Callable[..., tuple] | None = None
    #: "module:function" of a differentiable launcher taking the op's forward arguments
    #: (what make_args builds) and returning the op's first output; gradcheck runs it.
    autograd: str | None = None
    #: Why the float64 reference and error models must run on the CPU in device mode too
    #: (where CUDA torch's float64 is not the exact answer); None: they run where the
    #: check runs (``suites/runner.py::reference_device``), so every function of the op
    #: must make its tensors on its inputs' device.
    reference_on_cpu: str | None = None
    #: Known gaps of an execution mode: {(mode, dtype): reason}; reported as not supported.
    mode_gaps: Mapping[tuple[str, torch.dtype], str] = field(default_factory=dict)
    #: Implementations declared bitwise reproducible from run to run (same inputs,
    #: profile and shape), by implementation name ("reference", "reference/partial"):
    #: the atomics suite checks them bit for bit, others within the op's tolerance.
    deterministic: tuple[str, ...] = ()
    #: Arguments the op writes by definition (running statistics a training batch norm
    #: updates in place), as positional indices or parameter names of ``reference``. The
    #: runner checks that a call leaves every other tensor argument unchanged, bit for bit.
    mutates: tuple[int | str, ...] = ()
    #: The suite files (stems, "test_compile") whose tests take this op; None: every
    #: suite. A Triton language primitive (triton_cts/ops/language/) names the compile
    #: suite and its own language suite: the generic op suites' properties (relations,
    #: gradients, grid fuzzing) do not apply to it.
    suites: tuple[str, ...] | None = None
    #: A Triton language primitive's description (a dataclass of its family in
    #: triton_cts/ops/language/), which its language suite reads; None for an op.
    primitive: object | None = None

    def __post_init__(self):
        if not self.name.isidentifier():
            raise ValueError(f"op name '{self.name}' must be an identifier")
        if self.min_ndim < 0 or self.max_ndim < self.min_ndim:
            raise ValueError(f"op '{self.name}': need 0 <= min_ndim <= max_ndim")
        if not self.dtypes:
            raise ValueError(f"op '{self.name}': dtypes must not be empty")
        if self.suites is not None and (isinstance(self.suites, str) or not all(
                isinstance(s, str) and s.startswith("test_") for s in self.suites)):
            raise ValueError(f"op '{self.name}': suites must be a tuple of suite file stems "
                             f"such as 'test_compile', got {self.suites!r}")

    def checked_by(self, suite: str) -> bool:
        """Whether the tests of suite file ``suite`` (its stem) take this op."""
        return self.suites is None or suite in self.suites

    def __repr__(self) -> str:
        return f"OpSpec({self.name})"

    def _repr_pretty_(self, printer, cycle) -> None:  # hypothesis' example printer
        printer.text(repr(self))

    def supported_dtypes(self, profile) -> list[torch.dtype]:
        return profile.supported_dtypes(self.dtypes)
