"""The harness's layout stays a pipeline: no import circle between its modules, and no
module grows past what a reader can hold."""
import ast
from pathlib import Path

from triton_cts import CHECKOUT

PACKAGES = ("triton_cts", "kernels", "suites", "reports", "benchmarks")
MAX_LINES = 600


def _modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in sorted((CHECKOUT / package).rglob("*.py")):
            parts = path.relative_to(CHECKOUT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Modules of ours that ``name`` imports, at module level or inside functions."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")
                anchor = anchor[:len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            # "from pkg import mod" imports the submodule pkg.mod where there is one
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component with more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    # a package's __init__ runs before any of its submodules: importing pkg.mod imports pkg
    graph = {}
    for name, path in modules.items():
        deps = _imports(name, path, known)
        graph[name] = deps
    return graph


def test_no_import_cycle():
    cycles = _cycles(_graph())
    assert not cycles, "import circles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_cycle_finder_finds_a_planted_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_relative_and_package_imports_are_resolved():
    graph = _graph()
    assert "kernels.layer_norm.tiles" in graph["kernels.layer_norm.forward"]
    assert "triton_cts.ops.spec" in graph["triton_cts.ops.gelu"]
    assert "triton_cts.execution.launches" in graph["triton_cts.execution.modes"]


def test_no_module_over_the_size_limit():
    too_long = {name: n for name, path in _modules().items()
                if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not too_long, f"modules over {MAX_LINES} lines: {too_long}"
