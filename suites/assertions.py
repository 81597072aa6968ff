"""Assertions with one message shape: what differs, by how much, against which bound,
and the command that reproduces it."""
from __future__ import annotations

from typing import Sequence

import torch

from triton_cts.execution import devices
from triton_cts.ops.tolerances import CLEARLY_WORSE_THAN_TORCH, tolerance


def as_outputs(value) -> tuple:
    if isinstance(value, torch.Tensor):
        return (value,)
    if isinstance(value, Sequence):
        return tuple(value)
    raise TypeError(f"an op must return a tensor or a sequence of tensors, got {type(value).__name__}")


#: Outputs of at least this many elements are compared on the accelerator, in chunks of
#: as many (a few float64 temporaries of 128 MiB each): on one CPU thread, the comparison
#: of a 134M-element output of a device boundary check took about a quarter of the check.
DEVICE_COMPARE_CHUNK = 1 << 24


def _within_everywhere(got, want, rtol: float, atol):
    """(max |got - want|, max |got - want| / bound) where every difference is finite and
    within its bound, else None: the common case at any size."""
    diff = (got - want).abs()
    bound = atol + rtol * want.abs()
    if not bool((torch.isfinite(diff) & (diff <= bound)).all()):
        return None
    scaled = torch.where(diff > 0, diff / torch.where(bound > 0, bound, torch.zeros_like(bound)),
                         torch.zeros_like(diff))
    return (float(diff.max()) if diff.numel() else 0.0,
            float(scaled.max()) if scaled.numel() else 0.0)


def _within_everywhere_in_chunks(got, want, rtol: float, atol, device: str):
    """:func:`_within_everywhere` over chunks moved to ``device``."""
    flat_got, flat_want = got.reshape(-1), want.reshape(-1)
    flat_atol = atol.expand(want.shape).reshape(-1) if isinstance(atol, torch.Tensor) \
        and atol.dim() else atol
    worst_abs = worst_ratio = 0.0
    for start in range(0, flat_want.numel(), DEVICE_COMPARE_CHUNK):
        part = slice(start, start + DEVICE_COMPARE_CHUNK)
        a = flat_atol[part].to(device) if isinstance(flat_atol, torch.Tensor) \
            and flat_atol.dim() else flat_atol
        found = _within_everywhere(flat_got[part].to(device, torch.float64),
                                   flat_want[part].to(device, torch.float64), rtol, a)
        if found is None:
            return None
        worst_abs, worst_ratio = max(worst_abs, found[0]), max(worst_ratio, found[1])
    return worst_abs, worst_ratio


def compare(out: torch.Tensor, ref: torch.Tensor, rtol: float, atol) -> dict:
    """Elementwise |out - ref| <= atol + rtol * |ref|; NaN must match NaN, inf must match
    inf of the same sign. Returns the measured error and the bound, and where it broke."""
    got, want = out.detach(), ref.detach()
    if want.device.type != "cpu":  # a reference kept on the device: compare there
        got = got.to(want.device)
    if isinstance(atol, torch.Tensor):  # the error model's, wherever it was computed
        atol = atol.to(want.device)
    # Fast path (every difference finite and within its bound), a third of the passes over
    # the data of the full path below, which gives the same numbers here; large outputs
    # on the accelerator where there is one.
    if want.numel() >= DEVICE_COMPARE_CHUNK and (want.device.type != "cpu"
                                                 or devices.available()):
        device = want.device if want.device.type != "cpu" else devices.device_type()
        found = _within_everywhere_in_chunks(got, want, rtol, atol, device)
    else:
        got, want = got.to(torch.float64), want.to(torch.float64)
        found = _within_everywhere(got, want, rtol, atol)
    if found is not None:
        return {
            "max_abs_error": found[0],
            "rtol": rtol, "atol": float(torch.as_tensor(atol).max()) if want.numel() else 0.0,
            "mismatched": 0, "numel": want.numel(), "worst_index": None, "ratio": found[1],
        }
    got, want = got.to(torch.float64), want.to(torch.float64)
    diff = (got - want).abs()
    bound = atol + rtol * want.abs()
    nan_ok = torch.isnan(got) == torch.isnan(want)
    inf_ok = (torch.isinf(want) == torch.isinf(got)) & torch.where(
        torch.isinf(want), got == want, torch.ones_like(want, dtype=torch.bool))
    finite = torch.isfinite(want) & torch.isfinite(got)
    diff = torch.where(finite, diff, torch.zeros_like(want))
    within = ~finite | (diff <= torch.where(finite, bound, torch.zeros_like(bound)))
    ok = nan_ok & inf_ok & within
    # How far out of bounds: the largest |out - ref| / bound (inf where the bound is 0 or
    # a NaN or inf does not match).
    scaled = torch.where(diff > 0, diff / torch.where(bound > 0, bound, torch.zeros_like(bound)),
                         torch.zeros_like(diff))
    ratio = float("inf") if not bool((nan_ok & inf_ok).all()) else \
        float(scaled.max()) if scaled.numel() else 0.0
    worst = None
    if not bool(ok.all()):
        excess = torch.where(ok, torch.full_like(diff, -1.0),
                             torch.where(finite, diff - bound, torch.full_like(diff, float("inf"))))
        flat = int(torch.argmax(excess.reshape(-1)))
        worst = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), want.shape)) \
            if want.dim() else ()
    return {
        "max_abs_error": float(diff.max()) if diff.numel() else 0.0,
        "rtol": rtol, "atol": float(torch.as_tensor(atol).max()) if diff.numel() else 0.0,
        "mismatched": int((~ok).sum()), "numel": want.numel(), "worst_index": worst,
        "ratio": ratio,
    }


