"""IO-pattern lint over a kernel's TTIR, with rules taken from the profile.

SIMD-style NPUs (triton-ascend) lower a kernel's loads and stores very differently from
GPUs (seen lowering tests/planted/npu_io_faults.py through triton-ascend 3.2, as
tests/test_npu_toolchain.py does): a contiguous mask (``offs < n``) becomes a sub-range copy,
but a discrete mask becomes load-everything-then-select (masked-off addresses are read),
a load through a broadcast pointer tensor crashes the adapter or becomes a scalar loop,
and offsets from integer division or from loaded data (gathers) become scalar loops.
The lint reads the TTIR (upstream Triton's, which any machine can produce) and flags:

=======================  ==============================================  ==================
rule                     pattern                                         applies when
=======================  ==============================================  ==================
``dtype``                a pointer or tensor element type the profile    always
                         lacks (``dtypes.supported``)
``discrete-mask``        a load/store mask that is not a conjunction of  ``io.load =
                         ``offsets <cmp> bound`` comparisons             "select"``
``division-offsets``     offsets from integer division or remainder      ``io.load =
                                                                         "select"``
``gather``               offsets from loaded data                        ``io.load =
                                                                         "select"``
``program-id-yz``        ``tl.program_id(1|2)``: the NPU flattens grids  ``io.load =
                         and wants one program per core                  "select"``
``broadcast-pointer``    a load whose pointer tensor does not vary       ``io.row_constants
                         along a dimension longer than 1                 = "slice_broadcast"``
=======================  ==============================================  ==================

The analysis follows SSA definitions in the printed TTIR (after Triton's inliner, so
helpers are included); loop-carried values stand for their initial value.
"""
from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from triton_cts.profiles import Profile

#: TTIR element types -> the torch dtype names they may stand for (ints are signless).
ELEMENT_TYPES = {
    "f64": ("float64",), "f32": ("float32",), "f16": ("float16",), "bf16": ("bfloat16",),
    "i1": ("bool",), "i8": ("int8", "uint8"), "i16": ("int16", "uint16"),
    "i32": ("int32", "uint32"), "i64": ("int64", "uint64"),
    "f8E4M3FN": ("float8_e4m3fn",), "f8E5M2": ("float8_e5m2",),
    "f8E4M3FNUZ": ("float8_e4m3fnuz",), "f8E5M2FNUZ": ("float8_e5m2fnuz",),
}
_ORDER_PREDICATES = {"slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge"}
_PASS_THROUGH = {"tt.broadcast", "tt.expand_dims", "arith.extsi", "arith.extui",
                 "arith.trunci", "arith.index_cast", "tt.bitcast", "arith.bitcast"}
_LINEAR = {"arith.addi", "arith.subi", "tt.addptr", "arith.minsi", "arith.maxsi",
           "arith.minui", "arith.maxui", "arith.select"}
_DIVISION = {"arith.divsi", "arith.divui", "arith.remsi", "arith.remui", "arith.floordivsi",
             "arith.ceildivsi", "arith.ceildivui"}


@dataclass(frozen=True)
class Op:
    name: str                   # "tt.load"
    operands: tuple[str, ...]   # SSA names, in order
    result_type: str            # "tensor<128x!tt.ptr<f32>>", "i32"
    text: str                   # the line, for attributes (axis, predicate)


def upstream_ttir(launch) -> str:
    """TTIR of a captured launch through an upstream backend (no code generation), cached
    beside Triton's own cache under Triton's cache key."""
    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend

    from triton._C.libtriton import get_cache_invalidating_env_vars
    from triton.runtime.cache import get_cache_key

    from triton_cts.toolchains.cross_compile import specialize, use_project_cache
    from triton_cts.execution.modes import _upstream_backends

    available = _upstream_backends()
    target = (GPUTarget("cuda", 80, 32) if "cuda" in available
              else GPUTarget("hip", "gfx942", 64))
    src, options = specialize(launch, target)
    backend = make_backend(target)
    options = backend.parse_options(options)
    key = get_cache_key(src, backend, options, env_vars=get_cache_invalidating_env_vars())
    path = (Path(use_project_cache()) / "triton-cts-ttir"
            / f"{hashlib.sha256(key.encode()).hexdigest()}.ttir")
    if path.exists():
        return path.read_text()
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    module = src.make_ir(target, options, backend.get_codegen_implementation(options),
                         backend.get_module_map(), context)
    stages: dict = {}
    backend.add_stages(stages, options, src.language)
    ttir = str(stages["ttir"](module, {"target": target, **options.__dict__}))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(ttir)
    os.replace(tmp, path)            # atomic: xdist workers may write the same entry
    return ttir


# --------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------
_DEF = re.compile(r"^\s*(%[\w.$-]+)(?::\d+)?\s*=\s*(\"?[\w.]+\"?)(.*)$")
_FOR = re.compile(r"^\s*(?:(%[\w.$-]+)(?::\d+)?\s*=\s*)?scf\.for\s+(%[\w.$-]+)\s*=")
_ITER = re.compile(r"(%[\w.$-]+)\s*=\s*(%[\w.$-]+)")


