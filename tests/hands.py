"""A hand on every control, in Chromium: what a student's fingers do that a test setting state never does.

The newcomer who crashed Why scale on every slider release (issue 68) dragged a component's slider; 928 tests set
the page's widget to an int in AppTest, where the browser hands back the component's own float. Here a seeded
random walk opens each page as a visitor does and drives its controls as a hand does:

- a slider (Streamlit's, a select slider, a live component's range, the lookup's query plane): focused, then
  arrow presses in a burst as a held key repeats them (every ~30 ms), Home, End, Page Up/Down; or dragged with the
  mouse from where it is to a random point and let go;
- a number input: typed its minimum, its maximum, a float where an int is kept, empty, out of range, a word;
- a select box, a radio or a segmented control: another option; a toggle or a checkbox: flipped;
- a text box: long, empty, only spaces, hostile (markup, a formula for a spreadsheet, right-to-left, emoji).

After every action the page must hold: no exception box, no failure message of our own (pages/_failure.py), no
script error or failed request in the console (Streamlit's own probe of /<page>/_stcore/health, answered 404 by
design, aside). A failure names the seed, the page and every action so far: `walk(..., seed=N, pages=[...])`
replays it. Model and precision pickers are left alone unless `models=True` (a model load is a minute's work:
make soak turns them on).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from pathlib import Path

from tests.harness import open_whole, page_url, wait_idle

MAIN = "[data-testid=stMain]"
HELD_KEY_MS = 33  # a held arrow repeats about 30 times a second
ODD_NUMBERS = ("{min}", "{max}", "{float}", "", "{below}", "{above}", "abc", "1e9", "-0")
HOSTILE_TEXTS = (
    "",
    "   ",
    "<img src=x onerror=alert(1)><script>alert(2)</script>",
    "=HYPERLINK(\"http://x\",\"y\") ; DROP TABLE answers; --",
    "مرحبا بالعالم bank שלום",
    "🙂🙃🎉 bank 🏦",
    "{{7*7}} ${7*7} %s %d \\n \\x00",
    ("The bank of the river was steep, and the money in the bank was safe. " * 40)[:2500],
    "bank",
)
EXPECTED_404 = re.compile(r"/_stcore/(health|host-config)$")  # Streamlit asks /<page>/_stcore/... first, by design
SKIP_LABELS = re.compile(r"^(Model|Precision)( [AB])?$|Hugging Face")  # a model load per pick: soak only


@dataclass
class Walk:
    """What one walk did and found: the log a failure prints, to replay it."""

    seed: int
    actions: list[str] = field(default_factory=list)
    console: list[str] = field(default_factory=list)

    def failure(self, page, what: str, server_log: str | None = None) -> str:
        steps = "\n".join(f"  {i + 1}. {a}" for i, a in enumerate(self.actions))
        found = re.search(r"AE-[0-9A-F]{6}", what or "")
        where = ""
        if found and server_log:  # the traceback the server logged under the message's reference
            try:
                text = Path(server_log).read_text(errors="replace")
                where = "\nserver: " + text[text.find(f"[{found.group(0)}]"):][:3000]
            except OSError:
                pass
        return f"seed {self.seed}: {what}\nafter:\n{steps}\nconsole: {self.console[-5:]}{where}"


def watch_console(page, walk: Walk) -> None:
    """Collect script errors and failed requests (but Streamlit's expected 404 probes) into walk.console."""
    def on_console(msg):
        if msg.type == "error" and "Failed to load resource" not in msg.text:
            walk.console.append(f"console: {msg.text[:300]}")

    def on_response(response):
        if response.status >= 400 and not EXPECTED_404.search(response.url.split("?")[0]):
            walk.console.append(f"HTTP {response.status} {response.url}")

    page.on("console", on_console)
    page.on("pageerror", lambda err: walk.console.append(f"page error: {err}"))
    page.on("response", on_response)


def broken(page) -> str | None:
    """What is wrong on the page now, in words, or None: an exception box or a failure message."""
    if page.locator("[data-testid=stException]").count():
        return "an exception box: " + page.locator("[data-testid=stException]").first.inner_text()[:400]
    failed = page.locator("[class*='st-key-page-failed-']")
    if failed.count():
        return "a failure message: " + failed.first.inner_text()[:300]
    return None


def settle(page, timeout: float = 240_000) -> None:
    """Wait until the page has run what the last action started (a key burst's release waits 300 ms first)."""
    page.wait_for_timeout(450)
    wait_idle(page, timeout=timeout)


# --- the controls a hand finds ---------------------------------------------------------------------------------
def _label(loc) -> str:
    try:
        return (loc.get_attribute("aria-label") or loc.evaluate(
            "e => { const w = e.closest('[data-testid^=st]'); const l = w && w.querySelector('label');"
            " return (l && l.textContent) || (e.labels && e.labels[0] && e.labels[0].textContent) || ''; }")
            or "").strip()[:60]
    except Exception:  # noqa: BLE001 - an element gone in a rerun has no label
        return ""


def controls(page, *, models: bool) -> list[tuple[str, object]]:
    """Every control a hand can reach in the page's main area, as (kind, locator)."""
    main = page.locator(MAIN)
    found = []
    kinds = {
        "slider": main.get_by_role("slider"),
        "number": main.locator("[data-testid=stNumberInput] input"),
        "select": main.locator("[data-testid=stSelectbox]"),
        "radio": main.locator("[data-testid=stRadio] [role=radiogroup]"),
        "toggle": main.locator("[data-testid=stCheckbox] label"),
        "segments": main.locator("[data-testid=stButtonGroup]"),
        "text": main.locator("[data-testid=stTextInput] input, [data-testid=stTextArea] textarea"),
    }
    for kind, loc in kinds.items():
        for i in range(loc.count()):
            el = loc.nth(i)
            try:
                if not el.is_visible() or el.is_disabled():
                    continue
            except Exception:  # noqa: BLE001
                continue
            if not models and kind in ("select", "text") and SKIP_LABELS.search(_label(el)):
                continue
            found.append((kind, el))
    return found


# --- what a hand does to each ----------------------------------------------------------------------------------
def press_keys(page, el, rng: random.Random) -> str:
    el.focus()
    how = rng.choice(["held", "held", "home", "end", "page", "taps"])
    if how == "held":
        key, n = rng.choice(["ArrowRight", "ArrowLeft", "ArrowUp", "ArrowDown"]), rng.randint(5, 40)
        for _ in range(n):
            page.keyboard.press(key, delay=5)
            page.wait_for_timeout(HELD_KEY_MS)
        return f"held {key} for {n} repeats"
    if how == "taps":
        n = rng.randint(2, 6)
        for _ in range(n):
            page.keyboard.press("ArrowRight")
            page.wait_for_timeout(rng.randint(150, 600))
        return f"tapped ArrowRight {n} times"
    key = {"home": "Home", "end": "End", "page": rng.choice(["PageUp", "PageDown"])}[how]
    page.keyboard.press(key)
    return f"pressed {key}"


def drag(page, el, rng: random.Random) -> str:
    track = el.locator("xpath=ancestor::*[@data-testid='stSlider'][1]//*[@role='group']")
    if track.count():  # Streamlit's own slider: its range input is a 1-px box; the hand drags the drawn track
        el = track.first
    el.scroll_into_view_if_needed()
    box = el.bounding_box()
    if not box:
        return "drag: no box"
    x0, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    x1 = box["x"] + rng.uniform(0.0, 1.0) * box["width"]
    page.mouse.move(x0, y)
    page.mouse.down()
    for t in (0.25, 0.5, 0.75, 1.0):
        page.mouse.move(x0 + (x1 - x0) * t, y, steps=3)
        page.wait_for_timeout(40)
    page.mouse.up()
    return f"dragged to {100 * (x1 - box['x']) / max(box['width'], 1):.0f}%"


def type_number(page, el, rng: random.Random) -> str:
    lo, hi = el.get_attribute("min"), el.get_attribute("max")
    step = el.get_attribute("step") or "1"
    lo_f = float(lo) if lo not in (None, "") else -10.0
    hi_f = float(hi) if hi not in (None, "") else 10.0
    integer = "." not in step and float(step) == int(float(step))
    pattern = rng.choice(ODD_NUMBERS)
    typed = pattern.format(min=lo if lo is not None else "0", max=hi if hi is not None else "1",
                           float=f"{(lo_f + hi_f) / 2 + (0.37 if integer else 0.0037):.4f}",
                           below=f"{lo_f - 5:g}", above=f"{hi_f * 3 + 7:g}")
    el.click()
    page.keyboard.press("Control+A")  # typed over what was there, key by key, as fingers do (letters included)
    page.keyboard.press("Backspace")
    page.keyboard.type(typed, delay=20)
    page.keyboard.press(rng.choice(["Enter", "Tab"]))
    return f"typed {typed!r}"


def pick_option(page, el, rng: random.Random) -> str:
    el.click()
    options = page.get_by_role("option")
    try:
        options.first.wait_for(timeout=3_000)
    except Exception:  # noqa: BLE001 - a select box that did not open
        page.keyboard.press("Escape")
        return "select: did not open"
    n = options.count()
    i = rng.randrange(n)
    text = options.nth(i).inner_text()[:40]
    options.nth(i).click()
    return f"picked {text!r} of {n}"


def click_one(choices, rng: random.Random) -> str:
    """Click one of `choices` (a locator of several) at random; its text."""
    i = rng.randrange(choices.count())
    text = choices.nth(i).inner_text()[:40]
    choices.nth(i).click()
    return text


def pick_radio(page, el, rng: random.Random) -> str:
    return f"chose {click_one(el.locator('label'), rng)!r}"


def type_text(page, el, rng: random.Random) -> str:
    text = rng.choice(HOSTILE_TEXTS)
    el.fill(text)
    if el.evaluate("e => e.tagName") == "TEXTAREA":
        el.press("Control+Enter")
    else:
        el.press("Enter")
    return f"typed {text[:40]!r}{'…' if len(text) > 40 else ''} ({len(text)} chars)"


def pick_segment(page, el, rng: random.Random) -> str:
    return f"pressed segment {click_one(el.locator('button'), rng)!r}"


ACTIONS = {
    "segments": pick_segment,
    "slider": lambda page, el, rng: (press_keys if rng.random() < 0.6 else drag)(page, el, rng),
    "number": type_number,
    "select": pick_option,
    "radio": pick_radio,
    "toggle": lambda page, el, rng: (el.click(), "flipped")[1],
    "text": type_text,
}


def act(page, rng: random.Random, *, models: bool) -> str | None:
    """One action on a control picked at random; its description, or None when the page has no control."""
    found = controls(page, models=models)
    if not found:
        return None
    kind = rng.choice(sorted({k for k, _ in found}))  # a kind first: a page of many radios still gets its slider moved
    el = rng.choice([e for k, e in found if k == kind])
    label = _label(el)
    el.scroll_into_view_if_needed(timeout=5_000)
    return f"{kind} “{label}”: " + ACTIONS[kind](page, el, rng)


def walk(browser, base: str, pages: list[str], *, seed: int, actions_per_page: int, models: bool = False,
         width: int = 1280) -> Walk:
    """Open each page (its URL name) in turn and do `actions_per_page` random actions on it; raise
    AssertionError at the first page that breaks, with the walk's log."""
    log = Walk(seed)
    page = browser.new_page(viewport={"width": width, "height": 900})
    watch_console(page, log)
    try:
        for name in pages:
            rng = random.Random(f"{seed}:{name}")  # a page's walk replays alone, whatever came before it
            open_whole(page, page_url(base, name))
            log.actions.append(f"opened {name or 'home'}")
            for _ in range(actions_per_page):
                try:
                    did = act(page, rng, models=models)
                except Exception as err:  # noqa: BLE001 - a control gone in a rerun: the walk goes on
                    did = f"(an action could not finish: {str(err).splitlines()[0][:120]})"
                if did is None:
                    break
                log.actions.append(f"{name or 'home'}: {did}")
                settle(page)
                what = broken(page)
                assert what is None and not log.console, log.failure(page, what or "console errors",
                                                                     getattr(base, "log", None))
    finally:
        page.close()
    return log
