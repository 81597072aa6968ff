"""The Intel GPU toolchain environment and the compiling of captured launches with it.

triton-xpu (Intel's fork, which replaces the ``triton`` package with a 3.3-era API) lives
in its own virtual environment, ``tox -e xpu`` (``.tox/xpu``), or any Python named by
``TRITON_CTS_XPU_PYTHON``. The main environment never imports it: :func:`lower_launches`
describes each captured launch (the NPU toolchain's :func:`launch_request`) and the
profile's device (:func:`target_request`: ocloc device name, sub-group sizes, the OpenCL
extensions triton-xpu asks the device for) and hands the batch to ``python -m
triton_cts.toolchains.xpu_driver`` in that environment. It compiles each launch to SPIR-V
(ttir, ttgir, llir, spv) and, where ``ocloc`` knows the device, to a native zebin whose
``.ze_info`` gives registers (GRF count), SIMD width, spill, private and shared local
memory bytes (:func:`zebin_resources`). ``ocloc`` is not on the package index: Debian's
``intel-opencl-icd`` package ships one (22.43: Data Center GPU Max ``pvc``, not Arc B-series
``bmg``); ``TRITON_CTS_XPU_OCLOC`` names another.

Verdicts per launch: ``passed`` (SPIR-V, and the zebin where ocloc knows the device),
``lowering_error`` (triton-xpu refused the kernel), ``ocloc_error`` (IGC refused the
SPIR-V), ``timeout``. :func:`judge` holds a verdict against the profile: threads per
work-group, shared local memory and the Xe-core's register file are limits; spills and
occupancy under the floor are quality warnings. Verdicts are cached under the Triton
cache folder (``triton-cts-xpu/``), keyed by the launch, the kernel's source, the target
and the toolchain's versions.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import struct
import subprocess
from pathlib import Path

from triton_cts import CHECKOUT
from triton_cts.toolchains.npu_toolchain import launch_request, lowering_message

PYTHON_ENV = "TRITON_CTS_XPU_PYTHON"
OCLOC_ENV = "TRITON_CTS_XPU_OCLOC"
TIMEOUT_ENV = "TRITON_CTS_XPU_TIMEOUT"
#: Launches per driver run: each run's verdicts are cached before the next starts (a
#: matmul's DPAS kernels take ocloc about 15 s each).
CHUNK = 8
CREATE_HINT = ("create it with `tox -e xpu --notest` (a venv in .tox/xpu with triton-xpu "
               f"3.3.0b1 and CPU torch), or set {PYTHON_ENV} to a Python that has them")
#: Bytes of one general register (GRF) on Xe-HPC and Xe2 (Data Center GPU Max, Arc
#: B-series): 64 (Intel oneAPI GPU optimization guide, "Xe GPU architecture").
GRF_BYTES = 64
#: OpenCL extensions (as ``ocloc query CL_DEVICE_EXTENSIONS`` lists them) mapped to the
#: device properties triton-xpu's backend reads (its ``parse_target``).
EXTENSION_PROPERTIES = {
    "cl_intel_subgroup_2d_block_io": "has_subgroup_2d_block_io",
    "cl_intel_subgroup_matrix_multiply_accumulate": "has_subgroup_matrix_multiply_accumulate",
    "cl_intel_subgroup_matrix_multiply_accumulate_tensor_float32":
        "has_subgroup_matrix_multiply_accumulate_tensor_float32",
    "cl_intel_bfloat16_conversions": "has_bfloat16_conversions",
}


def xpu_python() -> Path | None:
    explicit = os.environ.get(PYTHON_ENV)
    if explicit:
        return Path(explicit)
    candidate = CHECKOUT / ".tox" / "xpu" / "bin" / "python"
    return candidate if candidate.exists() else None


_PROBE = """\
import os, shutil, subprocess, tempfile, json, triton
from triton.backends import backends
assert 'intel' in backends, 'no intel backend'
ocloc, version = os.environ.get('{env}') or shutil.which('ocloc'), ''
if ocloc:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([ocloc, 'query', 'OCL_DRIVER_VERSION'], cwd=tmp, capture_output=True)
        path = os.path.join(tmp, 'OCL_DRIVER_VERSION')
        version = open(path).read().strip() if os.path.exists(path) else 'unknown'