def describe_profile(profile) -> str:
    """A profile's name, plus the constants that differ when it is a derived one."""
    if "~" not in profile.name:
        return profile.name
    la, io = profile["launch"], profile["io"]
    return (f"{profile.name} (max_fused_size_bytes={la['max_fused_size_bytes']}, "
            f"elementwise_block_bytes={la['elementwise_block_bytes']}, max_grid_num="
            f"{la['max_grid_num']}, compute_units={profile.compute_units}, io.load={io['load']}, "
            f"io.row_constants={io['row_constants']})")


def assert_matches_reference(target, case, outputs, references, repro: str, profile=None,
                             against: str = "ref", scale: float = 1.0,
                             error_scales=None, tolerance_dtype=None,
                             ambiguities=None, torch_oracle=None) -> list[dict]:
    """Every output within tolerance of its reference (the float64 one, or another run's
    outputs when ``against`` names it, with the bound multiplied by ``scale``); returns one
    record per output. ``tolerance_dtype``: whose tolerance applies, when the outputs
    compared are quantities derived in float64 from the implementation's outputs.
    ``torch_oracle`` (``runner.torch_oracle``): where an output is out of its bound, torch's
    own result in the same dtype is measured against the same bound, and the output fails
    only if it is also clearly worse than torch's (the policy in
    ``triton_cts.ops.tolerances``)."""
    __tracebackhide__ = True
    torch_outputs = None
    profile = profile or target.profile
    outputs, references = as_outputs(outputs), as_outputs(references)
    where = (f"{target.op.name}[{target.impl.name}] on {describe_profile(profile)} "
             f"({target.mode}), {case.describe()}")
    if len(outputs) != len(references):
        raise AssertionError(f"{where}: returned {len(outputs)} outputs, the reference "
                             f"{len(references)}\nreproduce: {repro}")
    records = []
    for i, (out, ref) in enumerate(zip(outputs, references)):
        name = f"output {i}" if len(outputs) > 1 else "output"
        if ref is None:
            continue
        if not isinstance(out, torch.Tensor):
            raise AssertionError(f"{where}: {name} is {type(out).__name__}, expected a tensor"
                                 f"\nreproduce: {repro}")
        if tuple(out.shape) != tuple(ref.shape):
            raise AssertionError(f"{where}: {name}.shape={tuple(out.shape)}, but should be "
                                 f"{tuple(ref.shape)}\nreproduce: {repro}")
        dtype = tolerance_dtype or (out.dtype if out.dtype.is_floating_point else ref.dtype)
        rtol, atol = tolerance(target.op, dtype, profile, target.mode) if dtype.is_floating_point \
            else (0.0, 0.0)
        rtol, atol = rtol * scale, atol * scale
        if error_scales is not None and error_scales[i] is not None:
            atol = atol * error_scales[i]  # the op's own error model (OpSpec.error_scale)
        if ambiguities is not None and ambiguities[i] is not None:
            atol = atol + ambiguities[i]   # either of two right answers (OpSpec.ambiguity)
        if out.dtype.is_floating_point and ref.dtype.is_floating_point:
            # An exact result beyond the output dtype's range is stored as +-inf by any
            # correct kernel (and by torch): round the reference's range the same way.
            rounded = ref.to(out.dtype).to(ref.dtype)
            ref = torch.where(torch.isinf(rounded) & torch.isfinite(ref), rounded, ref)
        rec = compare(out, ref, rtol, atol)
        rec["output"] = name
        records.append(rec)
        if rec["mismatched"] and torch_oracle is not None:
            if torch_outputs is None:
                theirs = torch_oracle()
                torch_outputs = () if theirs is None else as_outputs(theirs)
            theirs = torch_outputs[i] if i < len(torch_outputs) else None
            if isinstance(theirs, torch.Tensor) and tuple(theirs.shape) == tuple(ref.shape):
                rec["torch_ratio"] = compare(theirs, ref, rtol, atol)["ratio"]
                if 1.0 < rec["torch_ratio"] < float("inf") and \
                        rec["ratio"] <= CLEARLY_WORSE_THAN_TORCH * rec["torch_ratio"]:
                    # torch errs past the model too: the model is too tight here
                    _record_oracle(repro, name, rec)
                    continue
        if rec["mismatched"]:
            _record_failure(repro, name if against == "ref" else f"{name} against {against}", rec)
            idx = rec["worst_index"]
            got, want = out.reshape(out.shape)[idx].item(), ref[idx].item()
            atol = float(atol[idx]) if isinstance(atol, torch.Tensor) else atol
            vs_torch = (f"; torch's own {str(out.dtype).removeprefix('torch.')} result errs "
                        f"by {rec['torch_ratio']:.3g}x "
                        f"the bound, this one by {rec['ratio']:.3g}x"
                        if "torch_ratio" in rec else "")
            raise AssertionError(
                f"{where}: {name} has {rec['mismatched']} of {rec['numel']} elements out of "
                f"tolerance; worst at index {idx}: out={got!r}, {against}={want!r}, "
                f"|out-{against}|={abs(got - want):.3g} > bound atol + rtol*|{against}| = "
                f"{atol:.3g} + {rtol:.3g}*{abs(want):.3g}{vs_torch}\nreproduce: {repro}")
    return records


