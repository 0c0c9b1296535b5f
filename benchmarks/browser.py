"""Benchmark parts measured in Debian's Chromium against `streamlit run app.py` (the server `make run` starts).

Times are taken inside the page with performance.now(): from the keydown event (captured on the
document) to the first animation frame where the condition holds, so Playwright's own latency is
not counted.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

from attention.models import BUNDLED
from serving import APP, running_app, running_class, streamlit_command
from tests.harness import DONE, chromium, page_url, returning_learner, wait_idle

# A link that sets one of the lookup page's controls names a view; it opens whole for a browser that opened the
# page whole before (tests.harness.returning_learner), not held behind its questions as a first visit is.
LOOKUP_VIEW = {"lookup.scaled": "true"}

# Installed in the page: records keydown times, and resolves when a condition first holds in a frame.
PROBE = """
() => {
  window.__keys = [];
  document.addEventListener('keydown', () => window.__keys.push(performance.now()), true);
  window.__until = (cond, timeoutMs) => new Promise((resolve, reject) => {
    const start = performance.now();
    const tick = () => {
      let ok = false;
      try { ok = cond(); } catch (e) {}
      if (ok) return resolve(performance.now());
      if (performance.now() - start > timeoutMs) return reject(new Error('timeout'));
      requestAnimationFrame(tick);
    };
    tick();
  });
  // Count script runs as they start: a MutationObserver sees every change of the app's state attribute,
  // where a check once per animation frame could miss a run shorter than a frame.
  window.__runs = 0;
  const app = document.querySelector("[data-testid='stApp']");
  new MutationObserver(() => {
    if (app.getAttribute('data-test-script-state') === 'running') window.__runs += 1;
  }).observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
}
"""
GRID = "canvas.aeh-canvas[data-plot]"  # the all-heads grid, drawn (attention/figures/heatmap.js)
SHAPES = {"minilm": "6 layers × 12 heads", "smollm2": "30 layers × 9 heads"}  # as the page's caption says
def percentile(values, q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def summary(ms: list[float]) -> dict:
    return {"median": statistics.median(ms), "p95": percentile(ms, 0.95), "min": min(ms), "max": max(ms),
            "n": len(ms)}


def cold_start(browser, runs: int) -> dict:
    """`streamlit run` started -> the live weights chart drawn on the lookup page."""
    ms = []
    for _ in range(runs):
        t0 = time.perf_counter()
        with running_app() as url:
            page = browser.new_page()
            page.context.add_cookies([returning_learner(url, ["lookup"])])
            page.goto(page_url(url, "lookup", **LOOKUP_VIEW))
            page.wait_for_selector(".st-key-lookup-live .bar .fill", timeout=120_000)  # the live chart
            ms.append((time.perf_counter() - t0) * 1000)
            page.close()
    return summary(ms)


LIVE_SCOPE = ("(() => { const host = [...document.querySelectorAll('.st-key-lookup-live *')].find(e => e.shadowRoot);"
              " return host ? host.shadowRoot : document.querySelector('.st-key-lookup-live'); })()")
LIVE_WATCH = """
() => {
  // Per animation frame: did the live weights change since the last frame? Counted while __watching.
  const scope = SCOPE;
  window.__frames = 0; window.__watching = false; window.__liveStats = { latencies: [], frames: 0 };
  let last = '';
  const tick = () => {
    const now = [...scope.querySelectorAll('.bar .num')].map(e => e.textContent).join('|');
    if (window.__watching && now !== last) window.__frames += 1;
    last = now;
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
  window.__serverText = () => {  // the page's last alert: the server's "... wins with ..." answer
    const alerts = document.querySelectorAll('[data-testid=stAlert]');
    return alerts.length ? alerts[alerts.length - 1].innerText : '';
  };
}
""".replace("SCOPE", LIVE_SCOPE)


# How long an awaited event may take before a run gives up: the figures are the times the events took, so the
# limit only has to be generous. A loaded machine (the test suite beside the smoke run) answered a release
# past 10 s and a view past 60 s; a quiet one, within 1 s.
EVENT_WAIT_MS = 300_000


def live_drags(browser, url: str, drags: int) -> dict:
    """Scripted 1-second drags of the lookup page's live sweetness slider (60 pointer moves, ~16 ms apart):
    frames in which the weights changed, input event -> painted latency (the component's own rAF stamp),
    websocket messages the page sent during the drag, and release -> the server's answer updated."""
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    sent = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda payload: sent.append(time.perf_counter())))
    page.context.add_cookies([returning_learner(url, ["lookup"])])
    page.goto(page_url(url, "lookup", **LOOKUP_VIEW))
    wait_idle(page)
    slider = page.locator(".st-key-lookup-live input[type='range']").first
    slider.wait_for()
    page.evaluate(PROBE)
    page.evaluate(LIVE_WATCH)
    frames, latencies, during, release = [], [], [], []
    for d in range(drags):
        # Where the slider is now, before each drag: on a loaded machine a chart above it drew after the first
        # release and moved it 149 px down; the next drag, at the old place, missed it and the wait never ended.
        slider.scroll_into_view_if_needed()  # below the page's questions: off the first screen
        box = slider.bounding_box()
        y = box["y"] + box["height"] / 2
        start, end = (0.8, 0.2) if d % 2 == 0 else (0.2, 0.8)
        page.mouse.move(box["x"] + box["width"] * start, y)
        page.evaluate("() => { window.__frames = 0; window.__liveStats.latencies = []; }")
        # The server's answer before the drag: it must change by the release. Read after the drag, it could already
        # be the released value's (on a loaded machine a pause mid-drag let the component send it), and the wait
        # for a change then never ended (the suite's bench smoke hung 300 s twice).
        before = page.evaluate("() => window.__serverText()")
        page.mouse.down()
        page.evaluate("() => { window.__watching = true; }")
        t0 = time.perf_counter()
        for i in range(1, 61):
            page.mouse.move(box["x"] + box["width"] * (start + (end - start) * i / 60), y)
            page.wait_for_timeout(max(0.0, t0 + i / 60 - time.perf_counter()) * 1000)
        t1 = time.perf_counter()
        page.evaluate("() => { window.__watching = false; }")
        during.append(sum(1 for t in sent if t0 <= t <= t1))
        frames.append(page.evaluate("() => window.__frames"))
        latencies += page.evaluate("() => window.__liveStats.latencies")
        t_up = page.evaluate("() => performance.now()")
        page.mouse.up()
        done = page.evaluate(f"() => window.__until(() => window.__serverText() !== {before!r}, {EVENT_WAIT_MS})")
        release.append(max(0.0, done - t_up))  # 0: the answer came before the release
        wait_idle(page)
    page.close()
    return {"frames": summary(frames), "latency": summary(latencies), "messages": max(during),
            "release": summary(release)}


