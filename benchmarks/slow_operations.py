"""The slow operations a newcomer timed (issue 59), each as a user meets it in Chromium: from the click or the
page's address to the page drawn and idle.

    python -m benchmarks.slow_operations [--runs N] [--before PATH/app.py] [--json OUT]

    exact_scan            Predictions: "Remove every head in turn" (SmolLM2's 270 heads), the page already open
    first_predictions     a fresh server, /predictions its first page (SmolLM2 loaded, checked, run, estimated)
    predictions_from_home a fresh server, Home read for READING_S, then Predictions from the sidebar
    positions_smollm2     a fresh server, Positions read for READING_S, then "Show one SmolLM2 head" switched on
    corpus_first          a fresh server, /corpus its first page, no survey on the machine yet (its first use)
    corpus_restart        the same after a restart: the survey this machine made before is on its disk
    smollm2_long          Model heads on SmolLM2 (loaded): a 1,693-token text submitted -> its grid painted
    compare_gemma         a fresh server, Compare read for READING_S, then the "SmolLM2 vs Gemma 3" preset

"Fresh server" is what a visitor after a restart meets: a new `streamlit run` (imports not yet done, no model
in memory) over the disk cache a first use leaves (the bundled models' converted folders). READING_S is a
visitor reading the page before the click (the page's questions come first on the path). `--before` times
another checkout's app.py (a commit before a change) with the same clicks, so both figures come from one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

from attention.models import BUNDLED, COMPARISONS, cache_dir, load_model
from benchmarks.common import text_of_tokens
from serving import APP, running_app, streamlit_command
from tests.harness import chromium, open_whole, page_url, wait_idle

LONG_TOKENS = 1_693  # the newcomer's long text, in SmolLM2's tokens
TIMEOUT_MS = 600_000
GEMMA_PRESET = next(name for name, (a, b) in COMPARISONS.items() if b.name == "gemma3")
OPERATIONS = ("exact_scan", "first_predictions", "predictions_from_home", "positions_smollm2", "corpus_first",
              "corpus_restart", "smollm2_long", "compare_gemma")
FRESH = OPERATIONS[1:6] + OPERATIONS[7:]  # each on a new server
READING_S = 5.0  # seconds a visitor reads a page before the click that starts the operation
BEFORE = {"exact_scan": 6.0, "first_predictions": 16.0, "positions_smollm2": 12.0, "corpus_first": 19.0,
          "smollm2_long": 9.6, "compare_gemma": 13.0}  # s, as the newcomer measured them (alone, 2 cores)


def _app_command(app: Path):
    """serving.streamlit_command for `app` (another checkout's app.py runs with its own folder first on the path)."""
    def command(port: int) -> list[str]:
        return [str(app) if part == str(APP) else part for part in streamlit_command(port)]
    return command


def _env(app: Path) -> dict:
    return {"PYTHONPATH": str(app.parent)} if app != APP else {}


def _timed(page, action, timeout_ms: int = TIMEOUT_MS) -> float:
    """Seconds from `action()` to the script finished and the page idle."""
    t = time.perf_counter()
    action()
    page.wait_for_timeout(200)  # the rerun starts
    wait_idle(page, timeout=timeout_ms)
    return time.perf_counter() - t


def _click(page, selector: str):
    return lambda: page.locator(selector).first.click()


def fresh(browser, app: Path, name: str) -> float:
    """One operation that needs a fresh server, seconds."""
    if name == "corpus_first":
        shutil.rmtree(cache_dir() / "surveys", ignore_errors=True)  # no survey made on this machine yet
    with running_app(env=_env(app), app_command=_app_command(app)) as url:
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        try:
            if name == "first_predictions":
                return _timed(page, lambda: page.goto(page_url(url, "predictions")))
            if name in ("corpus_first", "corpus_restart"):
                return _timed(page, lambda: page.goto(page_url(url, "corpus")))
            if name == "predictions_from_home":
                _read(page, page_url(url, ""))
                return _timed(page, _click(page, control(name)[1]))
            if name == "positions_smollm2":
                _read(page, page_url(url, "positions"), whole=True)  # its questions skipped, as a reader may
                return _timed(page, _click(page, CONTROLS["positions_smollm2"][1]))
            if name == "compare_gemma":
                _read(page, page_url(url, "compare"))  # its default pair loads: not part of the figure
                return _timed(page, _click(page, control(name)[1]))
            raise ValueError(name)
        finally:
            page.close()


def _read(page, url: str, *, whole: bool = False) -> None:
    """Open a page, wait for it to be drawn (`whole`: past its questions, by "Show the rest of the page"), and read
    it for READING_S."""
    if whole:
        open_whole(page, url)
    else:
        page.goto(url)
        wait_idle(page, timeout=TIMEOUT_MS)
    page.wait_for_timeout(READING_S * 1000)


# The control each operation presses, on the page it presses it on (URL name): check_controls finds each one, so
# that a control renamed or moved breaks make test's smoke, not the next make bench (issue 69: a Positions control
# no longer on the page as it opens crashed the benchmark).
CONTROLS = {
    "exact_scan": ("predictions", ".st-key-pred-scan button"),
    "predictions_from_home": ("", "[data-testid='stSidebarNav'] a:has-text('Predictions')"),
    "positions_smollm2": ("positions", ".st-key-pos-real label"),
    "compare_gemma": ("compare", ""),  # its preset's button, named below (needs COMPARISONS)
    "smollm2_long": ("model_heads", "[data-testid='stTextArea'] textarea"),
}


def control(name: str) -> tuple[str, str]:
    """(the page's URL name, the selector of the control) an operation presses."""
    page, selector = CONTROLS[name]
    if name == "compare_gemma":
        selector = f".st-key-cmp-preset-{_css(GEMMA_PRESET)} button"
    return page, selector


def check_controls(browser, url: str) -> dict[str, int]:
    """Open each operation's page as the benchmark does and count its control there: {operation: count}."""
    found = {}
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    try:
        for name in CONTROLS:
            where, selector = control(name)
            open_whole(page, page_url(url, where))
            found[name] = page.locator(selector).count()
    finally:
        page.close()
    return found


def _css(key_part: str) -> str:
    """A widget key as Streamlit writes it in its element's class (st-key-...): what is not a word becomes -."""
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in key_part)


