"""Lower captured launches with triton-ascend and check them with ``bishengir-compile``.

Runs INSIDE the Ascend toolchain venv (``tox -e npu``), where triton-ascend 3.2 has
replaced the ``triton`` package, as ``python -m triton_cts.toolchains.npu_driver < request.json``
from the checkout's root; the main environment never imports triton-ascend. The request
(built by :func:`triton_cts.toolchains.npu_toolchain.launch_request`) names each launch's kernel by
module and function and describes its arguments (pointer dtypes and 16-byte alignment,
scalar values, constexprs, ``num_warps``); the answer, one JSON object on stdout, holds a
verdict per launch (:func:`triton_cts.toolchains.npu_toolchain.classify_bishengir`).

Per launch:

1. import the kernel's module with shims for the 3.2 API (a stub ``triton.knobs`` whose
   interpreter knob is off, a stub ``triton_cts.execution.launches`` that never captures: kernels
   use both only in their launchers, which do not run here);
2. bind stand-in arguments with the kernel's own 3.2 binder and build the ``ASTSource``
   the 3.2 way (signature by name, constants by name, ``AscendAttrsDescriptor`` from the
   values), as ``JITFunction.run`` would on a device;
3. run the ascend backend's stages by hand: ``ttir``, then ``ttadapter`` (triton-ascend's
   ``triton-adapter-opt`` to linalg/memref); the next stage would ask for the CANN
   runtime, so it is replaced by
4. ``bishengir-compile --target=<arch> --enable-hfusion-compile=true
   --enable-hivm-compile=true --enable-triton-kernel-compile=true`` on the linalg with
   ``mix_mode`` stripped, with a timeout. It runs the UB check and the verifiers and
   stops at "Cannot find hivmc" (no binary generation without CANN): that is a pass.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
import types
import warnings
from pathlib import Path

from triton_cts.toolchains.npu_toolchain import (BISHENGIR_FLAGS, classify_bishengir,
                                                 lowering_message, scalar_loops)


def _install_shims() -> None:
    import triton

    if "triton.knobs" not in sys.modules and not hasattr(triton, "knobs"):
        knobs = types.ModuleType("triton.knobs")
        knobs.runtime = types.SimpleNamespace(interpret=False)
        sys.modules["triton.knobs"] = knobs
        triton.knobs = knobs
    # triton_cts.execution.launches patches upstream's JITFunction and imports the
    # interpreter (numpy); kernels only ask it whether launches are being captured.
    if "triton_cts.execution.launches" not in sys.modules:
        stub = types.ModuleType("triton_cts.execution.launches")
        stub.capturing = lambda: False
        stub.interpreted = lambda on=True: contextlib.nullcontext()
        stub.record_launches = contextlib.nullcontext
        stub.capture_launches = contextlib.nullcontext
        sys.modules["triton_cts.execution.launches"] = stub
        import triton_cts.execution
        triton_cts.execution.launches = stub


class _Pointer:
    """A stand-in tensor for the binder: its dtype and whether it is 16-byte aligned."""

    def __init__(self, dtype, aligned: bool):
        self.dtype = dtype
        self._ptr = 0 if aligned else 8

    def data_ptr(self) -> int:
        return self._ptr


def _value(spec):
    import torch
    import triton.language as tl

    kind = spec["kind"]
    if kind == "pointer":
        return _Pointer(getattr(torch, spec["dtype"]), spec["aligned"])
    if kind == "tl_dtype":                   # "fp32", "bf16": the names tl.dtype takes
        return tl.dtype(spec["name"])
    if kind == "torch_dtype":
        return getattr(torch, spec["name"])
    return spec["value"]


def _kernel(module_name: str, name: str):
    from triton.runtime.jit import JITFunction

    module = importlib.import_module(module_name)
    obj = getattr(module, name, None)
    while obj is not None and not isinstance(obj, JITFunction):
        obj = getattr(obj, "fn", None)              # Autotuner, Heuristics
    if obj is None:                                  # defined under another name
        found = [v for v in vars(module).values()
                 if isinstance(v, JITFunction) and v.fn.__name__ == name]
        obj = found[0] if found else None
    if obj is None:
        raise LookupError(f"no @triton.jit function {name} in {module_name}")
    return obj


def lower(launch: dict, arch: str) -> tuple[str, str]:
    """(TTIR, linalg) of one launch through triton-ascend's ttir and ttadapter stages."""
    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend

    fn = _kernel(launch["module"], launch["kernel"])
    target = GPUTarget("npu", arch, 0)
    backend = make_backend(target)
    fn.create_binder(backend)
    args = [_value(a) for a in launch["args"]]
    kwargs = {k: _value(v) for k, v in launch["kwargs"].items()}
    bound, sig_and_spec, _, _, _ = fn.binder(*args, **kwargs)
    options = backend.parse_options(kwargs)
    sigkeys = [fn.params[i].name for i in fn.non_constexpr_indices]
    signature = {k: ("*i8" if v == "none" else v)
                 for k, v in zip(sigkeys, sig_and_spec[:len(sigkeys)])}
    values = tuple(bound.values())
    attrs = backend.get_attrs_descriptor(fn.params, values)
    constant_params = attrs.get_constants()
    constants = {p.name: v for v, p in zip(values, fn.params)
                 if p.is_constexpr or p.num in constant_params or v is None}
    src = ASTSource(fn, signature, constants, attrs)
    metadata = {"hash": src.hash(), "target": target, **options.__dict__}
    stages: dict = {}
    backend.add_stages(stages, options)
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    module = src.make_ir(options, backend.get_codegen_implementation(),
                         backend.get_module_map(), context)
    module = stages["ttir"](module, metadata)
    ttir = str(module)
    return ttir, stages["ttadapter"](module, metadata)


