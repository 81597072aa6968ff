"""Grid limits: every kernel launch stays within the profile's grid limits, and launchers
that cap their grid still cover every row.

Triton validates no grid, and some grids over the limits launch nothing without an error
(the launcher multiplies the axes in a C int: ``PROBE_GRIDS`` below), so each recorded launch (``triton_cts/execution/launches.py``: plain,
autotuned and heuristic kernels, callable grids evaluated) is held against the profile by
``triton_cts/execution/grid_check.py``. Edge cases per op: rows (or blocks) at a limit minus one, at
it and one past it on every limit (MAX_GRID_NUM, each axis), rows far beyond the grid cap
(outputs are poisoned, so a grid-stride loop that skips rows fails), rows longer than
MAX_FUSED_SIZE (the fallback path), and empty tensors.

- interpreter: the cases run under derived profiles with tiny limits (a few dozen rows
  cross them), outputs checked against the reference;
- compile: launches are captured (nothing runs) at full size for the real profile's
  limits, on meta tensors where the op's arguments and launcher allow it;
- device: the same edge cases at the real limits, a grid the device silently drops is
  flagged by the validation, and tensors of more than 2^31 elements (int64 offsets).
"""
from __future__ import annotations

import gc
import warnings

import pytest
import torch
from hypothesis import given, note, settings, strategies as st

from suites import assertions as ah
from suites import runner
from suites import strategies as hh
from triton_cts.execution import devices, launches
from triton_cts.execution.grid_check import empty_grid, grid_violations, launch_violations
from triton_cts.execution.modes import Mode, execute
from triton_cts.results.status import NOT_SUPPORTED
from triton_cts.targets import dtype_gap, selection

#: Largest tensor drawn for device edge cases (elements), and the size a compile-mode
#: case may allocate on the CPU when the op cannot run on meta tensors.
DEVICE_EDGE_NUMEL = 1 << 26
CPU_FALLBACK_NUMEL = 1 << 21


def _dtypes(target) -> list[torch.dtype]:
    return [d for d in target.op.dtypes if dtype_gap(target, d) is None]


def _dtype_or_skip(target) -> torch.dtype:
    dtypes = _dtypes(target)
    if not dtypes:
        pytest.skip(NOT_SUPPORTED + f"profile {target.profile.name} supports none of "
                                    f"{target.op.name}'s dtypes in {target.mode} mode")
    return torch.float32 if torch.float32 in dtypes else dtypes[0]


def _caps(target) -> bool:
    """Launchers that take the profile read launch.max_grid_num, so they must cap."""
    return target.impl.takes_profile(target.impl.load())


def _fail(target, profile, what: str, problems: list[str], repro: str):
    pytest.fail(f"{target.op.name}[{target.impl.name}] on {ah.describe_profile(profile)} "
                f"({target.mode}), {what}:\n  " + "\n  ".join(problems)
                + f"\nreproduce: {repro}", pytrace=False)


def _case(op, shape, dtype, seed=0, device="cpu") -> hh.Case:
    return hh.build_case(op, dtype, shape, "normal", seed, "contiguous", device)