def parse(ttir: str) -> tuple[dict[str, Op], list[Op], dict[str, str]]:
    """(definitions by SSA name, loads and stores and program ids in order, loop-carried
    block arguments -> their initial values).

    Sibling regions may reuse a name (Triton names values after the source variable, so
    two loops that both assign ``cols`` print ``%cols`` twice): names are scoped by the
    region braces, and a redefinition gets a unique name (``%cols@2``) that its uses in
    that region resolve to."""
    defs: dict[str, Op] = {}
    uses: list[Op] = []
    aliases: dict[str, str] = {}
    scopes: list[dict[str, str]] = [{}]
    seen: dict[str, int] = {}

    def declare(name: str) -> str:
        seen[name] = seen.get(name, 0) + 1
        unique = name if seen[name] == 1 else f"{name}@{seen[name]}"
        scopes[-1][name] = unique
        return unique

    def resolve(operand: str) -> str:
        base, _, index = operand.partition("#")
        for scope in reversed(scopes):
            if base in scope:
                return scope[base] + (f"#{index}" if index else "")
        return operand

    for raw in ttir.splitlines():
        line = re.sub(r"\s+loc\(.*\)\s*$", "", raw)
        stripped = line.strip()
        if stripped.startswith("}") and len(scopes) > 1:
            scopes.pop()
        opens_region = stripped.endswith("{")
        m = _FOR.match(line)
        if m:
            if m.group(1):
                declare(m.group(1))
            inits = []
            if "iter_args(" in line:
                inner = line.split("iter_args(", 1)[1].split(")", 1)[0]
                inits = [(arg, resolve(init)) for arg, init in _ITER.findall(inner)]
            scopes.append({})
            declare(m.group(2))                     # the induction variable
            for arg, init in inits:
                aliases[declare(arg)] = init
            continue
        m = _DEF.match(line)
        if m:
            name, opname, rest = m.group(1), m.group(2).strip('"'), m.group(3)
            op = _make_op(opname, rest, line)
            op = Op(op.name, tuple(resolve(o) for o in op.operands), op.result_type, op.text)
            defs[declare(name)] = op
            if opname == "tt.get_program_id":
                uses.append(op)
        elif stripped.startswith("tt.store "):
            op = _make_op("tt.store", stripped[len("tt.store"):], line)
            uses.append(Op(op.name, tuple(resolve(o) for o in op.operands), op.result_type,
                           op.text))
        if opens_region:
            scopes.append({})
    uses = [defs_op for defs_op in _loads(defs)] + uses
    return defs, uses, aliases


def _loads(defs: dict[str, Op]) -> list[Op]:
    return [op for op in defs.values() if op.name == "tt.load"]


def _make_op(name: str, rest: str, line: str) -> Op:
    body = rest.split(" : ", 1)[0] if " : " in rest else rest
    body = re.sub(r"\{[^{}]*\}", "", body)          # drop attribute dictionaries
    operands = tuple(re.findall(r"%[\w.$-]+(?:#\d+)?", body))
    types = rest.rsplit(" : ", 1)[1] if " : " in rest else ""
    result = types.rsplit("->", 1)[1].strip() if "->" in types else types.split(",")[0].strip()
    return Op(name, tuple(o.split("#")[0] for o in operands), result, line)


def shape_of(type_str: str) -> tuple[int, ...]:
    m = re.match(r"tensor<((?:\d+x)+)", type_str)
    return tuple(int(d) for d in m.group(1).rstrip("x").split("x")) if m else ()