def settled(page, timeout_ms: int = 30_000) -> None:
    """Wait until the page's one-off work is done: Streamlit's chart and table code, fetched once a session while
    the browser is idle (pages/_prefetch.py). Fetched during a timed loop, its 6 MB of script took the server's
    event loop and the browser's main thread from the first few sentences."""
    # polled every 250 ms, not every frame: a check each frame keeps the browser from the idle time it waits for
    page.wait_for_function("() => window.__aePrefetchDone === true", timeout=timeout_ms, polling=250)


def submit_until_grid(page, box, text: str, timeout_ms: int) -> float:
    """Type `text` into `box`, press Ctrl+Enter -> ms until the script has finished and the all-heads grid
    is painted (the page must have PROBE installed)."""
    box.fill(text)
    runs = page.evaluate("() => window.__runs")
    box.press("Control+Enter")
    done = page.evaluate(f"""() => window.__until(() => window.__runs > {runs} &&
        document.querySelector("{DONE}") &&
        document.querySelector("{GRID}"), {timeout_ms})""")
    ms = done - page.evaluate("() => window.__keys[window.__keys.length - 1]")
    wait_idle(page, timeout=timeout_ms)
    return ms


TRIVIAL_APP = Path(__file__).with_name("trivial_app.py")


def trivial_command(port: int) -> list[str]:
    """serving.streamlit_command for benchmarks/trivial_app.py: the same server, the same flags."""
    return [str(TRIVIAL_APP) if part == str(APP) else part for part in streamlit_command(port)]


ELEMENTS_APP = Path(__file__).with_name("elements_app.py")