@pytest.mark.cts_modes("device", "interpreter")
@settings(max_examples=max(2, settings.default.max_examples // 2))  # ci: 2 per target
@given(data=st.data())
def test_grids_within_limits_at_edges(target, data, repro, record_property):
    """Rows at, around and far beyond each grid limit: every launch within the limits,
    every output element written once and right (outputs start poisoned)."""
    _dtype_or_skip(target)
    dtype = data.draw(st.sampled_from(_dtypes(target)), label="dtype")
    if target.mode is Mode.INTERPRETER:
        if not _caps(target):
            pytest.skip(NOT_SUPPORTED + f"{target.impl.name} does not take the profile, so the "
                        "tiny grid limits of the interpreter's derived profiles do not apply "
                        "to its launches; its grids are checked against the real limits in "
                        "device mode")
        profile = data.draw(hh.grid_limited_profiles(target.profile), label="profile")
        max_rows = None
    else:
        profile = target.profile
        max_rows = DEVICE_EDGE_NUMEL // max(1, profile.max_fused_elements(dtype) + 1)
    note(f"profile: {_describe_grid(profile)}")
    shape = data.draw(hh.grid_edge_shapes(target.op, profile, dtype, max_rows), label="shape")
    case = _case(target.op, shape, dtype, seed=data.draw(st.integers(0, 2**16), label="seed"),
                 device=runner.reference_device(target))
    with ah.context(target, case, repro, profile), launches.record_launches() as log:
        out = runner.run_target(target, case.args, case.kwargs, profile=profile)
    record_property("grids", sorted({(launch.name, launch.grid) for launch in log}))
    problems = launch_violations(log, profile, capped=_caps(target))
    if problems:
        _fail(target, profile, case.describe(), problems, repro)
    ah.check_outputs(target, case, out, repro, profile=profile, ambiguity=False)


def _describe_grid(profile) -> str:
    return (f"{profile.name}: grid_max={list(profile.grid_max)}, grid_max_product="
            f"{profile.grid_max_product}, max_grid_num={profile.max_grid_num}, "
            f"max_fused_size_bytes={profile['launch.max_fused_size_bytes']}")


def _full_size_shapes(op, profile, dtype) -> list[tuple[int, ...]]:
    """Rows around every grid limit of the real profile and far beyond the cap, with rows
    of 1 element and of MAX_FUSED_SIZE + 1 elements."""
    rows = {r for limit in hh.grid_limits(profile) for r in hh.rows_around(limit)}
    rows.add(3 * profile.max_grid_num + 1)
    widths = (1, profile.max_fused_elements(dtype) + 1)
    shapes = []
    for r in sorted(rows):
        for n in widths:
            if op.max_ndim < 2:
                shapes.append((r * n,))
            else:
                shapes.append((r,) + (1,) * max(0, op.min_ndim - 2) + (n,))
    return shapes


def _capture(target, profile, shape, dtype):
    """Launches captured at ``shape``: on meta tensors, else on the CPU where small
    enough; (log, None) or (None, why not)."""
    fn = target.impl.load()
    numel = 1
    for d in shape:
        numel *= d
    errors = []
    for device in ("meta", "cpu"):
        if device == "cpu" and numel > CPU_FALLBACK_NUMEL:
            break
        try:
            with torch.device(device):
                x = torch.empty(shape, dtype=dtype) if device == "meta" \
                    else hh.make_values(shape, dtype, "normal", 0)
                args, kwargs = target.op.make_args(x, torch.Generator().manual_seed(1))
            return execute(fn, Mode.COMPILE, profile, args, kwargs,
                           takes_profile=target.impl.takes_profile(fn)), None
        except Exception as exc:  # noqa: BLE001 - recorded as the reason it was not checked
            errors.append(f"{device}: {type(exc).__name__}: {str(exc)[:160]}")
    return None, "; ".join(errors) or "too large to allocate on the CPU"


@pytest.mark.cts_modes("compile")
def test_grids_within_limits_at_full_size(target, repro, record_property):
    """Launches captured at the real profile's limits (rows up to 2^31 on meta tensors):
    every grid within limits.grid_max, grid_max_product and launch.max_grid_num."""
    dtype = _dtype_or_skip(target)
    profile = target.profile
    checked, unchecked, problems = [], [], []
    for shape in _full_size_shapes(target.op, profile, dtype):
        log, why = _capture(target, profile, shape, dtype)
        if log is None:
            unchecked.append(f"{shape}: {why}")
            continue
        checked.append(shape)
        problems += [f"shape {shape}: {p}" for p in launch_violations(log, profile,
                                                                     capped=_caps(target))]
    record_property("shapes checked", [str(s) for s in checked])
    for line in unchecked:
        record_property(f"not checked {line.split(':')[0]}", line)
    if problems:
        _fail(target, profile, str(dtype).removeprefix("torch."), problems, repro)
    if not checked:
        pytest.skip(NOT_SUPPORTED + "no edge shape could be captured without allocating: "
                    + unchecked[0])


@pytest.mark.cts_modes("device", "interpreter", "compile")
def test_empty_tensors(target, repro, record_property):
    """A tensor with no elements: the result torch gives (compared in device and
    interpreter modes), or an error before any launch where torch raises too. A launch
    with an empty grid is a quality warning, not a failure: Triton's CUDA and HIP
    launchers and its interpreter launch nothing for it, which is the right outcome here
    (returning before the launch also skips compiling the kernel, and backends outside
    upstream Triton may not skip it)."""
    dtype = _dtype_or_skip(target)
    shapes = hh.empty_shapes(target.op)
    if not shapes:
        pytest.skip(NOT_SUPPORTED + f"{target.op.name} takes no empty shape")
    for shape in shapes:
        with warnings.catch_warnings():  # torch warns about statistics of no elements
            warnings.simplefilter("ignore", UserWarning)
            case = _case(target.op, shape, dtype)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                ref, torch_error = runner.run_reference(target, case.args, case.kwargs), None
        except Exception as exc:  # noqa: BLE001 - torch's own answer for this shape
            ref, torch_error = None, exc
        with launches.record_launches() as log:
            try:
                out, error = runner.run_target(target, case.args, case.kwargs), None
            except (pytest.skip.Exception, AssertionError):
                raise
            except Exception as exc:  # noqa: BLE001 - judged below
                out, error = None, exc
        where = case.describe()
        problems = launch_violations(log, target.profile, capped=_caps(target),
                                     allow_empty=True)
        empty = sorted({launch.name for launch in log if empty_grid(launch.grid)})
        if empty:
            record_property("quality_warning",
                            f"shape {shape}: launched {', '.join(empty)} with an empty grid "
                            f"(Triton's CUDA and HIP launchers skip it; return before "
                            f"launching)")
        if error is not None:
            record_property(f"{shape}", f"raises {type(error).__name__}: {error}")
            if log:
                problems.append(f"raised {type(error).__name__} after launching "
                                f"{[launch.name for launch in log]}: check before launching")
            if type(error).__module__.startswith("triton") or not str(error):
                problems.append(f"raised an unclear {type(error).__name__}: {error!r}")
            if torch_error is None:
                record_property(f"{shape} torch", "returns a result")
        elif torch_error is not None and target.mode is not Mode.COMPILE:
            problems.append(f"returned a result where torch raises "
                            f"{type(torch_error).__name__}: {torch_error}")
        if problems:
            _fail(target, target.profile, where, problems, repro)
        if error is None and torch_error is None and target.mode is not Mode.COMPILE:
            ah.assert_matches_reference(target, case, out, ref, repro)


# ---- device only ---------------------------------------------------------------------
def _device_profile(request):
    sel = selection(request.config)
    if Mode.DEVICE not in sel.modes:
        pytest.skip(NOT_SUPPORTED + "device mode not selected (--mode device)")
    if sel.device_profile is None:
        pytest.skip(NOT_SUPPORTED + "no accelerator attached")
    return next(p for p in sel.profiles + list(_all_profiles(sel))
                if p.name == sel.device_profile)


def _all_profiles(sel):
    from triton_cts.profiles import load_profiles
    return load_profiles(sel.profile_dirs).values()


def _flag_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def _first_program_flag(FLAG):
        # program (0, 0, 0) marks that the launch ran at all
        if (tl.program_id(0) == 0) & (tl.program_id(1) == 0) & (tl.program_id(2) == 0):
            tl.store(FLAG, 1)
    return _first_program_flag


#: Grids at and over the CUDA/HIP limits: (1, 65535, 1) runs; (1, 65536, 1) and
#: (1, 1, 65536) are refused; (65536, 65536, 1) wraps the launcher's C-int product and
#: launches nothing, reporting no error (seen on an H200, triton 3.6).
PROBE_GRIDS = ((1, 65535, 1), (1, 65536, 1), (1, 1, 65536), (65536, 65536, 1))


@pytest.mark.cts_modes("device")
def test_grid_validation_flags_silent_noop_launches(request, record_property):
    """On the attached device, every probe grid the device refuses or silently drops is
    one the grid validation flags for the device's profile, and every grid it flags
    is one the device does not run (the profile's limits match the hardware)."""
    profile = _device_profile(request)
    kernel = _flag_kernel()
    problems = []
    for grid in PROBE_GRIDS:
        flag = torch.zeros(1, dtype=torch.int32, device=devices.device_type())
        try:
            kernel[grid](flag)
            devices.synchronize()
            outcome = "ran" if int(flag.item()) == 1 else "launched nothing, reported nothing"
        except Exception as exc:  # noqa: BLE001 - the device's refusal is the outcome
            devices.synchronize()
            outcome = f"refused: {type(exc).__name__}: {str(exc)[:120]}"
        flagged = grid_violations(grid, profile, capped=False, kernel="probe")
        record_property(f"grid {grid}", f"{outcome}; validation: {flagged or 'within limits'}")
        if outcome != "ran" and not flagged:
            problems.append(f"grid {grid} {outcome} on the device, but the validation "
                            f"accepts it for {profile.name}: a silent no-op would pass")
        if outcome == "ran" and flagged:
            problems.append(f"grid {grid} ran on the device, but the validation flags it: "
                            f"{flagged[0]} (the profile's limits are tighter than the device)")
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.mark.cts_modes("device")
def test_more_than_2_31_elements(target, repro, record_property):
    """An input of 2^31 + 2^16 elements (rows of 2^16) runs and matches the reference:
    offsets past 2^31 need int64 arithmetic. Run in the smallest dtype the implementation
    takes (a larger one where it declines the smaller with UnsupportedDtypeError);
    skipped where device memory is short."""
    dtypes = sorted(_dtypes(target), key=lambda d: d.itemsize)
    if not dtypes:
        pytest.skip(NOT_SUPPORTED + f"no dtype of {target.op.name} is supported here")
    declined = []
    for dtype in dtypes:
        why = _past_2_31_elements(target, dtype, repro, record_property)
        if why is None:
            return
        declined.append(why)
    pytest.skip(NOT_SUPPORTED + "; ".join(declined))


def _past_2_31_elements(target, dtype, repro, record_property) -> str | None:
    """:func:`test_more_than_2_31_elements` in ``dtype``: None once checked, or why the
    implementation declined the dtype."""
    from triton_cts.execution.input_checks import UnsupportedDtypeError
    n = 1 << 16
    rows = (1 << 31) // n + 1
    shape = (rows * n,) if target.op.max_ndim < 2 else (rows,) + (1,) * max(0, target.op.min_ndim - 2) + (n,)
    numel = rows * n
    gc.collect()
    devices.empty_cache()  # what earlier tests left in torch's cache is free memory too
    free = devices.free_memory()
    device = devices.device_type()
    need = numel * (dtype.itemsize * 6 + 8 * 4)  # inputs, outputs, float64 reference and its compare
    if free is None:
        pytest.skip(NOT_SUPPORTED + f"needs about {need / 2**30:.0f} GiB of device memory in "
                                    f"{dtype}, and the {device} backend does not report its "
                                    "free memory")
    if need > free:
        pytest.skip(NOT_SUPPORTED + f"needs about {need / 2**30:.0f} GiB of device memory "
                                    f"in {dtype}, {free / 2**30:.0f} GiB free")
    fn = target.impl.load()
    gen = torch.Generator(device=device).manual_seed(1)
    try:
        with torch.device(device):
            x = torch.randn(shape, dtype=torch.float32, generator=gen).to(dtype)
            args, kwargs = target.op.make_args(x, gen)
            ref = target.op.reference(*runner.upcast(args), **kwargs)
    except (RuntimeError, TypeError) as exc:
        pytest.skip(NOT_SUPPORTED + f"the op's arguments or reference cannot be built on the "
                                    f"device at this size: {type(exc).__name__}: {str(exc)[:160]}")
    ref = runner.provided(target, ref)
    if any(r is not None and r.device.type != device for r in runner.as_tuple(ref)):
        pytest.skip(NOT_SUPPORTED + f"{target.op.name}'s reference computes on the CPU")
    with launches.record_launches() as log:
        try:
            out = fn(*args, **kwargs, **({"profile": target.profile}
                                         if target.impl.takes_profile(fn) else {}))
        except UnsupportedDtypeError as exc:  # e.g. a variant for 32-bit data only
            return str(exc)
        devices.synchronize()
    problems = launch_violations(log, target.profile, capped=_caps(target))
    case = hh.Case(shape, dtype, "normal", 1, "contiguous", (), {})
    if problems:
        _fail(target, target.profile, case.describe(), problems, repro)
    record_property("numel", numel)
    scales = runner.error_scales(target, args, kwargs) or ()
    # the op's conditioning (rounding ties, ill-conditioned rows) holds at this size too
    extras = runner.allowances(target, args, kwargs) or ()
    for i, (o, r) in enumerate(zip(ah.as_outputs(out), ah.as_outputs(ref))):
        if r is None:
            continue
        scale = scales[i] if i < len(scales) else None
        extra = extras[i] if i < len(extras) else None
        for start in range(0, max(1, r.numel()), 1 << 28):  # compare in chunks
            sl = slice(start, start + (1 << 28))
            chunk, allowed = (None if v is None else torch.as_tensor(
                v, device=r.device).expand(r.shape).reshape(-1)[sl] for v in (scale, extra))
            ah.assert_matches_reference(target, case, (o.reshape(-1)[sl],), (r.reshape(-1)[sl],),
                                        f"{repro} (output {i}, elements {start}+)",
                                        error_scales=(chunk,), ambiguities=(allowed,))
    return None
