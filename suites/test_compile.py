"""Compile conformance: every kernel a launcher really launches for a profile (every
autotune config included) compiles for its target and stays within its limits.

For CUDA and HIP targets each kernel is cross-compiled with upstream Triton and its
resource use (registers, spills, scratch, shared memory / LDS, occupancy) is recorded on
the test as ``compile_stats`` properties:

- over threads per block, shared memory / LDS or the register file: failure;
- spills, scratch, occupancy under ``compile.min_occupancy_waves``: CompileQualityWarning;
- registers, spills or shared memory changed beyond the golden thresholds for this Triton
  version (``suites/golden/``): failure with old and new numbers, once a fresh process
  with an empty Triton cache has measured the same (one that does not: a warning with both
  numbers); no golden entry: warning.

Every kernel's TTIR also goes through the IO lint (``triton_cts/toolchains/npu_lint.py``) with the
profile's rules; for select-load profiles (SIMD NPUs) the lint is the upstream half of
the check (lowering with triton-ascend and ``bishengir-compile`` is reported as not
supported, with the reason: see triton_cts/toolchains/npu_toolchain.py).
"""
import json
import warnings

import pytest
import torch

from suites import runner
from suites import strategies as hh
from triton_cts.toolchains import golden, npu_lint, npu_toolchain, xpu_toolchain
from triton_cts.toolchains.cross_compile import (CompileQualityWarning, compile_launch,
                                                 every_autotune_config, use_project_cache)
from triton_cts.results.status import NOT_SUPPORTED

use_project_cache()


def _launches(target):
    """(dtype, shape, launch) for every launch the launcher makes at the op's compile
    shapes, each autotune config its own launch."""
    dtypes = target.op.supported_dtypes(target.profile)
    if not dtypes:
        pytest.skip(NOT_SUPPORTED + f"profile {target.profile.name} supports none of "
                                    f"{target.op.name}'s dtypes")
    out, empty, declined = [], [], []
    for dtype in dtypes:
        for shape in target.op.compile_shapes:
            args, kwargs = _args(target.op, dtype, shape)
            try:
                with every_autotune_config():
                    captured = runner.run_target(target, args, kwargs)
            except pytest.skip.Exception as exc:  # this dtype only (int64 Philox offsets on
                declined.append(str(exc.msg))     # a 32-bit-counter target, say)
                continue
            if not captured:
                empty.append(f"{_dtype(dtype)} {shape}: the launcher launched no kernel")
            out += [(dtype, shape, launch) for launch in captured]
    if declined and not out and not empty:
        pytest.skip("; ".join(dict.fromkeys(declined)))
    return out, empty


_ARGS: dict = {}


def _args(op, dtype, shape):
    """One op's arguments at a compile shape, built once per process: every profile
    compiles the same inputs (the runner passes copies to the launcher)."""
    key = (op.name, dtype, shape)
    if key not in _ARGS:
        x = hh.make_values(shape, dtype, "normal", seed=0)
        _ARGS[key] = op.make_args(x, torch.Generator().manual_seed(1))
    return _ARGS[key]