print(json.dumps({{'triton': triton.__version__, 'ocloc': ocloc or '', 'ocloc_version': version}}))
""".format(env=OCLOC_ENV)

_VERSIONS: dict[str, dict] = {}


@functools.lru_cache(maxsize=1)
def unavailable_reason() -> str | None:
    """Why kernels cannot be compiled with triton-xpu here (None: they can)."""
    _VERSIONS.clear()
    python = xpu_python()
    if python is None:
        return f"no XPU toolchain environment; {CREATE_HINT}"
    try:
        run = subprocess.run([str(python), "-c", _PROBE], capture_output=True, text=True,
                             timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot run {python}: {exc}; {CREATE_HINT}"
    if run.returncode != 0:
        last = (run.stderr.strip().splitlines() or ["no output"])[-1]
        return f"{python} lacks triton-xpu ({last}); {CREATE_HINT}"
    _VERSIONS["toolchain"] = json.loads(run.stdout.strip().splitlines()[-1])
    return None


def toolchain_versions() -> dict:
    """``{"triton": ..., "ocloc": path or "", "ocloc_version": ...}`` ({} if none)."""
    unavailable_reason()
    return dict(_VERSIONS.get("toolchain", {}))


# --------------------------------------------------------------------------------------
# Requests (main environment side)
# --------------------------------------------------------------------------------------
def target_request(profile) -> dict:
    """The device a real ``torch.xpu`` device would describe to triton-xpu
    (``GPUTarget("xpu", capabilities, 32)``), from the profile."""
    extensions = set(profile["target"].get("extensions", ()))
    sub_groups = list(profile["target"].get("sub_group_sizes", ()))
    if not sub_groups:
        raise ValueError(f"profile {profile.name}: target.sub_group_sizes is required for "
                         f"the xpu backend")
    capability = {"architecture": 0, "name": profile.description,
                  "sub_group_sizes": sub_groups,
                  "max_work_group_size": profile["limits.max_threads_per_block"],
                  "max_num_sub_groups": profile["limits.max_threads_per_block"] // min(sub_groups),
                  "has_fp64": "float64" in profile["dtypes.supported"]}
    for ext, prop in EXTENSION_PROPERTIES.items():
        capability[prop] = ext in extensions
    return {"arch": profile.arch, "warp_size": profile.warp_size, "capability": capability}


@functools.lru_cache(maxsize=1)
def _driver_key() -> str:
    """The source of what makes a verdict (the drivers, the ocloc and zebin readers): a
    change to it invalidates cached verdicts; a change to the judging does not."""
    import inspect
    parts = [(Path(__file__).parent / name).read_bytes()
             for name in ("xpu_driver.py", "npu_driver.py")]
    parts += [inspect.getsource(fn).encode() for fn in
              (classify_ocloc, elf_sections, zeinfo_kernels, zebin_resources)]
    parts.append(repr(RESOURCE_DEFAULTS).encode())
    return hashlib.sha256(b"".join(parts)).hexdigest()


def _cache_dir() -> Path:
    base = os.environ.get("TRITON_CACHE_DIR") or str(CHECKOUT / ".cache" / "triton")
    return Path(base) / "triton-cts-xpu"


def lower_launches(launches, profile, keep: str | None = None,
                   timeout: float | None = None) -> list[dict]:
    """One verdict per captured launch, from the driver in the toolchain environment;
    cached per launch. ``keep``: a folder for the SPIR-V, TTGIR and zebin of each launch
    compiled now (not cached ones)."""
    reason = unavailable_reason()
    if reason is not None:
        raise RuntimeError(reason)
    timeout = float(timeout or os.environ.get(TIMEOUT_ENV, 300))
    target = target_request(profile)
    requests = [launch_request(launch) for launch in launches]
    keys = []
    for launch, request in zip(launches, requests):
        blob = json.dumps([request, target, launch.kernel.cache_key, toolchain_versions(),
                           _driver_key()], sort_keys=True)
        keys.append(hashlib.sha256(blob.encode()).hexdigest())
    cache = _cache_dir()
    results: list[dict | None] = []
    for key in keys:
        path = cache / f"{key}.json"
        results.append(json.loads(path.read_text()) if path.exists() and keep is None
                       else None)
    todo = list(dict.fromkeys(keys[i] for i, r in enumerate(results) if r is None))
    fresh: dict[str, dict] = {}
    cache.mkdir(parents=True, exist_ok=True)
    for start in range(0, len(todo), CHUNK):      # cached as they come: ocloc is slow
        chunk = todo[start:start + CHUNK]
        verdicts = _run_isolated([requests[keys.index(k)] for k in chunk], target, keep,
                                 timeout)
        for key, verdict in zip(chunk, verdicts):
            fresh[key] = verdict
            if verdict["status"] not in ("timeout", "unavailable"):
                tmp = cache / f"{key}.{os.getpid()}.tmp"
                tmp.write_text(json.dumps(verdict))
                os.replace(tmp, cache / f"{key}.json")
    return [r if r is not None else fresh[k] for r, k in zip(results, keys)]


def _run_isolated(requests: list[dict], target: dict, keep: str | None,
                  timeout: float) -> list[dict]:
    """The driver's verdicts; where the driver dies (triton-xpu aborts the process on some
    kernels, e.g. "Unexpected llvm intrinsic: llvm.fma.bf16" in its SPIR-V translator),
    each launch again on its own, and the one that kills it is a lowering error."""
    try:
        return _run_driver(requests, target, keep, timeout)
    except RuntimeError as exc:
        if len(requests) > 1:
            return [v for r in requests for v in _run_isolated([r], target, keep, timeout)]
        return [{"status": "lowering_error", "kernel": requests[0]["kernel"],
                 "message": lowering_message(str(exc))}]


def _run_driver(requests: list[dict], target: dict, keep: str | None,
                timeout: float) -> list[dict]:
    payload = json.dumps({"target": target, "timeout": timeout, "keep": keep,
                          "launches": requests})
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(CHECKOUT),
                                                      env.get("PYTHONPATH")]))
    run = subprocess.run([str(xpu_python()), "-m", "triton_cts.toolchains.xpu_driver"],
                         input=payload, capture_output=True, text=True, cwd=CHECKOUT, env=env,
                         timeout=120 + timeout * len(requests))
    lines = run.stdout.strip().splitlines()
    if run.returncode != 0 or not lines:
        tail = "\n".join(run.stderr.strip().splitlines()[-15:])
        raise RuntimeError(f"the XPU driver failed (exit {run.returncode}):\n{tail}")
    return json.loads(lines[-1])["results"]


# --------------------------------------------------------------------------------------
# ocloc output and zebin resources (pure: used by the driver in the toolchain venv and
# tested here without it)
# --------------------------------------------------------------------------------------
_UNKNOWN_DEVICE = re.compile(r"Cannot get HW Info for device ([\w.-]*\w)|"
                             r"Invalid device: ([\w.-]*\w)|"
                             r"Could not determine device target: ([\w.-]*\w)")


def classify_ocloc(returncode: int | None, output: str) -> dict:
    """The verdict on one ``ocloc compile`` run (its output):

    - ``passed``: exit 0 ("Build succeeded");
    - ``unknown_device``: this ocloc has no such device (too old for it);
    - ``timeout``: it ran past its time (``returncode`` None);
    - ``ocloc_error``: anything else, with the error lines as ``message``.
    """
    m = _UNKNOWN_DEVICE.search(output)
    if m:
        device = next(g for g in m.groups() if g)
        return {"status": "unknown_device",
                "message": f"this ocloc does not know device '{device}' (an ocloc from a "
                           f"newer Intel compute runtime does)"}
    if returncode is None:
        return {"status": "timeout", "message": output.strip() or "ocloc timed out"}
    if returncode == 0:
        return {"status": "passed", "message": "ocloc: build succeeded"}
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if re.search(r"error", line, re.IGNORECASE)]
    text = "\n".join(dict.fromkeys(errors or lines[-5:]))
    return {"status": "ocloc_error",
            "message": f"ocloc exit {returncode}: " + (text or "no output")[:2000]}


def elf_sections(data: bytes) -> dict[str, bytes]:
    """Section name -> contents of a little-endian 64-bit ELF file (a zebin)."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a little-endian 64-bit ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
               for i in range(shnum)]
    strtab = headers[shstrndx]
    names = data[strtab[4]:strtab[4] + strtab[5]]
    out = {}
    for name_off, _, _, _, offset, size, *_ in headers:
        name = names[name_off:names.index(b"\0", name_off)].decode()
        out[name] = data[offset:offset + size]
    return out