def elements_command(port: int) -> list[str]:
    """streamlit_command for benchmarks/elements_app.py: a page of Model heads' size, with no model."""
    return [str(ELEMENTS_APP) if part == str(APP) else part for part in streamlit_command(port)]


def input_to_idle(browser, url: str, texts: list[str]) -> dict:
    """The loop's floor: Ctrl+Enter in the trivial page's text box -> the script has finished and its one
    line shows the new text (the same keys and the same wait for idle as sentence_to_grid). Its runs are too
    short for the app's state attribute to show "running" (React draws both states in one render), so the
    line itself says that the run happened."""
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.goto(url)
    wait_idle(page)
    page.evaluate(PROBE)
    box = page.locator("[data-testid='stTextArea'] textarea").first
    ms = []
    for text in texts:
        box.fill(text)
        box.press("Control+Enter")
        shown = json.dumps(f"{len(text.split())} words: {text[:40]}")
        done = page.evaluate(f"""() => window.__until(() => document.querySelector("{DONE}") &&
            [...document.querySelectorAll("[data-testid='stText']")].some(e => e.textContent === {shown}),
            {EVENT_WAIT_MS})""")
        ms.append(done - page.evaluate("() => window.__keys[window.__keys.length - 1]"))
        wait_idle(page)
    page.close()
    return summary(ms)


def sentence_to_grid(browser, url: str, texts: list[str], model: str = "minilm", keep_open: bool = False):
    """Ctrl+Enter in the sentence box -> the script has finished and the all-heads grid is painted.

    With keep_open, returns (summary, the page still showing the last text) for views_after_load."""
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.goto(page_url(url, "model_heads", model=BUNDLED[model].label))  # the URL holds the picker's label
    wait_idle(page, timeout=180_000)  # the first visit loads the model: not part of the figure
    caption = " ".join(page.locator("[data-testid='stCaptionContainer']").all_inner_texts())  # guard, shape...
    if SHAPES[model] not in caption:
        raise RuntimeError(f"the page did not open {model}: {caption!r}")
    settled(page)
    page.evaluate(PROBE)
    box = page.locator("[data-testid='stTextArea'] textarea").first
    ms = []
    for text in texts:
        ms.append(submit_until_grid(page, box, text, EVENT_WAIT_MS))
    if keep_open:
        return summary(ms), page
    page.close()
    return summary(ms)


# The views of one text once it is loaded: each is a click, timed from the click to the view painted.
VIEWS = {  # name -> (what to click, what must be on screen afterwards)
    "zoom (next layer)": ("[data-testid='stNumberInput'] button[data-testid='stNumberInputStepUp']",
                          "[...document.querySelectorAll('.aeh-title')]"
                          ".some(t => t.textContent.startsWith('Layer 2'))"),
    "one head (Inside one head)": ("[data-testid='stSidebarNav'] a:has-text('Inside one head')",
                                   "document.querySelector('.st-key-inside-bar .main-svg')"),  # its one chart
    "statistics and distance (Head atlas)": ("[data-testid='stSidebarNav'] a:has-text('Head atlas')",
                                             "document.querySelector('.st-key-atlas-probe_pattern "
                                             "canvas.aeh-canvas[data-plot]') && document.querySelectorAll("
                                             "'[data-testid=stPlotlyChart] .main-svg').length >= 1"),
    "back to Model heads (grid, zoom, focus)": ("[data-testid='stSidebarNav'] a:has-text('Model heads')",
                                                f"document.querySelectorAll('{GRID}').length >= 3"),
}


