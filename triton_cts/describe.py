"""What exists: the ops the suites check and the profiles they check them under, read from
the code (the catalog's OpSpecs, the library adapters, the profiles), for
``python -m triton_cts ops [OP]``, ``python -m triton_cts profiles`` and the generated page
``docs/ops.md`` (``python -m triton_cts ops --markdown > docs/ops.md``).

An op's arguments and outputs are those of one example call: ``make_args`` on a small
drawn input (the positional arguments, then the keyword options), the float64 reference
on them (the outputs' shapes, which the suites hold an implementation to) and the
reference kernel's launcher with its launches captured, never run (the outputs' dtypes).
"""
from __future__ import annotations

import ast
import inspect
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import torch

#: The command that rewrites the generated ops page.
REGENERATE = "python -m triton_cts ops --markdown > docs/ops.md"
#: The drawn input of an example call, by its number of dims: distinct sizes, so that a
#: size of another tensor shows which of the input's dims it follows.
EXAMPLE_SHAPES = {0: (), 1: (8,), 2: (3, 8), 3: (2, 3, 8), 4: (2, 4, 16, 8)}
#: The profile the example launches are captured for (the outputs' dtypes do not depend
#: on it); the first bundled profile where it is absent.
EXAMPLE_PROFILE = "nvidia-sm90"


def _checkout_importable() -> None:
    """Reference kernels are used from the checkout (``kernels/``), as pytest's
    ``pythonpath`` makes them importable for the suites."""
    root = Path(__file__).resolve().parents[1]
    if (root / "kernels").is_dir() and str(root) not in sys.path:
        sys.path.insert(0, str(root))


# ---- ops ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Value:
    """One argument or output of the example call."""

    name: str
    shape: tuple[int, ...] | None = None   # None: not a tensor
    dtype: str | None = None
    value: str | None = None               # an option's value, or a non-tensor's repr
    follows_input: bool = False            # its dtype is the drawn input's

    def text(self) -> str:
        if self.shape is None:
            return f"{self.name} = {self.value}"
        dtype = ("the input's dtype" if self.follows_input else self.dtype) if self.dtype \
            else "dtype not known"
        return f"{self.name}: [{', '.join(map(str, self.shape))}] {dtype}"


@dataclass(frozen=True)
class Example:
    input_shape: tuple[int, ...]
    input_dtype: str
    args: tuple[Value, ...]
    options: tuple[Value, ...]
    outputs: tuple[Value, ...]
    note: str = ""


def _dtype(t: torch.dtype) -> str:
    return str(t).removeprefix("torch.")


def _input(op, dtype: torch.dtype) -> torch.Tensor:
    ndim = max(op.min_ndim, min(2, op.max_ndim))
    gen = torch.Generator().manual_seed(0)
    return torch.randn(EXAMPLE_SHAPES.get(ndim, (2,) * ndim), generator=gen,
                       dtype=torch.float64).to(dtype)


def _call(op, dtype: torch.dtype, profile):
    """(args, kwargs, float64 reference outputs, the reference kernel's outputs or None)."""
    from triton_cts.execution import launches
    from triton_cts.ops.implementation import resolve
    x = _input(op, dtype)
    args, kwargs = op.make_args(x, torch.Generator().manual_seed(0))
    up = lambda a: a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
    ref = op.reference(*(up(a) for a in args), **{k: up(v) for k, v in kwargs.items()})
    kernel_out = None
    try:
        fn = resolve(op.reference_kernel)
        with launches.capture_launches():
            kernel_out = fn(*args, **kwargs, profile=profile)
    except Exception:  # noqa: BLE001 - not importable here, or it refuses the example
        kernel_out = None  # the outputs' dtypes are then "not known"
    return x, args, kwargs, _as_tuple(ref), None if kernel_out is None else _as_tuple(kernel_out)


def _as_tuple(out) -> tuple:
    return (out,) if isinstance(out, torch.Tensor) or not isinstance(out, (tuple, list)) \
        else tuple(out)


def _parameter_names(op) -> list[str]:
    try:
        return list(inspect.signature(op.reference).parameters)
    except (TypeError, ValueError):
        return []