def check_outputs(target, case, outputs, repro: str, profile=None, references=None,
                  against: str = "ref", scale: float = 1.0, ambiguity: bool = True,
                  allowance_scale: float = 1.0, oracle: bool = True) -> list[dict]:
    """:func:`assert_matches_reference` of ``outputs`` on ``case`` with the op's models:
    against its float64 reference (or ``references``, another run's outputs named by
    ``against``), atol scaled by its error model, its allowances (ambiguity where
    ``ambiguity``, the conditioning times ``allowance_scale``) added, and torch's own
    result as the second oracle where ``oracle``. One record per output."""
    __tracebackhide__ = True
    from suites import runner
    args, kwargs = case.args, case.kwargs
    # the float64 work stays where it ran (the device in device mode): rounding and
    # comparing there, not on the one CPU thread of a worker
    if references is None:
        references = runner.run_reference(target, args, kwargs, keep=True)
    return assert_matches_reference(
        target, case, outputs, references, repro, profile=profile, against=against,
        scale=scale, error_scales=runner.error_scales(target, args, kwargs, keep=True),
        ambiguities=runner.allowances(target, args, kwargs, ambiguity=ambiguity,
                                      scale=allowance_scale, keep=True),
        torch_oracle=runner.torch_oracle(target, args, kwargs) if oracle else None)


def _record_failure(repro, name: str, rec: dict) -> None:
    """A failure's measurement as the check's properties, as suites record a pass's
    ("<name> max_abs_error", "<name> bound"), and how far out of bounds it was
    ("<name> error_ratio"): the report's errors then hold it, not only the message. The
    ``repro`` fixture's command records them (any other string: nothing is recorded)."""
    record = getattr(repro, "record", None)
    if record is None:
        return
    record(f"{name} max_abs_error", rec["max_abs_error"])
    record(f"{name} bound", f"rtol={rec['rtol']} atol={rec['atol']}")
    record(f"{name} error_ratio", rec["ratio"])


def _record_oracle(repro, name: str, rec: dict) -> None:
    """A pass that rests on the second oracle says so in the report: the error past the
    model and torch's own, both as multiples of the bound."""
    record = getattr(repro, "record", None)
    if record is not None:
        record(f"{name} beyond the model, within torch's error",
               f"error {rec['ratio']:.3g}x the bound; torch's own {rec['torch_ratio']:.3g}x")


class context:
    """Adds the check's identity and repro command to any failure raised inside (a guard
    violation, an exception from the implementation) that does not carry them yet."""

    def __init__(self, target, case, repro: str, profile=None):
        self.where = (f"{target.op.name}[{target.impl.name}] on "
                      f"{describe_profile(profile or target.profile)} ({target.mode}), "
                      f"{case.describe()}")
        self.repro = repro

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is not None and "reproduce:" not in str(exc):
            exc.add_note(f"while checking {self.where}\nreproduce: {self.repro}")
        return False