def views_after_load(page, rounds: int) -> dict:
    """Every view of the text the page holds, `rounds` times each: the long input's cost is paid once."""
    page.evaluate("() => { window.__clicks = []; document.addEventListener('click', "
                  "() => window.__clicks.push(performance.now()), true); }")
    out = {name: [] for name in VIEWS}
    for _ in range(rounds):
        for name, (target, shown) in VIEWS.items():
            runs = page.evaluate("() => window.__runs")
            # A view not on screen before the click needs no run counted: a click that lands in a run still going
            # (a delayed rerun) joins it without a new start to count, and the wait for one never ended.
            shown_before = "true" if page.evaluate(f"() => !!({shown})") else "false"
            page.locator(target).first.click()
            try:
                done = page.evaluate(f"""() => window.__until(() => (!{shown_before} || window.__runs > {runs}) &&
                    document.querySelector("{DONE}") && ({shown}), {EVENT_WAIT_MS})""")
            except Exception as error:  # noqa: BLE001 - say which view and what the page was doing
                state = page.evaluate(f"""() => ({{runs: window.__runs, idle: !!document.querySelector("{DONE}"),
                    shown: !!({shown}), url: location.href}})""")
                raise RuntimeError(f"the view {name!r} never came: runs before the click {runs}, now {state}") \
                    from error
            out[name].append(done - page.evaluate("() => window.__clicks[window.__clicks.length - 1]"))
            wait_idle(page, timeout=60_000)
            if name.startswith("zoom"):  # back to layer 1 for the next round
                page.locator("[data-testid='stNumberInput'] button[data-testid='stNumberInputStepDown']").first.click()
                wait_idle(page, timeout=60_000)
    page.close()
    return {name: summary(ms) for name, ms in out.items()}


def websocket_bytes(browser, url: str, text: str) -> int:
    """Bytes the server sends over the websocket to render the Model heads page for `text`."""
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    total = [0]

    def on_ws(ws):
        ws.on("framereceived", lambda payload: total.__setitem__(0, total[0] + len(payload)))

    page.on("websocket", on_ws)
    page.goto(page_url(url, "model_heads", text=text))
    wait_idle(page, timeout=180_000)
    page.wait_for_selector(GRID)
    page.close()
    return total[0]


def grid_during_scan(browser, url: str, prompts: list[str], texts16: list[str], alone16: list[str]) -> dict:
    """One session starts the exact scan of SmolLM2's 270 heads; another, at the same moment, submits a
    16-token sentence to SmolLM2 on Model heads: how long its grid takes while the scan holds the model's
    lock batch by batch ("during"), and the same page's grid for other 16-token texts with no scan
    running ("alone"), measured first."""
    scanning = browser.new_page(viewport={"width": 1280, "height": 1000})
    scanning.goto(page_url(url, "predictions", model=BUNDLED["smollm2"].label))
    wait_idle(scanning, timeout=180_000)
    other = browser.new_page(viewport={"width": 1280, "height": 1000})
    other.goto(page_url(url, "model_heads", model=BUNDLED["smollm2"].label))
    wait_idle(other, timeout=180_000)
    other.evaluate(PROBE)
    alone = [submit_until_grid(other, other.locator("[data-testid='stTextArea'] textarea").first, text, EVENT_WAIT_MS)
             for text in alone16]
    ms, scan_s = [], []
    for prompt, text in zip(prompts, texts16, strict=True):
        box = scanning.locator("[data-testid='stTextArea'] textarea").first
        box.fill(prompt)
        box.press("Control+Enter")
        wait_idle(scanning, timeout=120_000)
        started = time.perf_counter()
        scanning.get_by_role("button", name="Remove every head in turn").click()
        scanning.wait_for_timeout(300)  # the scan is running
        ms.append(submit_until_grid(other, other.locator("[data-testid='stTextArea'] textarea").first, text,
                                      EVENT_WAIT_MS))
        wait_idle(scanning, timeout=120_000)
        scan_s.append(time.perf_counter() - started)  # click -> the scan's page idle again
    scanning.close()
    other.close()
    return {"during": summary(ms), "alone": summary(alone), "scan_s": statistics.median(scan_s)}


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds the process (all its threads) has used so far: /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14 and 15