_TUPLE = re.compile(r"\(([A-Za-z_]\w*(?:\[?, [A-Za-z_]\w*\]?)+)\)")


def output_names(op, count: int) -> list[str]:
    """The names of the op's ``count`` outputs: from a ``(y, mean, rstd)`` in its
    description or its reference's docstring, else from a ``return y, mean, rstd`` of its
    reference, else ``out`` / ``out0, out1, ...``."""
    for text in (op.description, inspect.getdoc(op.reference) or ""):
        for group in _TUPLE.findall(" ".join(text.split())):
            names = [n.strip() for n in group.replace("[", "").replace("]", "").split(",")]
            if len(names) == count:
                return names
            if len(names) == count + 1 and "[" in group:  # an optional last output left out
                return names[:count]
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(op.reference)))
    except (OSError, TypeError, SyntaxError):
        tree = None
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Return) and node.value is not None:
            elts = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            if len(elts) == count and all(isinstance(e, ast.Name) for e in elts):
                return [e.id for e in elts]
    return ["out"] if count == 1 else [f"out{i}" for i in range(count)]


def example(op, profile) -> Example:
    """The arguments and outputs of one example call of ``op`` (see the module docstring)."""
    first = torch.float16 if torch.float16 in op.dtypes else op.dtypes[0]
    x, args, kwargs, ref, out = _call(op, first, profile)
    other = next((d for d in (torch.float32, *op.dtypes) if d != first and d.is_floating_point
                  and first.is_floating_point), None)
    other_out = _call(op, other, profile)[3:] if other is not None else None
    names = _parameter_names(op)
    arg_values = []
    for i, a in enumerate(args):
        name = names[i] if i < len(names) else f"arg{i}"
        if isinstance(a, torch.Tensor):
            arg_values.append(Value(name, tuple(a.shape), _dtype(a.dtype),
                                    follows_input=a.dtype == x.dtype and other is not None))
        else:
            arg_values.append(Value(name, value=repr(a)))
    options = tuple(Value(k, value=repr(v)) for k, v in kwargs.items())
    outputs = []
    labels = output_names(op, len(ref))
    for i, r in enumerate(ref):
        got = out[i] if out is not None and i < len(out) else None
        if not isinstance(r, torch.Tensor):
            outputs.append(Value(labels[i], value=repr(r)))
            continue
        dtype = _dtype(got.dtype) if isinstance(got, torch.Tensor) else None
        follows = False
        if dtype and other_out is not None and other_out[1] is not None \
                and i < len(other_out[1]) and isinstance(other_out[1][i], torch.Tensor):
            follows = got.dtype == first and other_out[1][i].dtype == other
        outputs.append(Value(labels[i], tuple(r.shape), dtype, follows_input=follows))
    note = ""
    if out is not None and len(out) != len(ref):
        note = (f"the reference kernel returned {len(out)} outputs for this call, the float64 "
                f"reference {len(ref)}")
    return Example(tuple(x.shape), _dtype(first), tuple(arg_values), options, tuple(outputs),
                   note)


def _function_line(fn) -> str:
    doc = inspect.getdoc(fn) or ""
    first = " ".join(doc.split("\n\n")[0].split())
    return f"`{fn.__module__}.{fn.__qualname__}`" + (f": {first}" if first else "")


def tolerance_lines(op, profiles) -> list[str]:
    """The (rtol, atol) bound per dtype, its source, and where it grows or is loosened."""
    from triton_cts.ops.tolerances import DEFAULT, OTHER_FLOAT_TOLERANCE
    lines = []
    for dtype in op.dtypes:
        if not dtype.is_floating_point:
            lines.append(f"{_dtype(dtype)}: exact")
            continue
        own = op.tolerances.get(dtype)
        rtol, atol = own or DEFAULT.get(dtype, OTHER_FLOAT_TOLERANCE)
        source = "the op's own" if own else "torch.testing's default"
        overrides = [p.name for p in profiles if p.tolerance_override(op.name, dtype)]
        extra = f"; loosened by profile(s) {', '.join(overrides)}" if overrides else ""
        lines.append(f"{_dtype(dtype)}: rtol {rtol:g}, atol {atol:g} ({source}{extra})")
    if op.tf32_tolerance:
        lines.append(f"float32 on a tf32 device: rtol {op.tf32_tolerance[0]:g}, "
                     f"atol {op.tf32_tolerance[1]:g}")
    for field, what in (("error_scale", "multiplies atol"), ("conditioning", "added to atol"),
                        ("ambiguity", "added to atol")):
        fn = getattr(op, field)
        if fn is not None:
            lines.append(f"{field} ({what}): {_function_line(fn)}")
    return lines


