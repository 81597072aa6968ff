"""Compile captured launches for an Intel GPU with triton-xpu, and natively with ``ocloc``.

Runs INSIDE the Intel toolchain venv (``tox -e xpu``), where triton-xpu 3.3 has replaced
the ``triton`` package, as ``python -m triton_cts.toolchains.xpu_driver < request.json``
from the checkout's root; the main environment never imports triton-xpu. The request
(built by :func:`triton_cts.toolchains.xpu_toolchain.lower_launches`) names each launch's
kernel by module and function and describes its arguments (as for the NPU driver), plus
the target: the ocloc device name (``pvc``, ``bmg``) and the device capabilities a real
``torch.xpu`` device would report (sub-group sizes, 2D block IO, DPAS, bf16 conversions).
The answer, one JSON object on stdout, holds a verdict per launch.

Per launch:

1. import the kernel's module with the NPU driver's shims (no ``triton.knobs`` in 3.3;
   kernels only ask whether launches are captured);
2. bind stand-in arguments with the kernel's own 3.3 binder and build the ``ASTSource``
   as ``JITFunction.run`` does on a device;
3. ``triton.compile`` for ``GPUTarget("xpu", capabilities, warp_size)``: ttir, ttgir, llir
   and spv. The backend's constructor compiles a SYCL helper only to turn the SYCL
   architecture number into an ocloc device name for ``ocloc query
   CL_DEVICE_EXTENSIONS``; with no SYCL runtime here it is replaced by one that names no
   device, and the extensions come from the profile instead;
4. ``ocloc compile -spirv_input -device <arch> --format zebin`` with the build flags
   triton-xpu chose (what its runtime does at load time); the zebin's ``.ze_info`` gives
   GRF count, SIMD width, spill, private and SLM bytes
   (:func:`triton_cts.toolchains.xpu_toolchain.zebin_resources`). Without ocloc, or with
   an ocloc that does not know the device, the verdict stops at SPIR-V and says why.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import types
import warnings
from pathlib import Path

from triton_cts.toolchains.npu_driver import (_frontend_message, _install_shims, _kernel,
                                              _value)
from triton_cts.toolchains.xpu_toolchain import (OCLOC_ENV, classify_ocloc, lowering_message,
                                                 zebin_resources)


#: triton-xpu's stages, in order (add_stages of the intel backend).
STAGES = ("ttir", "ttgir", "llir", "spv")


def _no_sycl_arch_parser() -> None:
    """Replace the SYCL architecture parser the intel backend compiles in its constructor
    (it needs icpx or intel-sycl-rt and Level Zero) by one that names no device."""
    from triton.backends import backends

    parser = types.SimpleNamespace(parse_device_arch=lambda arch: "")
    backends["intel"].compiler.__init__.__globals__["compile_module_from_src"] = (
        lambda src, name: parser)


def compile_spirv(launch: dict, target: dict):
    """The CompiledKernel of one launch (asm: ttir, ttgir, llir, spv)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature
    from triton._utils import find_paths_if, get_iterable_path

    fn = _kernel(launch["module"], launch["kernel"])
    gpu = GPUTarget("xpu", dict(target["capability"]), target["warp_size"])
    backend = make_backend(gpu)
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    args = [_value(a) for a in launch["args"]]
    kwargs = {k: _value(v) for k, v in launch["kwargs"].items()}
    bound, specialization, _ = binder(*args, **kwargs)
    options = backend.parse_options(kwargs)
    sigvals = [x[0] for x in specialization]
    signature = {p.name: v for p, v in zip(fn.params, sigvals)}
    constexprs = find_paths_if(sigvals, lambda _, val: val == "constexpr")
    constexprs = {path: get_iterable_path(list(bound.values()), path) for path in constexprs}
    attrvals = [x[1] for x in specialization]
    attrs = find_paths_if(attrvals, lambda _, x: isinstance(x, str))
    attrs = {k: backend.parse_attr(get_iterable_path(attrvals, k)) for k in attrs}
    src = ASTSource(fn, signature, constexprs, attrs)
    return triton.compile(src, target=gpu, options=options.__dict__)


