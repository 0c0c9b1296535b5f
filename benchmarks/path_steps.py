"""Each step a student takes on the learner's path, timed in Chromium as they take it (issue 69): from the click
(or the address, or Ctrl+Enter) to the page drawn and idle.

    python -m benchmarks.path_steps [--runs N]

    first_page       a fresh server that says ok: its address opened, Home drawn (target 3 s)
    <page>           warm (its model loaded by an earlier visit): Home, then the page's link in the sidebar
    predictions_new  Predictions open: a new prompt typed, Ctrl+Enter
    generate         Predictions open: the Generate button (16 new tokens, greedy)

A returning learner (tests.harness.returning_learner) has opened these pages before, so each opens whole, not on
its questions. Target: every warm step within 2 s (benchmarks/run.py's targets table).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from serving import running_app
from tests.harness import chromium, page_url, returning_learner, wait_idle

PAGES = {"model_heads": "Model heads", "ambiguous_words": "Ambiguous words", "inside_head": "Inside one head",
         "predictions": "Predictions and head effects", "what_heads_do": "What heads do"}  # URL name -> link
STEPS = ("first_page", *PAGES, "predictions_new", "generate")
TIMEOUT_MS = 300_000
FIRST_PAGE_S, WARM_S = 3.0, 2.0  # the targets


def _timed(page, action) -> float:
    """Seconds from action() to the script finished and the page idle."""
    start = time.perf_counter()
    action()
    page.wait_for_timeout(100)  # the click's rerun has begun
    wait_idle(page, timeout=TIMEOUT_MS)
    return time.perf_counter() - start


def _link(page, title: str):
    return page.locator("[data-testid='stSidebarNav'] a").filter(has_text=title).first


def controls(page) -> dict[str, int]:
    """How many of each control the steps press are on the pages now (the smoke test's check): a renamed link or
    button fails a test, not the next benchmark run."""
    found = {name: _link(page, title).count() for name, title in PAGES.items()}
    page.goto(page.url.split("?")[0].rsplit("/", 1)[0] + "/predictions")
    wait_idle(page, timeout=TIMEOUT_MS)
    found["predictions_new"] = _count(page.locator("[data-testid='stTextArea'] textarea"))
    found["generate"] = _count(page.get_by_role("button", name="Generate"))
    return found


def _count(locator) -> int:
    """How many there are once the first has come (a loaded machine draws the page after the idle signal's first
    quiet moment: CI once counted the prompt box before it came), 0 if none comes within a minute."""
    try:
        locator.first.wait_for(state="attached", timeout=60_000)
    except Exception:  # playwright's TimeoutError: none came
        return 0
    return locator.count()


def measure(runs: int = 3) -> dict:
    """{step: {"median", "min", "max", "n", "runs"}} in seconds."""
    times: dict[str, list[float]] = {step: [] for step in STEPS}
    with chromium() as browser:
        for _ in range(runs):  # a fresh server each time: its first page
            with running_app() as url:
                page = browser.new_page(viewport={"width": 1280, "height": 1000})
                times["first_page"].append(_timed(page, lambda p=page, u=url: p.goto(u)))
                page.close()
        with running_app() as url:
            context = browser.new_context(viewport={"width": 1280, "height": 1000})
            context.add_cookies([returning_learner(url, list(PAGES))])
            page = context.new_page()
            for name in PAGES:  # each page's model loaded and its first run made: not timed
                page.goto(page_url(url, name))
                wait_idle(page, timeout=TIMEOUT_MS)
            for i in range(runs):
                for name, title in PAGES.items():
                    page.goto(url)
                    wait_idle(page, timeout=TIMEOUT_MS)
                    times[name].append(_timed(page, lambda t=title: _link(page, t).click()))
                page.goto(page_url(url, "predictions"))
                wait_idle(page, timeout=TIMEOUT_MS)
                box = page.locator("[data-testid='stTextArea'] textarea").first
                box.fill(f"When Mary and John went to the market {i}, John gave a drink to")
                times["predictions_new"].append(_timed(page, lambda b=box: b.press("Control+Enter")))
                times["generate"].append(_timed(page, lambda: page.get_by_role("button", name="Generate").click()))
            context.close()
    return {step: {"median": statistics.median(t), "min": min(t), "max": max(t), "n": len(t), "runs": t}
            for step, t in times.items()}


def lines(result: dict) -> list[str]:
    """A markdown table: each step's median (min-max) against its target."""
    rows = ["| step | target | measured | met |", "| --- | --- | --- | --- |"]
    for step in STEPS:
        d, target = result[step], FIRST_PAGE_S if step == "first_page" else WARM_S
        met = "yes" if d["median"] <= target else "**no**"
        rows.append(f"| {step} | <= {target:g} s | {d['median']:.2f} s ({d['min']:.2f}–{d['max']:.2f}, n={d['n']}) "
                    f"| {met} |")
    return rows


def section(result: dict) -> list[str]:
    return ["## Each step on the learner's path (issue 69)", "",
            "Chromium at 1280 px, a returning learner (the pages open whole), from the click to the page idle; "
            "the first page on a fresh server each run, the others on one warm server "
            "(benchmarks/path_steps.py says each step).", "", *lines(result)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print("\n".join(lines(measure(args.runs))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
