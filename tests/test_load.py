"""Browser sessions at once against one server: no errors, no state leaking, the model loaded once.

Bounded: loopback only, 4 sessions x 6 interactions in make test (LOAD_SESSIONS and LOAD_ROUNDS change it: make
soak runs 8 x 10), every wait has a timeout (make bench's browser section runs the longer load test of record,
16 sessions behind nginx).
"""

import os
import re

import numpy as np
import pytest

from attention.toy import examples as ex
from attention.toy.lookup import soft_lookup
from serving import running_app
from tests.harness import DONE, chromium, page_url, returning_learner, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.slow]
SESSIONS = int(os.environ.get("LOAD_SESSIONS", "4"))  # at most 8 (SESSION_WORDS)
ROUNDS = int(os.environ.get("LOAD_ROUNDS", "3"))  # each round: one slider step and one sentence per session
# Whole words the MiniLM tokenizer keeps as one piece, so each session's sentence is recognisable in the chart.
SESSION_WORDS = ["apple", "river", "money", "chair", "horse", "cloud", "music", "table"]
ROUND_WORDS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
# Token labels of every chart on a page: tick texts (small charts) and "position·token" x values (big ones).
X_LABELS = ("() => [...[...document.querySelectorAll('[data-testid=stPlotlyChart] .js-plotly-plot')].flatMap(gd => ["
            "...((gd.layout && gd.layout.xaxis && gd.layout.xaxis.ticktext) || []),"
            "...(gd.data || []).flatMap(t => Array.isArray(t.x) ? t.x : [])]),"
            "...[...document.querySelectorAll('canvas.aeh-canvas')]"
            ".flatMap(c => JSON.parse(c.dataset.xLabels || '[]'))]"
            ".map(l => String(l).split('·').pop())")


def expected_bars(sweetness: float) -> list[str]:
    res = soft_lookup([sweetness, ex.FRUIT_QUERY[1], ex.FRUIT_QUERY[2]], ex.FRUIT_KEYS, ex.FRUIT_VALUES,
                      ex.FRUIT_LABELS)
    return [f"{w:.3f}" for w in np.rint(res.weights * 1000) / 1000]  # as the live component prints them


LIVE_BARS = ("() => { const host = [...document.querySelectorAll('.st-key-lookup-live *')].find(e => e.shadowRoot);"
             " const scope = host ? host.shadowRoot : document;"
             " return [...scope.querySelectorAll('.bar .num')].map(e => e.textContent).join(','); }")


def test_sessions_at_once_neither_leak_nor_load_the_model_twice():
    with running_app() as url, chromium() as browser:
        sessions = []
        for s in range(SESSIONS):
            ctx = browser.new_context(viewport={"width": 1100, "height": 900})
            ctx.add_cookies([returning_learner(url, ["lookup", "model_heads"])])  # the views, not the questions
            lookup, heads = ctx.new_page(), ctx.new_page()
            lookup.goto(page_url(url, "lookup", **{"lookup.sweetness": f"{0.05 * s:.2f}"}))
            heads.goto(page_url(url, "model_heads", text=f"Session {s} starts here"))
            sessions.append((s, lookup, heads))
        for _, lookup, heads in sessions:
            wait_idle(lookup, timeout=120_000)
            wait_idle(heads, timeout=120_000)
            # the live component mounts just after the script finishes (its module loads in the page)
            lookup.locator(".st-key-lookup-live input[type='range']").first.wait_for(timeout=120_000)
        for r in range(ROUNDS):
            # Fire every session's two interactions before waiting for any, so the server serves them together.
            for s, lookup, heads in sessions:
                slider = lookup.locator(".st-key-lookup-live input[type='range']").first  # the live slider
                slider.focus()
                slider.press("ArrowRight")
                box = heads.locator("[data-testid='stTextArea'] textarea").first
                box.fill(f"Session {SESSION_WORDS[s]} round {ROUND_WORDS[r]}")
                box.press("Control+Enter")
            for s, lookup, heads in sessions:
                value = 0.05 * s + 0.01 * (r + 1)
                want = expected_bars(value)
                lookup.wait_for_function(f"want => ({LIVE_BARS})() === want.join(',')", arg=want, timeout=30_000)
                lookup.wait_for_function(  # the release reached the server: the URL follows
                    "v => Math.abs(Number(new URLSearchParams(location.search).get('lookup.sweetness')) - v) < 1e-9",
                    arg=value, timeout=30_000)
                heads.wait_for_function(
                    f"() => {{ const x = ({X_LABELS})(); return x.includes('{SESSION_WORDS[s]}') "
                    f"&& x.includes('{ROUND_WORDS[r]}'); }}", timeout=60_000)
                heads.wait_for_selector(DONE, timeout=60_000)
                labels = set(heads.evaluate(X_LABELS))
                others = {w for o, w in enumerate(SESSION_WORDS) if o != s}
                assert not labels & others, "another session's sentence leaked in"
                for page in (lookup, heads):
                    assert page.locator("[data-testid='stException']").count() == 0
                    assert page.locator("[data-testid='stAlert']").filter(has_text="Error").count() == 0
                assert np.isclose(float(re.search(r"sweetness=([0-9.]+)", lookup.url).group(1)), value)
        log = url.log.read_text(errors="replace")
    assert "Traceback" not in log
    # transformers prints one "Loading weights" progress bar per from_pretrained: one model, one load.
    assert len(re.findall(r"Loading weights: 100%", log)) == 1, "the model was loaded more than once"
