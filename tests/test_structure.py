"""No import cycles anywhere in the project: the contract import-linter cannot state (tests/structure.py says why)."""

from __future__ import annotations

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
