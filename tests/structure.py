"""The shape of the code, measured: import cycles, long modules and functions, public names without a docstring.

    python -m tests.structure          # the report a structure change states before and after

An import cycle here counts every import a module makes, wherever it sits: at the top, inside a function, or
under `if TYPE_CHECKING:`. import-linter sees only the first kind, so a cycle closed by a function-local import
passes its contracts and still leaves two modules that cannot be read, or moved, one without the other.
Importing `a.b.c` runs `a/__init__` and `a/b/__init__` too; like import-linter, that alone is not an edge.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("attention", "pages", "serving", "benchmarks", "tests")  # and the top-level module below
TOP_MODULES = ("app",)
LONG_MODULE = 350  # lines
LONG_FUNCTION = 40  # lines


def module_files() -> dict[str, Path]:
    """Every module of this project by its dotted name: 'attention.models.forward.guard' -> its path."""
    found = {name: ROOT / f"{name}.py" for name in TOP_MODULES if (ROOT / f"{name}.py").exists()}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module a `from ... import` names (relative levels resolved from `module`)."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(module: str, path: Path, known: set[str]) -> set[str]:
    """The project modules `module` imports anywhere in its text (top level, functions, TYPE_CHECKING)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_package = path.name == "__init__.py"
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, is_package, node)
            for alias in node.names:  # `from pkg import submodule` imports the submodule
                sub = f"{base}.{alias.name}"
                targets.add(sub if sub in known else base)
    return {t for t in targets if t in known and t != module}


def import_graph() -> dict[str, set[str]]:
    files = module_files()
    known = set(files)
    return {name: imports_of(name, path, known) for name, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm), each sorted by name."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(groups)


def cycle_path(graph: dict[str, set[str]], group: list[str]) -> list[str]:
    """One closed path through a strongly connected group, for a message a reader can follow."""
    members = set(group)
    start = group[0]
    path, seen = [start], {start}
    node = start
    while True:
        nxt = sorted(graph[node] & members)
        back = [n for n in nxt if n == start]
        if back and len(path) > 1:
            return path + [start]
        fresh = [n for n in nxt if n not in seen]
        if not fresh:
            return path + [nxt[0]]
        node = fresh[0]
        path.append(node)
        seen.add(node)


@dataclass(frozen=True)
class Function:
    module: str
    name: str
    lines: int


def _code_modules() -> dict[str, Path]:
    """The modules whose shape we hold ourselves to: the package, the pages, the app, serving, benchmarks."""
    return {m: p for m, p in module_files().items() if not m.startswith("tests")}


def long_modules(limit: int = LONG_MODULE) -> list[tuple[str, int]]:
    sizes = [(m, len(p.read_text(encoding="utf-8").splitlines())) for m, p in _code_modules().items()]
    return sorted([s for s in sizes if s[1] > limit], key=lambda s: -s[1])


def long_functions(limit: int = LONG_FUNCTION) -> list[Function]:
    found = []
    for module, path in _code_modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    found.append(Function(module, node.name, lines))
    return sorted(found, key=lambda f: -f.lines)


def public_functions() -> list[tuple[str, str, bool]]:
    """(module, name, has a docstring) for every public function and method of attention/ (the API)."""
    found = []
    for module, path in _code_modules().items():
        if not module.startswith("attention"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        bodies = [(tree, "")] + [(c, c.name + ".") for c in tree.body if isinstance(c, ast.ClassDef)
                                 and not c.name.startswith("_")]
        for body, prefix in bodies:
            for node in body.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
                    found.append((module, prefix + node.name, ast.get_docstring(node) is not None))
    return found


def report() -> str:
    graph = import_graph()
    groups = cycles(graph)
    functions = public_functions()
    missing = [f"{m}.{n}" for m, n, doc in functions if not doc]
    lines = [f"import cycles: {len(groups)}"]
    lines += ["  " + " -> ".join(cycle_path(graph, g)) for g in groups]
    modules = long_modules()
    lines.append(f"modules over {LONG_MODULE} lines: {len(modules)}")
    lines += [f"  {n:4d} {m}" for m, n in modules]
    funcs = long_functions()
    lines.append(f"functions over {LONG_FUNCTION} lines: {len(funcs)}")
    lines += [f"  {f.lines:4d} {f.module}.{f.name}" for f in funcs]
    lines.append(f"public functions of attention/ without a docstring: {len(missing)} of {len(functions)}")
    lines += [f"  {n}" for n in missing]
    return "\n".join(lines)


if __name__ == "__main__":
    print(report())