def zeinfo_kernels(text: str) -> dict[str, dict]:
    """Kernel name -> its ``execution_env`` attributes, from a ``.ze_info`` section (the
    YAML of IGC's zeinfo spec; only the scalar attributes are read)."""
    kernels: dict[str, dict] = {}
    section = current = env_indent = None
    for raw in text.splitlines():
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        line = raw.strip()
        if indent == 0:
            section, current, env_indent = line.rstrip(":"), None, None
            continue
        if section != "kernels":
            continue
        m = re.match(r"-\s+name:\s*(\S+)", line)
        if m:
            current, env_indent = kernels.setdefault(m.group(1).strip("'\""), {}), None
            continue
        if env_indent is not None and indent <= env_indent:
            env_indent = None
        if line == "execution_env:":
            env_indent = indent
            continue
        if env_indent is not None and current is not None:
            key, _, value = line.partition(":")
            value = value.strip()
            current[key.strip()] = (value == "true" if value in ("true", "false")
                                    else int(value) if re.fullmatch(r"-?\d+", value)
                                    else value)
    return kernels


#: execution_env attributes read, with the spec's defaults where absent.
RESOURCE_DEFAULTS = {"grf_count": None, "simd_size": None, "spill_size": 0, "private_size": 0,
                     "slm_size": 0, "barrier_count": 0, "has_dpas": False}


