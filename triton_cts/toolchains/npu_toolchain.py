"""The Ascend toolchain environment and the lowering of captured launches with it.

triton-ascend (which replaces the ``triton`` package with a 3.2-era API) and
``bishengir-compile`` live in their own virtual environment, ``tox -e npu`` (``.tox/npu``),
or any Python named by ``TRITON_CTS_NPU_PYTHON``. The main environment never imports
them: :func:`lower_launches` describes each captured launch (:func:`launch_request`:
kernel module and function, pointer dtypes and alignment, scalar and constexpr values,
``num_warps``) and hands the batch to ``python -m triton_cts.toolchains.npu_driver`` in that
environment, which lowers each through triton-ascend's "ttir" and "ttadapter" stages
(linalg) and runs ``bishengir-compile`` on the result. Verdicts per launch
(:func:`classify_bishengir`): ``passed`` (the UB check and verifiers ran; it stopped at
"Cannot find hivmc", binary generation, which needs CANN), ``ub_overflow`` (required
against available unified-buffer bits), ``verifier`` (a bishengir error),
``lowering_error`` (triton-ascend's frontend or adapter refused the kernel) or
``timeout``. Verdicts are cached under the Triton cache folder (``triton-cts-npu/``),
keyed by the launch, the kernel's source and the toolchain's versions.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import subprocess
from pathlib import Path

from triton_cts import CHECKOUT

PYTHON_ENV = "TRITON_CTS_NPU_PYTHON"
TIMEOUT_ENV = "TRITON_CTS_NPU_TIMEOUT"
CREATE_HINT = ("create it with `tox -e npu --notest` (a venv in .tox/npu with triton-ascend "
               "3.2.0, pybind11, ascendnpu-ir 1.2.0 and CPU torch), or set "
               f"{PYTHON_ENV} to a Python that has them")


def npu_python() -> Path | None:
    explicit = os.environ.get(PYTHON_ENV)
    if explicit:
        return Path(explicit)
    candidate = CHECKOUT / ".tox" / "npu" / "bin" / "python"
    return candidate if candidate.exists() else None


_PROBE = ("import triton, ascendnpuir; from triton.backends import backends; "
          "assert 'ascend' in backends, 'no ascend backend'; "
          "from ascendnpuir.compiler import _get_compiler_path; _get_compiler_path(); "
          "print(triton.__version__, ascendnpuir.__version__)")


_VERSIONS: dict[str, str] = {}


@functools.lru_cache(maxsize=1)
def unavailable_reason() -> str | None:
    """Why kernels cannot be lowered with triton-ascend and bishengir here (None: they can)."""
    _VERSIONS.clear()
    python = npu_python()
    if python is None:
        return f"no NPU toolchain environment; {CREATE_HINT}"
    try:
        run = subprocess.run([str(python), "-c", _PROBE], capture_output=True, text=True,
                             timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot run {python}: {exc}; {CREATE_HINT}"
    if run.returncode != 0:
        last = (run.stderr.strip().splitlines() or ["no output"])[-1]
        return (f"{python} lacks triton-ascend, ascendnpu-ir or bishengir-compile ({last}); "
                f"{CREATE_HINT}")
    _VERSIONS["toolchain"] = run.stdout.strip()
    return None


def toolchain_versions() -> str:
    """``"<triton-ascend> <ascendnpu-ir>"`` of the toolchain environment ("" if none)."""
    unavailable_reason()
    return _VERSIONS.get("toolchain", "")


# --------------------------------------------------------------------------------------
# Requests: captured launches described for the driver (main environment side)
# --------------------------------------------------------------------------------------
class UnsupportedArgument(TypeError):
    """A launch argument the driver cannot stand in for (e.g. a tensor descriptor)."""


def _encode(value) -> dict:
    import torch
    import triton.language as tl

    if isinstance(value, tl.constexpr):
        value = value.value
    if isinstance(value, torch.Tensor):
        try:
            aligned = value.data_ptr() % 16 == 0
        except RuntimeError:               # storage-less tensors: allocations are aligned
            aligned = True
        return {"kind": "pointer", "dtype": str(value.dtype).removeprefix("torch."),
                "aligned": aligned}
    if isinstance(value, tl.dtype):
        return {"kind": "tl_dtype", "name": str(value)}
    if isinstance(value, torch.dtype):
        return {"kind": "torch_dtype", "name": str(value).removeprefix("torch.")}
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"kind": type(value).__name__, "value": value}
    raise UnsupportedArgument(f"cannot describe a {type(value).__name__} argument to the "
                              f"NPU driver")


def launch_request(launch) -> dict:
    """What the driver needs to rebuild ``launch`` (a captured upstream launch)."""
    fn = launch.kernel.fn
    return {"module": fn.__module__, "kernel": fn.__name__,
            "args": [_encode(a) for a in launch.args],
            "kwargs": {k: _encode(v) for k, v in launch.kwargs.items()}}


#: The driver's and this module's source: a change to either invalidates cached verdicts.
_DRIVER_KEY = hashlib.sha256(b"".join(
    (Path(__file__).parent / name).read_bytes()
    for name in ("npu_driver.py", "npu_toolchain.py"))).hexdigest()


def _cache_dir() -> Path:
    base = os.environ.get("TRITON_CACHE_DIR") or str(CHECKOUT / ".cache" / "triton")
    return Path(base) / "triton-cts-npu"


def lower_launches(launches, arch: str, keep: str | None = None,
                   timeout: float | None = None) -> list[dict]:
    """One verdict per captured launch (``status``, ``message``, ``kernel``, and for UB
    overflows ``required_bits`` / ``available_bits``), from the driver in the toolchain
    environment; cached per launch. ``keep``: a folder for the TTIR, linalg and
    bishengir output of each launch lowered now (not cached ones)."""
    reason = unavailable_reason()
    if reason is not None:
        raise RuntimeError(reason)
    timeout = float(timeout or os.environ.get(TIMEOUT_ENV, 300))
    requests = [launch_request(launch) for launch in launches]
    keys = []
    for launch, request in zip(launches, requests):
        blob = json.dumps([request, arch, launch.kernel.cache_key, toolchain_versions(),
                           _DRIVER_KEY], sort_keys=True)
        keys.append(hashlib.sha256(blob.encode()).hexdigest())
    cache = _cache_dir()
    results: list[dict | None] = []
    for key in keys:
        path = cache / f"{key}.json"
        results.append(json.loads(path.read_text()) if path.exists() and keep is None
                       else None)
    todo = list(dict.fromkeys(keys[i] for i, r in enumerate(results) if r is None))
    if todo:
        first = {key: keys.index(key) for key in todo}
        fresh = dict(zip(todo, _run_driver([requests[first[k]] for k in todo], arch, keep,
                                           timeout)))
        cache.mkdir(parents=True, exist_ok=True)
        for key, verdict in fresh.items():
            if verdict["status"] not in ("timeout", "unavailable"):
                tmp = cache / f"{key}.{os.getpid()}.tmp"
                tmp.write_text(json.dumps(verdict))
                os.replace(tmp, cache / f"{key}.json")
        results = [r if r is not None else fresh[k] for r, k in zip(results, keys)]
    return results


def _run_driver(requests: list[dict], arch: str, keep: str | None,
                timeout: float) -> list[dict]:
    payload = json.dumps({"arch": arch, "timeout": timeout, "keep": keep,
                          "launches": requests})
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(CHECKOUT),
                                                      env.get("PYTHONPATH")]))
    run = subprocess.run([str(npu_python()), "-m", "triton_cts.toolchains.npu_driver"],
                         input=payload, capture_output=True, text=True, cwd=CHECKOUT, env=env,
                         timeout=120 + timeout * len(requests))
    lines = run.stdout.strip().splitlines()
    if run.returncode != 0 or not lines:
        tail = "\n".join(run.stderr.strip().splitlines()[-15:])
        raise RuntimeError(f"the NPU driver failed (exit {run.returncode}):\n{tail}")
    return json.loads(lines[-1])["results"]

# --------------------------------------------------------------------------------------
# bishengir-compile verdicts (pure text: used by the driver in the toolchain venv and
# tested here without it)
# --------------------------------------------------------------------------------------
#: The flags triton-ascend itself passes for A2/A3 targets (besides --target).
BISHENGIR_FLAGS = ("--enable-hfusion-compile=true", "--enable-hivm-compile=true",
                   "--enable-triton-kernel-compile=true")
_UB = re.compile(r"ub overflow, requires (\d+) bits while (\d+) bits available")
_PASSED = "Cannot find hivmc"


def classify_bishengir(returncode: int | None, output: str) -> dict:
    """The verdict on one bishengir-compile run (stdout and stderr together):

    - ``passed``: it got to binary generation and stopped at "Cannot find hivmc" (the
      UB check and the verifiers ran before it), or exited 0;
    - ``ub_overflow``: ``ub overflow, requires N bits while M bits available``, with
      ``required_bits`` and ``available_bits``;
    - ``timeout``: it ran past its time (``returncode`` None);
    - ``verifier``: anything else, with the first error lines as ``message``.
    """
    m = _UB.search(output)
    if m:
        need, have = int(m.group(1)), int(m.group(2))
        return {"status": "ub_overflow", "required_bits": need, "available_bits": have,
                "message": f"ub overflow: requires {need} bits ({need // 8} bytes) while "
                           f"{have} bits ({have // 8} bytes) of unified buffer are available"}
    if returncode is None:
        return {"status": "timeout", "message": "bishengir-compile timed out: "
                                                + _tail(output)}
    if _PASSED in output or returncode == 0:
        return {"status": "passed", "message": "bishengir-compile: UB check and verifiers "
                                               "passed (stopped at binary generation)"}
    return {"status": "verifier", "message": _errors(output)}


def _errors(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if re.search(r"\berror\b", line, re.IGNORECASE)]
    text = "\n".join(dict.fromkeys(errors or lines[-5:]))
    return (text or "no output")[:2000]


def lowering_message(output: str) -> str:
    """The useful part of a frontend or triton-adapter-opt failure: the error lines,
    without the crash's stack dump and program arguments."""
    keep = []
    for line in output.splitlines():
        stripped = line.strip()
        if (not stripped or re.match(r"#\d+ 0x[0-9a-f]+", stripped)
                or stripped.startswith(("PLEASE submit", "Stack dump", "Program arguments",
                                        "0.\t", "1.\t"))):
            continue
        keep.append(stripped)
    return "\n".join(keep)[:3000] or "no output"