def warm(browser, app: Path, runs: int) -> dict[str, list[float]]:
    """The operations timed on a server that has already loaded their model: the exact scan and the long text."""
    long_text = text_of_tokens(load_model("smollm2").tokenizer, LONG_TOKENS)
    out = {"exact_scan": [], "smollm2_long": []}
    with running_app(env=_env(app), app_command=_app_command(app)) as url:
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.goto(page_url(url, "predictions"))
        wait_idle(page, timeout=TIMEOUT_MS)
        for i in range(runs):
            if i:  # another ablation method, then back: the scan is cached by its arguments
                page.goto(page_url(url, "predictions", text=f"When Mary and John went to the store{'.' * i}, John "
                                   "gave a drink to", target=" Mary", foil=" John"))
                wait_idle(page, timeout=TIMEOUT_MS)
            out["exact_scan"].append(_timed(page, _click(page, control("exact_scan")[1])))
        page.goto(page_url(url, "model_heads", model=BUNDLED["smollm2"].label))
        wait_idle(page, timeout=TIMEOUT_MS)
        box = page.locator(control("smollm2_long")[1]).first
        for i in range(runs):
            text = ("" if not i else f"{i} ") + long_text
            box.fill(text)
            out["smollm2_long"].append(_timed(page, lambda: box.press("Control+Enter")))
        page.close()
    return out


def measure(runs: int = 3, app: Path = APP) -> dict:
    """Every operation `runs` times: {name: {"median", "min", "max", "n", "runs"}} in seconds."""
    times: dict[str, list[float]] = {name: [] for name in OPERATIONS}
    with chromium() as browser:
        times.update(warm(browser, app, runs))
        for name in FRESH:
            for _ in range(runs):
                times[name].append(fresh(browser, app, name))
    return {name: {"median": statistics.median(t), "min": min(t), "max": max(t), "n": len(t), "runs": t}
            for name, t in times.items()}


def lines(after: dict, before: dict | None = None) -> list[str]:
    """A markdown table: each operation's median (min-max), and beside it the figure it is compared with."""
    head = "| operation | the newcomer's figure | " + ("before (same run) | " if before else "") + "now |"
    rows = [head, "| --- | --- | " + ("--- | " if before else "") + "--- |"]
    for name in OPERATIONS:
        cells = [name, f"{BEFORE[name]:.1f} s" if name in BEFORE else "–"]
        if before:
            cells.append(_fig(before[name]))
        cells.append(_fig(after[name]))
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def section(after: dict) -> list[str]:
    """docs/benchmarks.md's section: what each operation is, its figure, and what bounds it."""
    return ["## The slow operations a newcomer timed (issue 59)", "",
            "Each in Chromium, from the click (or the address) to the page drawn and idle; a fresh server for all "
            f"but the scan and the long text; a visitor reads a page {READING_S:g} s before the click that starts "
            "an operation on it (benchmarks/slow_operations.py says each one). The newcomer's figures were taken "
            "alone on 2 cores, on another machine.", "", *lines(after), "", *FLOORS]


FLOORS = [  # what bounds each operation, measured (benchmarks/NOTES.md, "The slow operations")
    "- exact_scan: 270 ablated passes from the ablated layer up, ~140 forward passes' worth at 16 tokens; its "
    "compute is effects.scan above, the rest is the page's own rerun and drawing.",
    "- first_predictions: a fresh process imports torch and transformers (~4 s on 2 cores) before it can load "
    "a model; predictions_from_home is the same page after Home, with the import done behind it.",
    "- corpus_first: 278 texts each through the model once (MiniLM's forward passes ~2.5 s of it); "
    "corpus_restart reads the survey this machine made before.",
    "- smollm2_long: SmolLM2's own forward pass over 1,693 tokens (see the long-input rows above: attend() ÷ "
    "transformers at 2,048 tokens).",
    "- compare_gemma: loading Gemma 3 (its 262k-word tokenizer ~2 s, 1.1 GB of weights, the guard's 528-token "
    "probe over its 512-token window ~1.7 s), then both models on the text.",
]


def _fig(d: dict) -> str:
    return f"{d['median']:.1f} s ({d['min']:.1f}–{d['max']:.1f}, n={d['n']})"


def main() -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", type=Path, help="another checkout's app.py, timed first with the same clicks")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    before = measure(args.runs, args.before.resolve()) if args.before else None
    after = measure(args.runs)
    print("\n".join(lines(after, before)))
    if args.json:
        args.json.write_text(json.dumps({"before": before, "after": after}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