def libraries(op_name: str) -> list[str]:
    """``name`` or ``name (outputs 0, 1)`` for each library adapter that maps the op."""
    from triton_cts import adapters
    from triton_cts.ops import catalog
    out = []
    for impl in adapters.implementations(o.name for o in catalog.ALL_OPS):
        if impl.op == op_name:
            out.append(impl.name + (f" (outputs {', '.join(map(str, impl.outputs))} only)"
                                    if impl.outputs is not None else ""))
    return out


def all_ops():
    from triton_cts.ops import catalog
    return list(catalog.ALL_OPS)


def find_op(name: str):
    ops = {op.name: op for op in all_ops()}
    if name not in ops:
        from triton_cts.errors import UsageError, did_you_mean
        raise UsageError(f"unknown op '{name}'{did_you_mean(name, ops)}; "
                         f"`python -m triton_cts ops` lists them")
    return ops[name]


def _profiles():
    from triton_cts.profiles import load_profiles
    return load_profiles([])


def _example_profile(profiles):
    return profiles.get(EXAMPLE_PROFILE) or next(iter(profiles.values()))


def op_details(op, profiles=None) -> dict:
    """Everything ``ops OP`` says about ``op``, as labelled lines."""
    _checkout_importable()
    profiles = profiles if profiles is not None else _profiles()
    try:
        ex = example(op, _example_profile(profiles))
    except Exception as exc:  # noqa: BLE001 - a primitive whose make_args wants other input
        ex = None
        why = f"{type(exc).__name__}: {exc}"
    details = {"description": [op.description],
               "kind": ["Triton language primitive, checked by " + ", ".join(op.suites)
                        if op.primitive is not None else "op, checked by every op suite"]}
    if ex is None:
        details["example call"] = [f"not available ({why})"]
    else:
        details["example call"] = [
            f"make_args on a drawn input of shape [{', '.join(map(str, ex.input_shape))}] "
            f"({ex.input_dtype}; drawn inputs have "
            + (f"{op.min_ndim} dims)" if op.min_ndim == op.max_ndim else
               f"{op.min_ndim} to {op.max_ndim} dims)")]
        details["arguments"] = [v.text() for v in ex.args] + [v.text() for v in ex.options]
        details["outputs"] = [v.text() for v in ex.outputs] + ([ex.note] if ex.note else [])
    details["dtypes"] = [", ".join(_dtype(d) for d in op.dtypes)]
    details["tolerance"] = tolerance_lines(op, profiles.values()) if op.primitive is None \
        else [f"its language suite's own bound (suites/{op.suites[-1]}.py), not rtol/atol: "
              f"math functions the profile's [math_ulp] ULPs, the rest exact or recorded"]
    if op.relations:
        details["relations"] = [", ".join(op.relations)]
    details["reference kernel"] = [op.reference_kernel]
    if op.variants:
        details["variants"] = [f"reference/{k}: {v}" for k, v in op.variants.items()]
    if op.deterministic:
        details["deterministic"] = [", ".join(op.deterministic)]
    if op.mutates:
        details["writes in place"] = [", ".join(map(str, op.mutates))]
    if op.reference_on_cpu:
        details["reference on the CPU"] = [op.reference_on_cpu]
    if op.mode_gaps:
        details["mode gaps"] = [f"{mode} {_dtype(d)}: {why}"
                                for (mode, d), why in op.mode_gaps.items()]
    details["libraries"] = [", ".join(libraries(op.name)) or "none"]
    return details