def server_cpu(browser, url: str, texts16: list[str], rounds: int) -> dict:
    """The server's CPU seconds per interaction, three kinds, `rounds` each (the process's CPU clock read
    before the action and after the page is idle again; its idle rate over the same wall time taken off):
    a 16-token sentence on Model heads (MiniLM, a text not seen before), a live slider released on the
    lookup page, and a page switch (Model heads <-> Head atlas, the text carried)."""
    pid = url.pid
    t, c = time.perf_counter(), cpu_seconds(pid)
    time.sleep(3)
    idle_rate = (cpu_seconds(pid) - c) / (time.perf_counter() - t)

    def measure(action, page) -> float:
        t, c = time.perf_counter(), cpu_seconds(pid)
        action()
        wait_idle(page, timeout=60_000)
        return max(0.0, cpu_seconds(pid) - c - idle_rate * (time.perf_counter() - t))

    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.context.add_cookies([returning_learner(url, ["lookup"])])
    page.goto(page_url(url, "lookup", **LOOKUP_VIEW))
    wait_idle(page)
    slider = page.locator(".st-key-lookup-live input[type='range']").first
    slider.scroll_into_view_if_needed()
    box = slider.bounding_box()
    y = box["y"] + box["height"] / 2

    def release(start, end):
        page.mouse.move(box["x"] + box["width"] * start, y)
        page.mouse.down()
        for i in range(1, 11):
            page.mouse.move(box["x"] + box["width"] * (start + (end - start) * i / 10), y)
        page.mouse.up()
        page.wait_for_timeout(300)  # the release's rerun has started

    out = {"slider release": [measure(lambda d=d: release(*((0.8, 0.2) if d % 2 else (0.2, 0.8))), page)
                              for d in range(rounds)]}
    page.goto(page_url(url, "model_heads", model=BUNDLED["minilm"].label))
    wait_idle(page, timeout=180_000)
    box_ = page.locator("[data-testid='stTextArea'] textarea").first

    def submit(text):
        box_.fill(text)
        box_.press("Control+Enter")
        page.wait_for_timeout(300)

    out["sentence on Model heads"] = [measure(lambda text=text: submit(text), page) for text in texts16[:rounds]]

    def switch(name):
        page.locator("[data-testid='stSidebarNav'] a", has_text=name).first.click()
        page.wait_for_timeout(300)

    out["page switch"] = [measure(lambda i=i: switch("Head atlas" if i % 2 == 0 else "Model heads"), page)
                          for i in range(2 * rounds)]
    page.close()
    return {"idle_rate": idle_rate, **{k: summary(v) for k, v in out.items()}}


# In each session's page: the moment its grid is on screen after the submit, for class_load to poll.
WATCH_GRID = """
(runs) => {
  window.__gridAt = null;
  window.__until(() => window.__runs > runs && document.querySelector("DONE") &&
                 document.querySelector("GRID"), 300000)
    .then(t => { window.__gridAt = t; }, () => { window.__gridAt = -1; });
}
""".replace("DONE", DONE).replace("GRID", GRID)


# What a page shows that its user would call an error: a traceback, an error box, or the connection lost.
PAGE_ERRORS = """() => [
  ...[...document.querySelectorAll("[data-testid='stException']")].map(e => 'exception: ' + e.innerText),
  ...[...document.querySelectorAll("[data-testid='stAlertContentError']")]
     .filter(e => !e.closest("[data-testid='stException']")).map(e => 'error box: ' + e.innerText),
  ...[...document.querySelectorAll("[data-testid='stConnectionStatus']")].map(e => 'connection: ' + e.innerText),
].map(t => t.slice(0, 300))"""


def class_load(browser, url: str, texts: list[list[str]]) -> dict:
    """Simultaneous sessions, each in a browser context of its own (its own cookies: nginx's sticky cookie
    is per browser): all open Model heads on MiniLM, then in each round press Ctrl+Enter on a 16-token
    sentence one after another (a few ms apart) -> each session's sentence -> grid painted, its own clock.
    texts[round][session]. A session whose grid does not come within 5 min, or that shows an error
    (PAGE_ERRORS), counts as an error; error_texts says which round and session, and what it showed."""
    contexts = [browser.new_context(viewport={"width": 1280, "height": 900}) for _ in texts[0]]
    pages = [c.new_page() for c in contexts]
    for page in pages:
        page.goto(page_url(url, "model_heads", model=BUNDLED["minilm"].label))
    for page in pages:
        wait_idle(page, timeout=300_000)
        page.evaluate(PROBE)
    ms, errors = [], []
    for r, round_texts in enumerate(texts):
        boxes = [page.locator("[data-testid='stTextArea'] textarea").first for page in pages]
        for box, text in zip(boxes, round_texts, strict=True):
            box.fill(text)
        for page, box in zip(pages, boxes, strict=True):
            page.evaluate(WATCH_GRID, page.evaluate("() => window.__runs"))
            box.press("Control+Enter")
        for s, page in enumerate(pages):
            page.wait_for_function("() => window.__gridAt !== null", timeout=310_000)
            at = page.evaluate("() => window.__gridAt")
            shown = page.evaluate(PAGE_ERRORS)
            if at < 0 or shown:
                runs = page.evaluate("() => window.__runs")
                said = "; ".join(shown) or f"no grid within 5 min (script runs seen: {runs})"
                errors.append(f"round {r + 1}, session {s + 1}: {said}")
            else:
                ms.append(at - page.evaluate("() => window.__keys[window.__keys.length - 1]"))
        for page in pages:
            wait_idle(page, timeout=300_000)
    for c in contexts:
        c.close()
    return {**summary(ms), "errors": len(errors), "error_texts": errors, "sessions": len(texts[0]),
            "rounds": len(texts), "server_errors": log_errors(getattr(url, "app_logs", [url.log]))}


