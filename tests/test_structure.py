"""No import cycles anywhere in the project: the contract import-linter cannot state (tests/structure.py says why)."""

from __future__ import annotations

from tests.named_paths import unresolved
from tests.structure import cycle_path, cycles, import_graph, imports_of


def test_no_module_imports_itself_back_through_any_import():
    graph = import_graph()
    assert {"attention.models.forward.running", "pages._jobs", "benchmarks.compute", "serving"} <= set(graph)
    found = [" -> ".join(cycle_path(graph, group)) for group in cycles(graph)]
    assert not found, ("import cycles (a function-local or TYPE_CHECKING import counts: move the shared idea "
                       "into a module both can import):\n" + "\n".join(found))


def test_the_check_sees_imports_inside_functions_and_under_type_checking(tmp_path):
    """The imports that hid the four cycles this test replaced: in a function body, and under TYPE_CHECKING."""
    source = tmp_path / "a.py"
    source.write_text("from typing import TYPE_CHECKING\n"
                      "if TYPE_CHECKING:\n    from pkg.b import B\n"
                      "def run():\n    from pkg import c\n    from . import d\n")
    known = {"pkg.a", "pkg.b", "pkg.c", "pkg.d"}
    assert imports_of("pkg.a", source, known) == {"pkg.b", "pkg.c", "pkg.d"}
    graph = {"pkg.a": {"pkg.b"}, "pkg.b": {"pkg.c"}, "pkg.c": {"pkg.a"}, "pkg.d": {"pkg.a"}}
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]
    assert cycle_path(graph, ["pkg.a", "pkg.b", "pkg.c"]) == ["pkg.a", "pkg.b", "pkg.c", "pkg.a"]


def test_every_path_the_words_name_is_a_path():
    """README, docs/, docstrings, comments and the JavaScript name files and modules; each must exist."""
    missing = unresolved()
    assert not missing, "named but not there (file -> where it is named):\n" + "\n".join(
        f"{name}  <- {', '.join(files)}" for name, files in missing.items())


def test_the_path_check_finds_what_is_not_there(tmp_path):
    """The kinds of name the check must catch: a moved file, a line reference, a moved function."""
    words = tmp_path / "words.md"
    moved, gone = "attention/" + "live.py", "attention.models." + "no_such_name"  # split: this file is read too
    words.write_text(f"see {moved}, pages/components/fit.js:12, {gone}, "
                     "pages._kept.linked and attention.self.query (a model's module), docs/*.md\n")
    assert unresolved([words]).keys() == {moved, gone}


def test_the_wings_fronts_are_the_register():
    """A public name is listed once, in its wing's __all__; attention.models re-exports exactly their union."""
    import types

    import attention.models as models
    from attention.models import analyses, forward, recorded

    def public(module):
        return {name for name, value in vars(module).items()
                if not name.startswith("_") and not isinstance(value, types.ModuleType)}

    wings = {wing.__name__: wing.__all__ for wing in (forward, recorded, analyses)}
    for name, listed in wings.items():
        assert len(listed) == len(set(listed)), (name, "listed twice")
    for wing in (forward, recorded, analyses):
        assert public(wing) == set(wing.__all__), (wing.__name__, public(wing) ^ set(wing.__all__))
    union = [name for listed in wings.values() for name in listed]
    assert len(union) == len(set(union)), "a name listed in two wings"
    assert models.__all__ == union and public(models) == set(union)


def test_no_module_of_the_package_the_pages_or_serving_is_over_400_lines():
    """A room that grew past one job is split by job (docs/develop.md); 400 lines is where that was done."""
    from tests.structure import module_files

    long = {name: n for name, path in module_files().items() if name.split(".")[0] in ("attention", "pages", "serving")
            and (n := len(path.read_text().splitlines())) > 400}
    assert not long, long