def _summary_row(op) -> tuple[str, str, str]:
    return op.name, ", ".join(_dtype(d) for d in op.dtypes), ", ".join(libraries(op.name)) or "-"


def ops_text(name: str | None = None) -> str:
    if name is not None:
        op = find_op(name)
        lines = [op.name]
        for label, values in op_details(op).items():
            lines.append(f"  {label}:")
            lines += [f"    {v}" for v in values]
        return "\n".join(lines) + "\n"
    rows = [_summary_row(op) for op in all_ops()]
    width = max(len(r[0]) for r in rows)
    lines = [f"{'op':<{width}}  dtypes | libraries"]
    lines += [f"{n:<{width}}  {d} | {lib}" for n, d, lib in rows]
    lines.append("\n`python -m triton_cts ops OP` gives one op's arguments, outputs, "
                 "tolerance, relations, variants and libraries.")
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def ops_markdown() -> str:
    """docs/ops.md: a table of every op, then each op's details (primitives in a table)."""
    profiles = _profiles()
    ops = [op for op in all_ops() if op.primitive is None]
    prims = [op for op in all_ops() if op.primitive is not None]
    out = ["# Ops", "",
           f"Generated from the code by `{REGENERATE}`; `tests/test_describe.py` fails when it "
           "is stale. The same text per op: `python -m triton_cts ops OP`.", "",
           "Arguments and outputs are those of one example call: `make_args` on a small drawn "
           "input (positional arguments, then keyword options), the float64 reference (the "
           "output shapes an implementation must return) and the reference kernel with its "
           "launches captured (the output dtypes; the suites compare values, not dtypes). An "
           "implementation (`--impl OP=module:function`) takes the same arguments, plus "
           "`profile=` if it accepts it, and returns the outputs in this order (one output: "
           "a tensor).", "",
           "| op | dtypes | libraries |", "| --- | --- | --- |"]
    out += [f"| [`{n}`](#{n}) | {d} | {lib} |" for n, d, lib in map(_summary_row, ops)]
    for op in ops:
        out += ["", f"## {op.name}", ""]
        for label, values in op_details(op, profiles).items():
            if len(values) == 1:
                out.append(f"- {label}: {_md(values[0])}")
            else:
                out.append(f"- {label}:")
                out += [f"  - {_md(v)}" for v in values]
    out += ["", "## Triton language primitives", "",
            "Checked by the compile suite and their own language suite "
            "(`suites/test_language_*.py`); `python -m triton_cts ops NAME` gives one's "
            "example call.", "", "| primitive | what | dtypes |", "| --- | --- | --- |"]
    out += [f"| `{op.name}` | {_md(op.description)} | "
            f"{', '.join(_dtype(d) for d in op.dtypes)} |" for op in prims]
    return "\n".join(out) + "\n"


# ---- profiles ------------------------------------------------------------------------------
def profile_rows(profile_dirs=()) -> list[tuple[str, str, str, str, str]]:
    """(name, family, device, target, detection) per profile."""
    from triton_cts.profiles import load_profiles
    rows = []
    for p in sorted(load_profiles(list(profile_dirs)).values(), key=lambda p: (p.vendor, p.name)):
        target = f"{p.backend} {p.arch}, warp {p.warp_size}, {p.compute_units} compute units"
        names = ", ".join(p["detect.device_names"])
        detect = (f"an attached {p.backend} device of arch {p.arch}; a name containing "
                  f"one of {names} breaks ties")
        rows.append((p.name, p.vendor, p.data.get("description", ""), target, detect))
    return rows


def profiles_text(profile_dirs=()) -> str:
    from triton_cts.profiles.vendor_selection import REPRESENTATIVES
    lines = []
    for name, family, device, target, detect in profile_rows(profile_dirs):
        mark = " (default on a CPU-only machine)" if REPRESENTATIVES.get(family) == name else ""
        lines += [f"{name}  [{family}]{mark}", f"  device: {device}", f"  target: {target}",
                  f"  detected: {detect}"]
    lines.append("\n--vendor takes a family, a profile name, 'all' or 'auto'; "
                 "the fields of a profile: docs/profiles.md")
    return "\n".join(lines) + "\n"