def log_errors(paths: list[Path]) -> list[str]:
    """Each traceback's last line (the exception) and each line naming an error in the app processes' logs."""
    found = []
    for path in paths:
        lines = Path(path).read_text(errors="replace").splitlines() if Path(path).exists() else []
        inside = False
        for line in lines:
            if line.startswith("Traceback"):
                inside = True
            elif inside and line and not line[0].isspace():
                found.append(line[:300])
                inside = False
            elif not inside and ("Error" in line or "error" in line.split(":", 1)[0]):
                found.append(line[:300])
    return found


def server_memory_mb(pid: int) -> dict:
    status = Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return {k: int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM")}


CLASS_SESSIONS = 16
CLASS_ROUNDS = 5  # issue 33: at least 5 rounds of 16 sessions behind nginx with 0 errors


def run(smoke: bool, texts16: list[str], texts512: list[str], payload_texts: dict, long_texts: dict,
        scan_prompts: list[str], smollm2_texts16: list[str], class_texts: list[list[str]]) -> dict:
    """long_texts: tokens -> SmolLM2 texts of that length (2,048 and 4,096 tokens); scan_prompts and
    smollm2_texts16: one of each per round of grid_during_scan, then as many again for the grid alone;
    class_texts: [round][session] 16-token MiniLM texts for the load test, one process then one per core
    behind nginx (skipped when nginx is not installed)."""
    out = {}
    with chromium() as browser:
        with running_app(app_command=trivial_command) as url:  # the floor, with the texts the grid gets
            out["floor16"] = input_to_idle(browser, url, texts16)
            if not smoke:
                out["floor512"] = input_to_idle(browser, url, texts512)
        if not smoke:
            with running_app(app_command=elements_command) as url:  # Streamlit's cost of a page that size
                out["elements16"] = input_to_idle(browser, url, texts16)
        out["cold_start"] = cold_start(browser, 1 if smoke else 3)
        with running_app() as url:
            out["live"] = live_drags(browser, url, 2 if smoke else 10)
            out["sentence16"] = sentence_to_grid(browser, url, texts16)
            if smoke:
                out["views"] = views_after_load(sentence_to_grid(browser, url, texts16[:1], keep_open=True)[1], 1)
            else:
                out["sentence512"] = sentence_to_grid(browser, url, texts512)
                out["ws_bytes"] = {n: websocket_bytes(browser, url, t) for n, t in payload_texts.items()}
                for n, texts in long_texts.items():
                    out[f"smollm2_{n}"], page = sentence_to_grid(browser, url, texts, model="smollm2", keep_open=True)
                    if n == max(long_texts):
                        out["views"] = views_after_load(page, 3)
                    else:
                        page.close()
                half = len(smollm2_texts16) // 2
                out["grid_during_scan"] = grid_during_scan(browser, url, scan_prompts, smollm2_texts16[:half],
                                                           smollm2_texts16[half:])
            out["cpu"] = server_cpu(browser, url, [t + " again" for t in texts16], 1 if smoke else 5)
            out["server_memory"] = server_memory_mb(url.pid)
        if not smoke:
            with running_app() as url:
                out["class_one"] = class_load(browser, url, class_texts)
            if Path("/usr/sbin/nginx").exists():
                processes = os.cpu_count() or 1
                with running_class(processes) as url:
                    out["class_nginx"] = {**class_load(browser, url, class_texts), "processes": processes,
                                          "rss_mb": [server_memory_mb(pid)["VmHWM"] for pid in url.pids]}
    return out