def _dtype(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _fail(target, repro, problems):
    pytest.fail(f"{target.op.name}[{target.impl.name}] for {target.profile.name}:\n  "
                + "\n  ".join(problems) + f"\nreproduce: {repro}", pytrace=False)


@pytest.mark.cts_modes("compile")
def test_compiles_within_limits(target, repro, record_property):
    try:
        launches, problems = _launches(target)
    except pytest.skip.Exception:
        if golden.updating():  # a refresh: stats of a check not supported here are stale
            golden.remove(target.profile.name, f"{target.op.name}[{target.impl.name}]")
        raise
    if target.profile.backend == "npu":
        return _check_npu(target, repro, problems, launches, record_property)
    if target.profile.backend == "xpu":
        return _check_xpu(target, repro, problems, launches, record_property)
    measured: dict[str, dict] = {}
    quality: list[str] = []
    for dtype, shape, launch in launches:
        stats = compile_launch(launch, target.profile)
        key = f"{stats.kernel} {_dtype(dtype)} {shape} [{stats.config}]"
        record = stats.record(profile=target.profile.name, dtype=_dtype(dtype),
                              shape=list(shape))
        record_property("compile_stats", record)
        if key not in measured:
            measured[key] = golden.golden_entry(record)
            quality += stats.quality
        problems += [f"{_dtype(dtype)} {shape}: {v}" for v in stats.violations]
        problems += [f"{_dtype(dtype)} {shape}: IO lint: {f}"
                     for f in npu_lint.lint_ttir(stats.ttir, target.profile, stats.kernel)]
    for issue in quality:
        warnings.warn(f"{target.op.name}[{target.impl.name}] on {target.profile.name}: {issue}",
                      CompileQualityWarning)
    check = f"{target.op.name}[{target.impl.name}]"
    if golden.measure_path() is not None:  # a fresh process rechecking a regression
        golden.measure_path().write_text(json.dumps(measured))
        return
    if golden.updating():
        golden.write(target.profile.name, f"{target.profile.backend}:{target.profile.arch}",
                     check, measured)
    else:
        regressions, missing, improved = golden.compare(target.profile.name, check, measured)
        if regressions:
            fresh = golden.remeasure(repro)
            regressions, unstable = golden.confirm(target.profile.name, check, measured,
                                                   regressions, fresh)
            record_property("golden_recheck", {"this_process": measured, "fresh_process": fresh})
            for u in unstable:
                warnings.warn(f"{check} on {target.profile.name}: {u}",
                              golden.GoldenUnstableWarning)
        problems += [f"golden regression: {r}" for r in regressions]
        # a kernel missing from the check's own entry went uncompared after a launch key
        # changed: shown on the check's record (a check never recorded is not)
        stale = missing and golden.has_entry(target.profile.name, check)
        for m in missing:
            warnings.warn(f"{check} on {target.profile.name}: {m}",
                          golden.GoldenStaleWarning if stale else golden.GoldenMissingWarning)
        for m in improved:
            warnings.warn(f"{check} on {target.profile.name}: {m}", golden.GoldenImprovedWarning)
    if problems:
        _fail(target, repro, problems)
    assert measured, "no kernel was compiled"


def _check_npu(target, repro, problems, launches, record_property=None):
    """The upstream half, the TTIR IO lint, then every launch lowered with triton-ascend
    ("ttadapter": linalg) and checked with bishengir-compile, in their own venv
    (triton_cts/toolchains/npu_toolchain.py): a unified-buffer overflow, a verifier error or a
    lowering error fails; each launch's verdict is recorded in ``compile_stats``. Without
    that venv the lowering is reported as not supported, with how to set it up."""
    for dtype, shape, launch in launches:
        ttir = npu_lint.upstream_ttir(launch)
        problems += [f"{_dtype(dtype)} {shape}: IO lint: {f}"
                     for f in npu_lint.lint_ttir(ttir, target.profile, launch.name)]
    reason = npu_toolchain.unavailable_reason()
    unavailable = []
    if reason is None and launches:
        profile = target.profile
        ub_bytes = profile["limits.shared_memory_per_block"]
        verdicts = npu_toolchain.lower_launches([launch for _, _, launch in launches],
                                                profile["target.arch"])
        for (dtype, shape, launch), verdict in zip(launches, verdicts):
            config = ", ".join(f"{k}={v}" for k, v in launch.kwargs.items())
            stats = {"kernel": launch.name, "target": f"npu:{profile.arch}", "config": config,
                     "lowering": verdict["status"], "profile": profile.name,
                     "dtype": _dtype(dtype), "shape": list(shape),
                     "scalar_loops": len(verdict.get("scalar_loops") or [])}
            if "required_bits" in verdict:
                stats.update(ub_required_bits=verdict["required_bits"],
                             ub_available_bits=verdict["available_bits"])
            if record_property is not None:
                record_property("compile_stats", stats)
            where = f"{_dtype(dtype)} {shape}: {launch.name} [{config}]"
            if verdict["status"] == "unavailable":
                unavailable.append(f"{where}: {verdict['message']}")
            elif verdict["status"] == "ub_overflow":
                problems.append(f"{where}: bishengir-compile: {verdict['message']} "
                                f"(limits.shared_memory_per_block {ub_bytes} bytes)")
            elif verdict["status"] != "passed":
                stage = ("triton-ascend lowering to linalg failed"
                         if verdict["status"] == "lowering_error"
                         else f"bishengir-compile {verdict['status']}")
                problems.append(f"{where}: {stage}: "
                                + verdict["message"].replace("\n", "\n    "))
    if problems:
        _fail(target, repro, problems)
    if reason is not None:
        pytest.skip(NOT_SUPPORTED + f"the IO lint passed for {len(launches)} launches; "
                                    f"lowering with bishengir-compile: {reason}")
    if unavailable:
        pytest.skip(NOT_SUPPORTED + "lowering with bishengir-compile: "
                    + "; ".join(dict.fromkeys(unavailable)))


def _check_xpu(target, repro, problems, launches, record_property):
    """Every launch compiled with triton-xpu to SPIR-V, and to a zebin where ``ocloc`` knows
    the device, in its own venv (triton_cts/toolchains/xpu_toolchain.py): a lowering or
    ocloc error or a broken limit fails, spills and low occupancy warn; each launch's
    verdict is recorded in ``compile_stats``. Without that venv the compile is reported as
    not supported, with how to set it up."""
    reason = xpu_toolchain.unavailable_reason()
    if reason is not None:
        if problems:
            _fail(target, repro, problems)
        pytest.skip(NOT_SUPPORTED + f"compiling with triton-xpu: {reason}")
    out = xpu_toolchain.check_launches(
        [(_dtype(dtype), shape, launch) for dtype, shape, launch in launches], target.profile)
    for record in out["records"]:
        record_property("compile_stats", record)
    for issue in dict.fromkeys(out["quality"]):
        warnings.warn(f"{target.op.name}[{target.impl.name}] on {target.profile.name}: {issue}",
                      CompileQualityWarning)
    if problems + out["problems"]:
        _fail(target, repro, problems + out["problems"])
    if out["unavailable"]:
        pytest.skip(NOT_SUPPORTED + "compiling with triton-xpu: "
                    + "; ".join(dict.fromkeys(out["unavailable"])))
