"""Under a student's hands (issue 68): the controls driven in Chromium as fingers drive them, not set in AppTest.

- Why scale took a released live slider's float where its page keeps an int, and crashed on every release: the
  component's value is converted once where it enters the page (attention.toy.live.Slider.value_at).
- A focused live slider keeps its focus across the reruns its presses start, steps once per press, and goes to
  its ends with Home and End; its value is announced (aria-valuetext).
- A failure reaches the visitor as words and a reference, never a traceback or a server path (pages/_failure.py).
- A control's setting holds when the reader leaves its page through the sidebar and comes back (pages/_kept.py).
- A seeded random walk over every page (tests/hands.py): HANDS_SEEDS seeds (default one) of HANDS_ACTIONS
  actions a page (default 1, for the suite's 12 minutes); make soak walks 12 seeds of 6, model pickers included
  (HANDS_MODELS=1).

One server and one browser for the module.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from pages._site import SECTIONS
from tests.hands import Walk, broken, settle, walk, watch_console
from tests.harness import open_whole, page_url, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SEEDS = [int(s) for s in os.environ.get("HANDS_SEEDS", "1").split(",")]
ACTIONS = int(os.environ.get("HANDS_ACTIONS", "1"))  # make test: one a page (the suite's budget); make soak six
MODELS = os.environ.get("HANDS_MODELS", "0") == "1"  # model and precision pickers too (a model load a pick)
PAGES = [""] + [e.path.split("/")[-1][:-3] for entries in SECTIONS.values() for e in entries]
FOCUSED = """() => { let a = document.activeElement;
  while (a && a.shadowRoot && a.shadowRoot.activeElement) a = a.shadowRoot.activeElement;
  return a ? {id: a.id, value: a.value, text: a.getAttribute('aria-valuetext')} : null; }"""


@pytest.fixture
def tab(browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    yield page
    page.close()


def test_why_scale_takes_a_released_slider_as_the_int_its_page_keeps(app_url, tab):
    """Before the fix: TypeError "expected a sequence of integers ... got '84.0'" on every release of d."""
    open_whole(tab, page_url(app_url, "scaling"))
    d = tab.locator(".sweep input[type=range]").first
    before = tab.locator("[data-testid=stNumberInput] input").first.input_value()
    d.focus()
    d.press("ArrowRight")
    settle(tab)
    assert broken(tab) is None, broken(tab)
    typed = tab.locator("[data-testid=stNumberInput] input").first.input_value()
    assert typed != before and re.fullmatch(r"\d+", typed), typed  # the next d, kept as an int
    assert tab.get_by_text(re.compile(r"Averaged over \d+ random draws")).count()  # the page ran to its end


def test_a_focused_live_slider_keeps_its_focus_and_steps_once_per_press(app_url, tab):
    open_whole(tab, page_url(app_url, "lookup"))
    slider = tab.locator(".live input[type=range]").nth(1)  # durability: 0.20 at step 20
    start = int(slider.input_value())
    slider.focus()
    for _ in range(12):  # quick presses, as a held key repeats them, each starting a rerun
        tab.keyboard.press("ArrowRight")
        tab.wait_for_timeout(40)
    settle(tab)
    focused = tab.evaluate(FOCUSED)
    assert focused["id"] == slider.get_attribute("id") and int(focused["value"]) == start + 12, focused
    assert focused["text"] == f"{(start + 12) / 100:.2f}"  # announced as the page shows it
    tab.keyboard.press("End")
    settle(tab)
    assert tab.evaluate(FOCUSED)["value"] == "100"
    tab.keyboard.press("Home")
    settle(tab)
    assert tab.evaluate(FOCUSED)["value"] == "0"
    typed = tab.locator("[data-testid=stNumberInput] input").nth(1)  # the exact value follows the release
    assert float(typed.input_value()) == 0.0

    open_whole(tab, page_url(app_url, "scaling"))  # the sweep component: its page reruns whole on a release
    d = tab.locator(".sweep input[type=range]").first
    d.focus()
    for _ in range(3):
        tab.keyboard.press("ArrowLeft")
        tab.wait_for_timeout(500)  # each release's rerun arrives between presses
    settle(tab)
    assert tab.evaluate(FOCUSED)["id"] == d.get_attribute("id")


def by_sidebar(tab, title: str) -> None:
    """Open a page as a reader does, from the sidebar, and the rest of it where its questions hold it back."""
    tab.locator("[data-testid=stSidebarNav] a", has_text=title).click()
    wait_idle(tab)
    tab.get_by_role("button", name="Back:").first.wait_for(timeout=30_000)  # the page's last element: drawn
    rest = tab.get_by_role("button", name="Show the rest of the page")
    if rest.count():
        rest.click()
        wait_idle(tab)


def test_a_setting_holds_when_the_reader_leaves_its_page_and_comes_back(app_url, tab):
    open_whole(tab, page_url(app_url, "lookup"))
    durability = tab.locator(".live input[type=range]").nth(1)
    durability.wait_for(timeout=120_000)  # the live component mounts after the page's idle (CI once took > 30 s)
    durability.focus()
    for _ in range(5):
        tab.keyboard.press("ArrowRight")
    settle(tab)
    moved = durability.input_value()
    by_sidebar(tab, "Why scale")
    keys = tab.locator("[data-testid=stSlider] input[type=range]").first  # number of keys: 8
    keys.wait_for(timeout=120_000)
    keys.focus()
    tab.keyboard.press("ArrowRight")
    settle(tab)
    by_sidebar(tab, "Lookup")
    assert tab.locator(".live input[type=range]").nth(1).input_value() == moved
    assert "lookup.durability=" in tab.url  # and in the link, so that a copy of it holds it too
    by_sidebar(tab, "Why scale")
    assert "scaling.keys=9" in tab.url, tab.url


GUARD_APP = '''
import streamlit as st
from pages._failure import guard_session, run_guarded

guard_session()


def boom():
    raise TypeError("expected a sequence of integers, got '84.0' in /srv/secret/pages/scaling.py")


class Page:
    def run(self):
        st.write("above the failure")
        st.button("break", on_click=boom, key="b")
        if st.query_params.get("fail"):
            raise ValueError("/srv/secret/path/page.py went wrong")
        st.write("below the failure")


run_guarded(Page())
'''


def test_a_failure_says_what_to_do_with_a_reference_and_never_shows_a_traceback(tmp_path, browser):
    """A page that raises, and a callback that raises, in a served app: words, a button to draw the page again and
    a reference, the same reference beside the traceback in the server's log, and no path or exception text."""
    from serving import running_app

    script = tmp_path / "guarded.py"
    script.write_text(GUARD_APP)
    command = lambda port: [sys.executable, "-m", "streamlit", "run", str(script), "--server.headless", "true",  # noqa: E731
                            "--server.address", "127.0.0.1", "--server.port", str(port),
                            "--browser.gatherUsageStats", "false", "--client.showErrorDetails", "none"]
    root = str(Path(__file__).resolve().parent.parent)
    with running_app(app_command=command, env={"PYTHONPATH": root}) as url:
        page = browser.new_page()
        seen = Walk(seed=0)
        watch_console(page, seen)
        for how in ("page", "callback"):
            page.goto(url + ("/?fail=1" if how == "page" else "/"))
            wait_idle(page)
            if how == "callback":
                page.get_by_role("button", name="break").click()
                wait_idle(page)
            shown = page.locator("[data-testid=stMain]").inner_text()
            assert "could not be drawn" in shown and "The app failed here, not you" in shown, shown
            assert ("above the failure" in shown) == (how == "page")  # a page keeps what it drew before
            assert "Traceback" not in shown and "/srv/secret" not in shown and ".py" not in shown, shown
            assert "TypeError" not in shown and "ValueError" not in shown
            assert page.locator("[data-testid=stException]").count() == 0
            reference = re.search(r"AE-[0-9A-F]{6}", shown).group(0)
            server_log = Path(url.log).read_text(errors="replace")
            assert f"[{reference}]" in server_log and "Traceback" in server_log.split(f"[{reference}]")[1][:400]
        page.get_by_role("button", name="Draw the page again").click()
        wait_idle(page)
        assert "below the failure" in page.locator("[data-testid=stMain]").inner_text()
        assert not seen.console, seen.console  # no script error in the browser either
        page.close()


@pytest.mark.parametrize("seed", SEEDS)
def test_a_hand_on_every_control_breaks_no_page(app_url, browser, seed):
    """Every page, ACTIONS random actions each (tests/hands.py says which and how); a failure names the seed and
    the actions to replay."""
    walk(browser, app_url, PAGES, seed=seed, actions_per_page=ACTIONS, models=MODELS)


def test_the_walk_can_fail(app_url, tab):
    """The walk's checks see what a visitor would: an exception box and our failure message both count."""
    open_whole(tab, page_url(app_url, "scaling"))
    assert broken(tab) is None
    tab.evaluate("""() => { const d = document.createElement('div'); d.className = 'st-key-page-failed-AE-000000';
                            d.textContent = 'This part of the page could not be drawn.';
                            document.querySelector('[data-testid=stMain]').appendChild(d); }""")
    assert "failure message" in broken(tab)

