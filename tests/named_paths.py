"""Every repository path the project's own words name, checked to exist (tests/test_structure.py).

Two kinds of name are read from README, docs/, docstrings, comments, the Makefile and the JavaScript components:
    a file path     `attention/toy/live.py`, `pages/components/fit.js:12`: the file must exist
    a dotted name   `attention.models.attend`, `pages._kept.linked`: its module must exist, and the first name
                    after the module must be defined there (imported, for attention/, which never imports
                    Streamlit; read from the source for pages/, tests/, benchmarks/ and serving)
A path with a placeholder in it (`*`, `{layer}`, `<name>`) is a pattern, not a name, and is skipped; so is a
dotted name whose second part is not ours (`attention.self.query` is a model's own module).
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_ROOTS = r"attention|pages|tests|benchmarks|docs|scripts|examples|\.ci|\.streamlit"
_EXTENSIONS = r"py|js|css|md|toml|json|txt|sh|ipynb|html|cfg|yaml|yml|conf|csv|jsonl|npz|safetensors"
FILE_PATH = re.compile(rf"(?<![\w./-])((?:{_ROOTS})/[\w./-]*\w\.(?:{_EXTENSIONS}))(?![\w-])")
DOTTED = re.compile(r"(?<![\w./-])((?:attention|pages|benchmarks|tests|serving)(?:\.\w+)+)")
READ = re.compile(r"\.(py|js|css|md|toml|txt|sh|cfg)$|(^|/)Makefile$")


def tracked_files() -> list[Path]:
    """The files git tracks whose words may name a path."""
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / name for name in listed.split() if READ.search(name)]


def _defined(path: Path) -> set[str]:
    """Every name a module binds anywhere in its text: defs, classes, assignments, imports."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def _module(parts: list[str]) -> tuple[Path | None, int]:
    """The longest leading run of `parts` that is a module file or package, and how many parts it took."""
    for taken in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:taken])
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.exists():
                return candidate, taken
    return None, 0


def dotted_resolves(name: str) -> bool | None:
    """True or False for one of ours; None for a name that is not ours to check (a model's module path)."""
    parts = name.rstrip(".").split(".")
    if parts[-1] in _EXTENSIONS.split("|") or ROOT.joinpath(*parts).is_dir():
        return None if parts[-1] in _EXTENSIONS.split("|") else True
    path, taken = _module(parts)
    if parts[0] != "serving" and taken < 2 and not ROOT.joinpath(*parts[:2]).exists():
        return None
    rest = parts[taken:]
    if path is None:
        return False
    if not rest or rest[0].startswith("__"):
        return True
    if parts[0] == "attention":
        return hasattr(importlib.import_module(".".join(parts[:taken])), rest[0])
    return rest[0] in _defined(path)


def unresolved(files: list[Path] | None = None) -> dict[str, list[str]]:
    """Each name that does not resolve -> the files that name it."""
    found: dict[str, set[str]] = {}
    for file in tracked_files() if files is None else files:
        text = file.read_text(errors="ignore")
        where = str(file.relative_to(ROOT) if file.is_relative_to(ROOT) else file)
        for match in FILE_PATH.finditer(text):
            if not any(mark in match[1] for mark in "*{}<>") and not (ROOT / match[1]).exists():
                found.setdefault(match[1], set()).add(where)
        for match in DOTTED.finditer(text):
            if dotted_resolves(match[1]) is False:
                found.setdefault(match[1].rstrip("."), set()).add(where)
    return {name: sorted(files) for name, files in sorted(found.items())}