def _tail(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return " / ".join(lines[-3:]) or "no output"


def scalar_loops(linalg: str) -> list[str]:
    """Scalar loads inside ``scf.for`` loops in ttadapter output: the element-by-element
    copies that gathers, division offsets and other non-affine pointers lower to
    (seen in triton-ascend 3.2's ttadapter output; triton-adapter-opt tags them ``ExtractedLoadOrStore``). One
    entry per loop holding ``memref.load``s: its line, the loads' memref types, the tag.
    Vector IO (``memref.copy`` of a subview) and a grid-stride loop around it are not
    listed."""
    out: list[str] = []
    stack: list[dict] = []
    for number, raw in enumerate(linalg.splitlines(), 1):
        line = re.sub(r'\s+loc\(.*\)\s*$', "", raw).strip()
        if line.startswith("}"):
            if stack:
                block = stack.pop()
                if block["for"] and block["loads"]:
                    tag = " [ExtractedLoadOrStore]" if "ExtractedLoadOrStore" in line else ""
                    types = ", ".join(dict.fromkeys(block["loads"]))
                    out.append(f"line {block['line']}: scf.for with {len(block['loads'])} "
                               f"scalar memref.load ({types}){tag}")
            if line.endswith("{"):                   # "} else {"
                stack.append({"for": False, "line": number, "loads": []})
            continue
        m = re.search(r"memref\.load\s+%[\w.#]+\[[^\]]*\]\s*:\s*(memref<.*>)$", line)
        if m:
            loop = next((b for b in reversed(stack) if b["for"]), None)
            if loop is not None:
                loop["loads"].append(m.group(1))
        if line.endswith("{"):
            stack.append({"for": bool(re.search(r"\bscf\.for\b", line)), "line": number,
                          "loads": []})
    return out