def zebin_resources(binary: bytes, kernel: str) -> dict:
    """Registers and memory of ``kernel`` in a zebin: GRF count, SIMD width, spill and
    private bytes per thread, SLM bytes per work-group, barriers, DPAS use."""
    sections = elf_sections(binary)
    if ".ze_info" not in sections:
        raise ValueError("the zebin has no .ze_info section")
    kernels = zeinfo_kernels(sections[".ze_info"].decode(errors="replace"))
    if kernel not in kernels:
        raise ValueError(f"no kernel {kernel} in .ze_info (has {', '.join(kernels)})")
    env = kernels[kernel]
    missing = [k for k, v in RESOURCE_DEFAULTS.items() if v is None and k not in env]
    if missing:
        raise ValueError(f".ze_info of {kernel} lacks required {', '.join(missing)}")
    return {k: env.get(k, default) for k, default in RESOURCE_DEFAULTS.items()}


# --------------------------------------------------------------------------------------
# Verdicts against the profile
# --------------------------------------------------------------------------------------
def judge(verdict: dict, profile) -> tuple[dict, list[str], list[str]]:
    """(compile_stats fields, limit violations, quality issues) of a passed verdict.

    Limits: work-group size (num_warps x the sub-group size triton-xpu chose) over
    ``limits.max_threads_per_block``; shared local memory (Triton's, or the zebin's) over
    ``limits.shared_memory_per_block``; a work-group whose threads' registers do not fit
    in one Xe-core (``limits.registers_per_sm``, 32-bit registers). Quality: spill or
    private memory; occupancy (threads resident per vector engine) under
    ``compile.min_occupancy_waves``."""
    native = verdict.get("native") or {}
    warps, width = verdict["num_warps"], verdict["threads_per_warp"]
    shared = max(verdict["shared"], native.get("slm_size", 0))
    stats = {"num_warps": warps, "threads_per_warp": width, "threads_per_block": warps * width,
             "shared": shared, "stages": verdict["stages"],
             "build_flags": verdict["build_flags"]}
    violations, quality = [], []
    max_threads = profile["limits.max_threads_per_block"]
    if warps * width > max_threads:
        violations.append(f"num_warps {warps} x sub-group size {width} = {warps * width} "
                          f"work-items > limits.max_threads_per_block {max_threads}")
    max_shared = profile["limits.shared_memory_per_block"]
    if shared > max_shared:
        violations.append(f"{shared} bytes of shared local memory > "
                          f"limits.shared_memory_per_block {max_shared}")
    if not native:
        return stats, violations, quality
    grf = native["grf_count"]
    stats.update(registers=grf, simd_size=native["simd_size"], spills=native["spill_size"],
                 scratch=native["private_size"], has_dpas=native["has_dpas"])
    comp = profile["compile"]
    per_thread = grf * GRF_BYTES // 4
    resident = profile["limits.registers_per_sm"] // per_thread      # threads per Xe-core
    if warps > resident:
        violations.append(f"{warps} sub-groups x {grf} registers of {GRF_BYTES} bytes need "
                          f"{warps * per_thread} 32-bit registers > limits.registers_per_sm "
                          f"{profile['limits.registers_per_sm']}")
    by_slm = comp["shared_memory_per_cu"] // shared if shared else comp["max_blocks_per_cu"]
    groups = min(comp["max_blocks_per_cu"], resident // max(warps, 1), by_slm)
    occupancy = round(min(groups * warps, resident) / comp["simds_per_cu"], 2)
    stats["occupancy"] = occupancy
    if native["spill_size"] or native["private_size"]:
        quality.append(f"spills {native['spill_size']} bytes, private memory "
                       f"{native['private_size']} bytes per thread ({grf} registers)")
    floor = comp["min_occupancy_waves"]
    if occupancy < floor and not violations:
        quality.append(f"occupancy {occupancy} threads per vector engine < "
                       f"compile.min_occupancy_waves {floor} ({grf} registers, "
                       f"{shared} bytes shared local memory)")
    return stats, violations, quality


def check_launches(items, profile) -> dict:
    """Compile ``items`` ((dtype name, shape, launch) each) for ``profile`` and judge them:
    ``records`` (one ``compile_stats`` dict per launch), ``problems`` (failures),
    ``quality`` (warnings), ``unavailable`` (launches the toolchain could not import) and
    ``native_skipped`` (why no zebin, where none was built)."""
    out = {"records": [], "problems": [], "quality": [], "unavailable": [],
           "native_skipped": []}
    if not items:
        return out
    verdicts = lower_launches([launch for _, _, launch in items], profile)
    for (dtype, shape, launch), verdict in zip(items, verdicts):
        config = ", ".join(f"{k}={v}" for k, v in launch.kwargs.items())
        where = f"{dtype} {shape}: {launch.name} [{config}]"
        record = {"kernel": launch.name, "target": f"xpu:{profile.arch}", "config": config,
                  "compile": verdict["status"], "profile": profile.name, "dtype": dtype,
                  "shape": list(shape)}
        status = verdict["status"]
        if status == "unavailable":
            out["unavailable"].append(f"{where}: {verdict['message']}")
        elif status != "passed":
            stage = ("triton-xpu lowering to SPIR-V failed" if status == "lowering_error"
                     else f"ocloc {status}")
            out["problems"].append(f"{where}: {stage}: "
                                   + verdict["message"].replace("\n", "\n    "))
        else:
            stats, violations, quality = judge(verdict, profile)
            record.update(stats, violations=violations, quality=quality)
            if verdict.get("native_skipped"):
                record["native_skipped"] = verdict["native_skipped"]
                out["native_skipped"].append(verdict["native_skipped"])
            out["problems"] += [f"{where}: {v}" for v in violations]
            out["quality"] += [f"{where}: {q}" for q in quality]
        out["records"].append(record)
    return out


__all__ = ["check_launches", "xpu_python", "unavailable_reason", "toolchain_versions", "target_request",
           "lower_launches", "classify_ocloc", "elf_sections", "zeinfo_kernels",
           "zebin_resources", "judge", "lowering_message"]