def bishengir(linalg: str, arch: str, timeout: float) -> tuple[int | None, str]:
    """(exit status or None on timeout, output) of bishengir-compile on the linalg."""
    from ascendnpuir.compiler import _get_compiler_path

    linalg = re.sub(r',\s*mix_mode\s*=\s*"[^"]*"', "", linalg)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "kernel.ttadapter.mlir"
        src.write_text(linalg)
        cmd = [str(_get_compiler_path()), str(src), f"--target={arch}", *BISHENGIR_FLAGS,
               "-o", str(Path(tmp) / "kernel")]
        try:
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                 cwd=tmp)
        except subprocess.TimeoutExpired as exc:
            out = (exc.stdout or b"") + (exc.stderr or b"")
            return None, out.decode(errors="replace") if isinstance(out, bytes) else out
    return run.returncode, (run.stdout + run.stderr).replace(tmp, "<tmp>")


def _snippet(exc: BaseException) -> str:
    """A CompilationError's location and the source line it points at, without the
    nested errors it repeats."""
    lines = str(exc).splitlines()
    caret = next((i for i, line in enumerate(lines) if line.strip() == "^"), None)
    if caret is None or caret < 2:
        return lines[0] if lines else ""
    return f"{lines[0]} {lines[caret - 1].strip()}"


def _frontend_message(exc: BaseException) -> str:
    """The kernel's line (outermost CompilationError), the innermost Triton source line
    and the error that started it: the frontend nests each callee's error as text."""
    chain = []
    while exc is not None and exc not in chain:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    inner = chain[-1]
    located = [e for e in chain if type(e).__name__ == "CompilationError"]
    parts = []
    if located:
        parts.append(f"{located[0].__class__.__name__} {_snippet(located[0])}")
        if located[-1] is not located[0]:
            parts.append(f"... in a callee: {_snippet(located[-1])}")
    parts.append("".join(traceback.format_exception_only(type(inner), inner)).strip())
    return "\n".join(parts)


def check(launch: dict, arch: str, timeout: float, keep: Path | None) -> dict:
    start = time.monotonic()
    name = f"{launch['module']}.{launch['kernel']}"
    try:
        ttir, linalg = lower(launch, arch)
    except ModuleNotFoundError as exc:     # a library installed in the main environment only
        if exc.name and launch["module"].split(".")[0] == exc.name.split(".")[0]:
            return {"status": "unavailable", "kernel": name,
                    "message": f"{exc.name} is not installed in the NPU toolchain environment"}
        return {"status": "lowering_error", "kernel": name, "message": str(exc)}
    except Exception as exc:  # the frontend or the adapter refused the kernel
        detail = getattr(exc, "stderr", None)
        detail = detail.decode(errors="replace") if isinstance(detail, bytes) else detail
        text = (detail or "").strip() or _frontend_message(exc)
        return {"status": "lowering_error", "kernel": name, "message": lowering_message(text),
                "seconds": round(time.monotonic() - start, 2)}
    code, output = bishengir(linalg, arch, timeout)
    verdict = classify_bishengir(code, output)
    verdict.update(kernel=name, seconds=round(time.monotonic() - start, 2),
                   scalar_loops=scalar_loops(linalg))
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        stem = hashlib.sha256(linalg.encode()).hexdigest()[:16]
        (keep / f"{launch['kernel']}-{stem}.ttir.mlir").write_text(ttir)
        (keep / f"{launch['kernel']}-{stem}.ttadapter.mlir").write_text(linalg)
        (keep / f"{launch['kernel']}-{stem}.bishengir.txt").write_text(output)
        verdict["linalg_path"] = str(keep / f"{launch['kernel']}-{stem}.ttadapter.mlir")
    return verdict


def main() -> int:
    request = json.load(sys.stdin)
    real_stdout = sys.stdout
    sys.stdout = sys.stderr           # kernels' and the compiler's chatter stays off the answer
    warnings.simplefilter("ignore")
    os.environ.setdefault("TRITON_DISABLE_LINE_INFO", "1")
    _install_shims()
    import triton

    keep = Path(request["keep"]) if request.get("keep") else None
    results = [check(launch, request["arch"], request.get("timeout", 300), keep)
               for launch in request["launches"]]
    answer = {"triton": triton.__version__, "results": results}
    real_stdout.write(json.dumps(answer) + "\n")
    real_stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
