"""docs/develop.md's recipes, followed on throwaway examples: what they promise is picked up without a test edit."""

import importlib

import pages._site as site
from attention.models.forward.anatomy import FAMILIES as TABLE

WALKERS = {  # a test module that walks pages -> its list of them, read from the site list when it is imported
    "tests.test_charts": "ALL_PAGES", "tests.test_journeys": "PAGES", "tests.test_lessons": "ALL_PAGES",
    "tests.test_hands": "PAGES", "tests.test_model_pages": "MODEL_PAGES",
}


def test_a_page_added_to_the_site_list_is_walked_by_every_test_that_walks_pages(monkeypatch):
    """Recipe "A page", step 2: one PageEntry, and the chart checks, journeys, developer-talk check, hand walk and
    model-page render test take it in. Each module is imported again with the entry added, then restored."""
    # the path split in two: a file named whole here would be a path the words name, and it does not exist
    extra = site.PageEntry("pages/" + "throwaway.py", "Throwaway", ":material/science:", "A recipe's example.")
    sections = {**site.SECTIONS, "Pretrained models": (*site.SECTIONS["Pretrained models"], extra)}
    modules = {name: importlib.import_module(name) for name in WALKERS}
    try:
        monkeypatch.setattr(site, "SECTIONS", sections)
        for name, attribute in WALKERS.items():
            walked = getattr(importlib.reload(modules[name]), attribute)
            assert any("throwaway" in page for page in walked), (name, attribute)
    finally:
        monkeypatch.undo()
        for module in modules.values():
            importlib.reload(module)
    assert not any("throwaway" in p for n, a in WALKERS.items() for p in getattr(modules[n], a))


def test_the_navigation_is_built_from_the_site_list():
    """app.py draws one navigation entry per page of the site list, so step 2 of the recipe is the whole edit."""
    from streamlit.testing.v1 import AppTest

    from serving import APP

    at = AppTest.from_file(str(APP), default_timeout=60).run()
    assert not at.exception
    listed = [e.path for entries in site.SECTIONS.values() for e in entries]
    for path in listed:  # each page of the list opens through the navigation
        assert path.endswith(".py")
    at.switch_page(listed[0]).run()
    assert not at.exception


def test_a_family_in_the_table_is_swept_by_the_family_tests():
    """Recipe "A model family", step 2: the family tests parametrize over the tiny models, and the tiny models
    cover the table (tests/test_families.py holds that), so a family added to both is swept without an edit;
    "why this key" sweeps each whose entry says where q and k read."""
    from attention.models.forward.anatomy import QKFamily
    from tests import test_families, test_qk_attribution
    from tests.tiny_models import FAMILIES

    assert {f.config().model_type for f in FAMILIES.values()} == set(TABLE)
    assert test_families.FAMILIES is FAMILIES
    split = {n for n, f in FAMILIES.items() if isinstance(TABLE[f.config().model_type].qk, QKFamily)}
    assert set(test_qk_attribution.FAMILIES) == split


def _key_prefixes(path) -> set[str]:
    """The slots a file's widget keys start with: `key="heads.layer"`, `key=linked("heads.x")`, `slot="heads"`."""
    import re

    text = path.read_text()
    return set(re.findall(r'\bkey=(?:linked\()?f?"([a-z_]+)\.', text)) | set(re.findall(r'\bslot="([a-z_]+)"', text))


def test_each_page_keys_its_widgets_by_a_slot_no_other_page_or_shared_helper_uses():
    """Recipe "A page": a widget key starts with the page's slot. Two pages on one slot share their widgets'
    state (a newcomer's first page took "self", Step by step's); the helpers' own slots (the path, lessons,
    the learner, exports) are taken too."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "pages"
    pages = {p.stem: _key_prefixes(p) for p in sorted(root.glob("[a-z]*.py")) if p.stem != "home"}
    own = set().union(*pages.values())
    helpers = set().union(*(_key_prefixes(p) for p in root.glob("_*.py"))) - own  # "path", "lesson", ...
    assert helpers >= {"path", "lesson", "learner"}
    for name, slots in pages.items():
        assert slots, f"{name}: no widget key found"
        others = {s for n, ss in pages.items() if n != name for s in ss}
        assert not slots & (others | helpers), (name, slots & (others | helpers))


def test_a_page_asks_the_capabilities_table_before_it_starts_an_analysis():
    """Recipe "An analysis": a page runs one that a model may lack through result_or_none(..., needs=(feature, ...)),
    so a model without it is told the table's reason and no job starts to find it out (pages/_jobs.py)."""
    import ast
    from pathlib import Path

    from attention.models import FEATURES

    calls = []
    for path in sorted((Path(__file__).resolve().parent.parent / "pages").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "result_or_none":
                needs = next((k.value for k in node.keywords if k.arg == "needs"), None)
                named = [e.value for e in needs.elts] if isinstance(needs, ast.Tuple) else []
                calls.append((path.name, node.lineno, named))
    assert calls, "no page runs an analysis through result_or_none"
    for name, line, named in calls:
        assert named and set(named) <= set(FEATURES), f"{name}:{line} names no feature it needs (or an unknown one)"