# --------------------------------------------------------------------------------------
# Analyses: how values vary across lanes
# --------------------------------------------------------------------------------------
class _Analysis:
    def __init__(self, ttir: str):
        self.defs, self.uses, self.aliases = parse(ttir)
        self._kind: dict[str, str] = {}
        self._vary: dict[str, frozenset] = {}

    def _def(self, name: str) -> Op | None:
        seen = set()
        while name in self.aliases and name not in seen:
            seen.add(name)
            name = self.aliases[name]
        return self.defs.get(name)

    def kind(self, name: str, depth: int = 0) -> str:
        """How an integer value is built: 'uniform' (same in every lane), 'affine' (from
        tl.arange by adds, scalar multiples, clamps), 'division', 'gather' or 'other'."""
        if name in self._kind:
            return self._kind[name]
        self._kind[name] = "uniform"  # breaks cycles through loop-carried values
        op = self._def(name)
        if op is None or depth > 200 or not op.result_type.startswith("tensor"):
            k = "uniform"
        elif op.name == "tt.make_range":
            k = "affine"
        elif op.name in ("tt.splat", "arith.constant"):
            k = "uniform"
        elif op.name == "tt.load":
            k = "gather"
        elif op.name in _PASS_THROUGH:
            k = self.kind(op.operands[0], depth + 1)
        elif op.name in _LINEAR:
            k = _worst(self.kind(o, depth + 1) for o in op.operands)
        elif op.name == "arith.muli":
            kinds = [self.kind(o, depth + 1) for o in op.operands]
            k = _worst(kinds) if "uniform" in kinds else _worst(kinds + ["other"])
        elif op.name in _DIVISION:
            kinds = [self.kind(o, depth + 1) for o in op.operands]
            k = "uniform" if set(kinds) == {"uniform"} else _worst(kinds + ["division"])
        else:
            k = "other"
        self._kind[name] = k
        return k

    def contiguous_mask(self, name: str, depth: int = 0) -> bool:
        op = self._def(name)
        if op is None or not op.result_type.startswith("tensor") or depth > 200:
            return True
        if op.name in ("tt.splat", "arith.constant"):
            return True
        if op.name in ("tt.broadcast", "tt.expand_dims"):
            return self.contiguous_mask(op.operands[0], depth + 1)
        if op.name == "arith.andi":
            return all(self.contiguous_mask(o, depth + 1) for o in op.operands)
        if op.name == "arith.cmpi":
            pred = re.search(r"arith\.cmpi\s+(\w+)", op.text)
            kinds = sorted(self.kind(o) for o in op.operands)
            return (pred is not None and pred.group(1) in _ORDER_PREDICATES
                    and kinds in (["uniform", "uniform"], ["affine", "uniform"]))
        return False

    def varying_dims(self, name: str, depth: int = 0) -> frozenset:
        """Dimensions along which a tensor value can differ between lanes."""
        if name in self._vary:
            return self._vary[name]
        self._vary[name] = frozenset()
        op = self._def(name)
        rank = len(shape_of(op.result_type)) if op else 0
        if op is None or rank == 0 or depth > 200 or op.name in ("tt.splat", "arith.constant"):
            dims = frozenset()
        elif op.name == "tt.make_range":
            dims = frozenset({0})
        elif op.name == "tt.expand_dims":
            axis = int(re.search(r"axis = (\d+)", op.text).group(1))
            dims = frozenset(d if d < axis else d + 1
                             for d in self.varying_dims(op.operands[0], depth + 1))
        elif op.name in _PASS_THROUGH or op.name in _LINEAR or op.name in _DIVISION \
                or op.name in ("arith.muli", "arith.andi", "arith.ori"):
            dims = frozenset().union(*(self.varying_dims(o, depth + 1) for o in op.operands
                                       if self._rank(o) == rank))
        else:
            dims = frozenset(range(rank))
        self._vary[name] = dims
        return dims

    def _rank(self, name: str) -> int:
        op = self._def(name)
        return len(shape_of(op.result_type)) if op else 0


def _worst(kinds) -> str:
    order = ["uniform", "affine", "other", "division", "gather"]
    return max(kinds, key=order.index, default="uniform")


# --------------------------------------------------------------------------------------
# The lint
# --------------------------------------------------------------------------------------
def lint_ttir(ttir: str, profile: Profile, kernel: str = "kernel") -> list[str]:
    """Findings (rule: what, where) for ``kernel``'s TTIR under ``profile``'s rules."""
    return list(_lint(ttir, profile.name, profile.select_loads, profile.slice_broadcast,
                      tuple(profile["dtypes.supported"]), kernel))


@lru_cache(maxsize=2048)
def _lint(ttir: str, profile_name: str, select: bool, slice_broadcast: bool,
          supported: tuple[str, ...], kernel: str) -> tuple[str, ...]:
    a = _Analysis(ttir)
    out: list[str] = []
    for ty in sorted(set(re.findall(r"(?:!tt\.ptr<|tensor<(?:\d+x)+)(\w+)>", ttir))):
        names = ELEMENT_TYPES.get(ty)
        if names and ty != "i1" and not set(names) & set(supported):
            out.append(f"dtype: {kernel} uses {ty} ({'/'.join(names)}), which profile "
                       f"{profile_name} lacks (dtypes.supported)")
    for op in a.uses:
        where = f"{kernel}: {op.text.strip()[:160]}"
        if op.name == "tt.get_program_id":
            if select and re.search(r"tt\.get_program_id\s+[yz]\b", op.text):
                out.append(f"program-id-yz: {where} (the NPU flattens grids: use axis 0 "
                           f"and loop inside)")
            continue
        ptr = op.operands[0] if op.operands else None
        mask = op.operands[1 if op.name == "tt.load" else 2] \
            if len(op.operands) > (1 if op.name == "tt.load" else 2) else None
        if ptr is None:
            continue
        if select:
            if mask is not None and not a.contiguous_mask(mask):
                out.append(f"discrete-mask: {where} (masked-off lanes are read, then selected)")
            kind = a.kind(ptr)
            if kind == "division":
                out.append(f"division-offsets: {where} (offsets from integer division or "
                           f"remainder become scalar loads in a loop)")
            elif kind == "gather":
                out.append(f"gather: {where} (offsets from loaded data become scalar loads)")
        if slice_broadcast and op.name == "tt.load":
            shape = shape_of(a._def(ptr).result_type) if a._def(ptr) else ()
            still = [d for d, n in enumerate(shape) if n > 1 and d not in a.varying_dims(ptr)]
            if still:
                out.append(f"broadcast-pointer: {where} (the pointer does not vary along "
                           f"dim {still}: load the slice, then broadcast the values)")
    return tuple(dict.fromkeys(out))
