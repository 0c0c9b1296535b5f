"""The benchmark at its smallest sizes, so `make bench` cannot rot (no timing is asserted here)."""

import subprocess
import sys

import pytest

from serving import APP

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def test_benchmark_smoke_run_writes_a_report(tmp_path):
    out = tmp_path / "benchmarks.md"
    run = subprocess.run([sys.executable, "-m", "benchmarks.run", "--smoke", "--out", str(out)], cwd=APP.parent,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    text = out.read_text()
    for heading in ("## Targets", "## 1. Core", "## 2. Models", "## 3. Payload", "## 4. Browser", "## 5. Long inputs",
                    "## 6. Predictions", "## 12. Two models compared", "## 13. An image through"):
        assert heading in text
    assert "| 3 |" in text  # the core row at n = 3
    assert "live slider, 1-s drag" in text and "websocket messages sent during a drag" in text


def test_the_page_of_model_heads_size_draws_its_elements_and_the_line_the_benchmark_waits_for():
    """benchmarks/elements_app.py (the floor of a page as big as Model heads), run as `streamlit run` runs it."""
    from streamlit.testing.v1 import AppTest

    from benchmarks.elements_app import ELEMENTS

    at = AppTest.from_file(str(APP.parent / "benchmarks" / "elements_app.py"), default_timeout=30).run()
    at.text_area(key="sentence").set_value("I sat on the river bank").run()
    assert not at.exception
    assert at.text[-1].value == "6 words: I sat on the river bank"  # benchmarks.browser.input_to_idle's line
    assert len(at.toggle) == ELEMENTS["toggle"] and len(at.selectbox) == ELEMENTS["selectbox"]
    assert len(at.caption) == ELEMENTS["caption"] and len(at.subheader) == ELEMENTS["subheader"]


def test_every_control_the_slow_operations_press_is_where_they_press_it(app_url, browser):
    """benchmarks/slow_operations.py crashed on main waiting 30 s for a Positions control no longer on the page as it
    opens (issue 69): each operation's control is found here, on its page opened as the benchmark opens it."""
    from benchmarks.slow_operations import CONTROLS, check_controls

    found = check_controls(browser, app_url)
    assert set(found) == set(CONTROLS) and all(found.values()), found



def test_every_control_the_path_steps_press_is_where_they_press_it(app_url, browser):
    """benchmarks/path_steps.py (issue 69): each page's link in the sidebar, Predictions' prompt box and its Generate
    button, found on the pages as the benchmark opens them."""
    from benchmarks.path_steps import PAGES, controls
    from tests.harness import wait_idle

    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.goto(app_url)
    wait_idle(page, timeout=180_000)
    found = controls(page)
    page.close()
    assert set(found) == {*PAGES, "predictions_new", "generate"} and all(found.values()), found