def ocloc_path() -> str | None:
    return os.environ.get(OCLOC_ENV) or shutil.which("ocloc")


def ocloc(spirv: bytes, device: str, flags: str, timeout: float) -> tuple[int | None, str, bytes]:
    """(exit status or None on timeout, output, zebin) of ``ocloc compile`` on the SPIR-V."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "kernel.spv"
        src.write_bytes(spirv)
        cmd = [ocloc_path(), "compile", "-file", str(src), "-spirv_input", "-device", device,
               "-output", "kernel", "-out_dir", tmp, "-output_no_suffix",
               "--format", "zebin"]
        if flags:
            cmd += ["-options", flags]
        try:
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=tmp)
        except subprocess.TimeoutExpired:
            return None, f"ocloc ran past {timeout:.0f} s", b""
        out = Path(tmp) / "kernel"
        binary = out.read_bytes() if run.returncode == 0 and out.exists() else b""
        return run.returncode, (run.stdout + run.stderr).replace(tmp, "<tmp>"), binary


def check(launch: dict, target: dict, timeout: float, keep: Path | None) -> dict:
    start = time.monotonic()
    name = f"{launch['module']}.{launch['kernel']}"
    try:
        compiled = compile_spirv(launch, target)
    except ModuleNotFoundError as exc:     # a library installed in the main environment only
        return {"status": "unavailable", "kernel": name,
                "message": f"{exc.name} is not installed in the XPU toolchain environment"}
    except Exception as exc:  # the frontend or a backend pass refused the kernel
        return {"status": "lowering_error", "kernel": name,
                "message": lowering_message(_frontend_message(exc)),
                "seconds": round(time.monotonic() - start, 2)}
    md = compiled.metadata
    verdict = {"status": "passed", "kernel": name, "stages": [s for s in STAGES if s in compiled.asm],
               "num_warps": int(md.num_warps), "threads_per_warp": int(md.threads_per_warp),
               "shared": int(md.shared or 0), "build_flags": md.build_flags,
               "spirv_bytes": len(compiled.asm["spv"]), "native": None}
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        stem = f"{launch['kernel']}-{md.hash[:16]}"
        (keep / f"{stem}.spv").write_bytes(compiled.asm["spv"])
        (keep / f"{stem}.ttgir").write_text(compiled.asm["ttgir"])
    if ocloc_path() is None:
        verdict["native_skipped"] = f"no ocloc (PATH or {OCLOC_ENV})"
    else:
        code, output, binary = ocloc(compiled.asm["spv"], target["arch"], md.build_flags,
                                     timeout)
        outcome = classify_ocloc(code, output)
        if outcome["status"] == "passed":
            verdict["native"] = zebin_resources(binary, md.name)
            verdict["stages"].append("zebin")
        elif outcome["status"] == "unknown_device":
            verdict["native_skipped"] = outcome["message"]
        else:
            verdict.update(outcome)
        if keep is not None and binary:
            (keep / f"{stem}.zebin").write_bytes(binary)
    verdict["seconds"] = round(time.monotonic() - start, 2)
    return verdict


def main() -> int:
    request = json.load(sys.stdin)
    real_stdout = sys.stdout
    sys.stdout = sys.stderr           # kernels' and the compiler's chatter stays off the answer
    warnings.simplefilter("ignore")
    os.environ.setdefault("TRITON_DISABLE_LINE_INFO", "1")
    _install_shims()
    _no_sycl_arch_parser()
    import triton

    keep = Path(request["keep"]) if request.get("keep") else None
    results = [check(launch, request["target"], request.get("timeout", 300), keep)
               for launch in request["launches"]]
    answer = {"triton": triton.__version__, "results": results}
    real_stdout.write(json.dumps(answer) + "\n")
    real_stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
