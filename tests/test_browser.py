"""Real browser: Debian Chromium driven by Playwright against `streamlit run app.py`."""


import pytest

from attention.models import attend
from serving import APP
from tests.harness import open_whole, page_url, wait_idle

pytestmark = pytest.mark.browser
SHOTS = APP.parent / "artifacts" / "screenshots"


def bar_labels(page) -> list[str]:
    """The numbers printed on the first bar chart (the softmax weights)."""
    chart = page.locator("[data-testid='stPlotlyChart']").first
    return [t.text_content() for t in chart.locator("g.textpoint text, text.bartext").all()]


LIVE = ".st-key-lookup-live"  # the live lookup component's container


def live_numbers(page) -> dict:
    """What the live component shows now: the three weights as printed, the winner line, the slider values."""
    return page.evaluate("""() => {
        const host = [...document.querySelectorAll('.st-key-lookup-live *')].find(e => e.shadowRoot) || null;
        const scope = host ? host.shadowRoot : document.querySelector('.st-key-lookup-live');
        return {
            weights: [...scope.querySelectorAll('.bar .num')].map(e => e.textContent),
            winner: scope.querySelector('.winner').textContent,
            output: [...scope.querySelectorAll('.output .pair')].map(e => e.textContent),
            sliders: [...scope.querySelectorAll('input[type=range]')].map(e => Number(e.value)),
        };
    }""")


def test_live_slider_redraws_while_dragging_and_the_tables_follow_on_release(app_url, browser):
    import numpy as np

    from attention.toy import examples as ex
    from attention.toy.lookup import soft_lookup

    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.goto(page_url(app_url, "lookup", **{"lookup.scaled": "true"}))  # a view link: its questions still first
    wait_idle(page)
    assert page.locator(LIVE).count() == 0  # the settings in the address open nothing before an answer
    page.get_by_role("button", name="Show the rest of the page").click()
    wait_idle(page)
    slider = page.locator(f"{LIVE} input[type='range']").first
    slider.wait_for()
    assert live_numbers(page)["weights"] == ["0.372", "0.347", "0.282"]  # the article's example
    slider.scroll_into_view_if_needed()  # below the page's questions: off the first screen
    box = slider.bounding_box()
    rng = np.random.default_rng(7)
    page.mouse.move(box["x"] + box["width"] * 0.8, box["y"] + box["height"] / 2)
    page.mouse.down()
    seen = set()
    for fraction in rng.uniform(0.02, 0.98, 32):
        page.mouse.move(box["x"] + box["width"] * fraction, box["y"] + box["height"] / 2)
        shown = live_numbers(page)
        step = shown["sliders"][0]
        q = np.array([step / 100, 0.2, 0.1])
        res = soft_lookup(q, ex.FRUIT_KEYS, ex.FRUIT_VALUES, ex.FRUIT_LABELS)
        assert shown["weights"] == [f"{w:.3f}" for w in np.rint(res.weights * 1000) / 1000], (step, shown)
        assert shown["output"] == [f"{name} {v:.3f}" for name, v in
                                   zip(ex.FRUIT_VALUE_FEATURES, np.rint(res.output * 1000) / 1000, strict=True)]
        assert shown["winner"].startswith("No item wins" if res.tie else res.winner)  # a tie to 3 decimals: none
        seen.add(tuple(shown["weights"]))
    assert len(seen) > 20  # the chart changed while the mouse was still down
    page.mouse.up()
    released = live_numbers(page)["sliders"][0] / 100
    page.wait_for_function(f"() => location.search.includes('lookup.sweetness={released:g}')", timeout=15_000)
    wait_idle(page)
    winner = live_numbers(page)["winner"].split(" wins")[0]
    info = page.locator("[data-testid='stAlert']").last.inner_text()
    assert info.startswith(winner.split(":")[0])  # the server's answer, recomputed for the released value
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "test-lookup-after-drag.png"))
    page.close()


def test_live_component_writes_hostile_names_as_text(browser):
    """The component's own file, run on a blank page with a hostile item name: text, never markup."""
    import base64

    from pages._live import component_source

    js = component_source("live_lookup", "js")
    evil = '<img src=x onerror="window.__xss=1">'
    zeros = base64.b64encode(bytes(2 * 3 * 101 * 2)).decode()
    plane = base64.b64encode(bytes(101 * 101 * 2 * 2)).decode()
    data = {"key": "t", "labels": [evil, "b"], "features": ["f0", "f1", evil], "value_features": [evil],
            "query_steps": [1, 2, 3], "keys": [[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]], "pairs": [[0, 1]],
            "sweeps": {"weights": zeros, "outputs": base64.b64encode(bytes(3 * 101 * 4)).decode(),
                       "winners": [0] * 303},
            "plane": {"features": [0, 1], "weights": plane, "winners": base64.b64encode(bytes(101 * 101)).decode()},
            "signature": "1"}
    page = browser.new_page()
    page.set_content("<div id=root></div>")
    page.evaluate("""async ([js, data]) => {
        const url = URL.createObjectURL(new Blob([js], {type: 'text/javascript'}));
        const mod = await import(url);
        mod.default({data, parentElement: document.getElementById('root'), setStateValue: () => {}});
    }""", [js, data])
    assert page.locator("#root img").count() == 0 and not page.evaluate("() => window.__xss")
    assert evil in page.locator("#root").inner_text()
    page.close()


def test_deep_link_reopens_the_same_view(app_url, browser):
    page = browser.new_page()
    link = page_url(app_url, "lookup", **{"lookup.sweetness": "0.1", "lookup.durability": "0.9"})
    page.goto(link)
    wait_idle(page)  # its questions first: the link's view is behind them (it would show the first one's answer)
    page.get_by_role("button", name="Show the rest of the page").wait_for(timeout=10_000)
    assert page.locator(".st-key-lookup-live").count() == 0  # not the link's weights: they answer question 1
    open_whole(page, link)
    assert page.get_by_role("heading", name="Lookup: hard vs soft").is_visible()
    assert "chair" in page.locator("[data-testid='stAlert']").last.inner_text()
    nav = page.locator("[data-testid='stSidebarNav']").inner_text()
    assert "Toy examples" in nav  # the app's own navigation, not Streamlit's file list
    page.goto(page_url(app_url, "circuits", text="When Anna and Peter went to the park, Peter gave a ball to"))
    wait_idle(page, timeout=120_000)  # a page's old address opens the page it became, with the link's text
    assert page.url.split("?")[0].endswith("/what_heads_do") and "Anna" in page.url
    assert page.get_by_role("heading", name="What heads do").is_visible()
    assert "circuits" not in page.locator("[data-testid='stSidebarNav']").inner_text()
    page.close()


@pytest.mark.slow
def test_typing_a_sentence_updates_the_model_grid(app_url, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.goto(page_url(app_url, "model_heads"))
    wait_idle(page, timeout=120_000)
    charts = page.locator("canvas.aeh-canvas[data-plot]")  # the grid, the zoom, the token focus, drawn
    charts.first.wait_for()
    box = page.locator("[data-testid='stTextArea'] textarea").first
    box.fill("Penguins waddle across the icy beach")
    box.press("Control+Enter")
    page.wait_for_function("() => [...document.querySelectorAll('canvas.aeh-canvas')]"
                           ".some(c => JSON.parse(c.dataset.xLabels || '[]').includes('penguins'))", timeout=60_000)
    wait_idle(page)
    assert charts.count() >= 3  # grid, zoom, token focus
    assert "Penguins" in page.url or "penguins" in page.url.lower()
    page.screenshot(path=str(SHOTS / "test-model-heads-typed.png"), full_page=True)
    # The sentence follows to the next model page (Streamlit alone would forget it on leaving the page).
    page.locator("[data-testid='stSidebarNav'] a", has_text="Inside one head").click()
    page.wait_for_function("() => location.pathname.endsWith('inside_head')")
    # Its run may start after the address changes: wait for the sentence on screen, not for a first idle.
    page.wait_for_function("() => (document.querySelector('[data-testid=stMain]').innerText || '')"
                           ".toLowerCase().includes('penguins')", timeout=60_000)
    wait_idle(page)
    assert page.locator("[data-testid='stTextArea'] textarea").first.input_value().startswith("Penguins waddle")
    page.close()


@pytest.mark.slow
def test_atlas_button_opens_the_same_model_text_and_head(app_url, browser):
    """The atlas opens a head in Model heads in the same tab, on the same model (a SmolLM2 head must open
    in SmolLM2), text, layer and head: they follow from page to page, as no URL could hold a long text. A click
    on a head in the atlas's heatmap opens that head first."""
    from attention.models import BUNDLED

    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.goto(page_url(app_url, "head_atlas", model=BUNDLED["smollm2"].label, layer="3", head="7",
                       text="The otter dove into the cold river and came up with a fish."))
    wait_idle(page, timeout=180_000)
    rows = page.wait_for_function("() => { const c = document.querySelector('.st-key-atlas-metric "
                                  "canvas.aeh-canvas[data-plot]'); return c && Number(c.dataset.rows); }",
                                  timeout=30_000).json_value()  # once drawn
    assert rows == 30  # the atlas shows SmolLM2's 30 layers
    assert "Layer 3, head 7:" in page.locator("[data-testid='stMain']").inner_text()
    tip = _hover_cell(page, "atlas.metric", 4, 1)  # a cell of the statistic's heatmap is a head: L5H2
    assert "layer: 5" in tip and "head: 2" in tip and "click to open this head below" in tip
    _click_cell(page, "atlas.metric", 4, 1)
    page.wait_for_function("() => document.querySelector('[data-testid=stMain]').innerText"
                           ".includes('Layer 5, head 2:')", timeout=30_000)
    wait_idle(page)
    page.get_by_role("button", name="Zoom into it in Model heads").click()
    page.wait_for_function("() => location.pathname.endsWith('model_heads')")
    wait_idle(page, timeout=120_000)
    page.locator("canvas.aeh-canvas[data-plot]").first.wait_for()
    main = page.locator("[data-testid='stMain']").inner_text()
    assert "30 layers × 9 heads" in main and "Layer 5, head 2" in main
    assert "otter" in page.locator("[data-testid='stTextArea'] textarea").first.input_value()
    page.close()


INJECTION = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script><b>bold</b>'


@pytest.mark.slow
def test_markup_in_a_sentence_is_shown_as_text_never_run(app_url, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.goto(page_url(app_url, "model_heads", text=INJECTION))
    wait_idle(page, timeout=120_000)
    page.locator("canvas.aeh-canvas[data-plot]").first.wait_for()
    # The canvases hold the tokens as data and draw them as text: the characters "<img", never a tag.
    labels = page.evaluate("() => [...document.querySelectorAll('canvas.aeh-canvas')]"
                           ".flatMap(c => JSON.parse(c.dataset.xLabels || '[]'))")
    assert "<" in labels and "script" in labels and ">" in labels
    assert page.locator("main img[src='x']").count() == 0
    assert page.evaluate("() => window.__xss") is None
    page.goto(page_url(app_url, "lookup", **{"lookup.hard_query": '<img src=x onerror="window.__xss=3">'}))
    wait_idle(page)
    assert "<img" in page.locator("[data-testid='stAlert']").first.inner_text()
    assert page.evaluate("() => window.__xss") is None
    page.goto(page_url(app_url, "toy_ambiguity", **{"toy.bank0": INJECTION}))
    wait_idle(page)
    assert page.evaluate("() => window.__xss") is None
    assert page.locator("main img[src='x']").count() == 0 and page.locator("main b", has_text="bold").count() == 0
    page.close()


@pytest.mark.slow
def test_markup_in_the_newer_pages_text_boxes_is_shown_as_text_never_run(app_url, browser):
    """The hostile-text suite runs on every text box in AppTest (tests/test_hostile.py); here once in the
    browser on the pages added since: the digits to reverse, the positions page's sentence for SmolLM2, and
    the corrupted prompt of What heads do. No injected script runs, no injected tag is drawn."""
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    boxes = [("bottleneck", {"bn.digits": INJECTION}, None), ("positions", {"pos.real": "true"}, "pos-text"),
             ("what_heads_do", {}, "circ-corrupt")]
    for name, params, key in boxes:
        open_whole(page, page_url(app_url, name, **params))
        if key:
            box = page.locator(f".st-key-{key} input").first
            box.fill(INJECTION)
            box.press("Enter")
            page.wait_for_timeout(300)
            wait_idle(page, timeout=180_000)
            assert box.input_value() == INJECTION  # kept as typed, the markup included
        assert page.locator("[data-testid='stException']").count() == 0, name
        assert page.evaluate("() => window.__xss") is None, name  # before the next page load clears it
        assert page.locator("main img[src='x']").count() == 0 and page.locator("main b", has_text="bold").count() == 0
    page.close()


def _canvas(page, key: str):
    """The canvas heatmap (attention/figures/heatmap.js) keyed `key` (its container has the class st-key-<key>,
    dots written as dashes)."""
    return page.locator(f".st-key-{key.replace('.', '-')} canvas.aeh-canvas").first


def _click_cell(page, key: str, row: int, col: int, *, click: bool = True, shake: float = 0) -> None:
    """Click (or only point at) the centre of cell (row, col), counted from 0, of the canvas heatmap keyed `key`,
    from the plot's geometry the canvas states (data-plot: left, top, width, height in px; data-window: rows and
    columns shown)."""
    canvas = _canvas(page, key)
    canvas.scroll_into_view_if_needed()
    d = canvas.evaluate("c => ({...c.dataset})")
    left, top, width, height = map(float, d["plot"].split(","))
    r0, r1, c0, c1 = map(float, d["window"].split(","))
    box = canvas.bounding_box()
    x = box["x"] + left + (col + 0.5 - c0) * width / (c1 - c0)
    y = box["y"] + top + (row + 0.5 - r0) * height / (r1 - r0)
    if not click:
        page.mouse.move(x, y)
        return
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x + shake, y, steps=3)  # a click whose hand moves a little is still a click
    page.mouse.up()


def _tile_cell(page, key: str, layer: int, head: int) -> tuple[int, int]:
    """The middle cell of tile (layer, head), from 0, on a grid of tiles with one cell between them."""
    rows, cols = map(int, _canvas(page, key).get_attribute("data-tile").split(","))
    return layer * (rows + 1) + rows // 2, head * (cols + 1) + cols // 2


def _title(page, key: str) -> str:
    return page.locator(f".st-key-{key.replace('.', '-')} .aeh-title").first.inner_text()


def _hover_cell(page, key: str, row: int, col: int) -> str:
    """Move the pointer over cell (row, col) of the canvas heatmap keyed `key`: the tip's text, line by line."""
    _click_cell(page, key, row, col, click=False)
    tip = page.locator(f".st-key-{key.replace('.', '-')} .aeh-tip").first
    tip.wait_for(state="visible")
    return "\n".join(tip.locator("div").all_inner_texts())


@pytest.mark.slow
def test_clicking_a_grid_tile_opens_that_head_and_a_zoom_cell_picks_the_query(app_url, browser, minilm):
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.goto(page_url(app_url, "model_heads", text="I sat on the river bank."))
    wait_idle(page, timeout=120_000)
    assert "Layer 1, head 1" in _title(page, "heads.zoom")
    weight = attend(minilm, "I sat on the river bank.").head_weights(0, 0)[6, 2]  # the model's own, recomputed
    assert f"weight: {weight:.3f}" in _hover_cell(page, "heads.zoom", 6, 2)  # Python's float32, as sent
    tip = _hover_cell(page, "heads.grid", *_tile_cell(page, "heads.grid", 2, 4))
    tokens = attend(minilm, "I sat on the river bank.").tokens
    mid = len(tokens) // 2  # the tile's middle cell: which query and key its weight is for
    assert "layer 3 · head 5" in tip and f"query {mid} “{tokens[mid]}” → key {mid} “{tokens[mid]}”" in tip, tip
    _click_cell(page, "heads.grid", *_tile_cell(page, "heads.grid", 2, 4))  # L3H5: tiles count from 0 here
    page.wait_for_function("() => document.querySelector('.st-key-heads-zoom .aeh-title')"
                           ".textContent.includes('Layer 3, head 5')", timeout=30_000)
    wait_idle(page)
    page.get_by_role("button", name="Link").first.click()
    link = page.locator("[data-testid='stPopoverBody'] code").first.inner_text()
    assert "layer=3" in link and "head=5" in link and "agg=" not in link  # one head: the focus's default
    page.keyboard.press("Escape")
    _click_cell(page, "heads.zoom", 6, 2, shake=8)  # query row 6 ("bank"), key 2; a hand that moves 8 px
    page.wait_for_function("() => (document.querySelector('.st-key-heads-focus .aeh-title')"
                           ".textContent || '').includes('“bank” as the query')", timeout=30_000)
    wait_idle(page)
    _click_cell(page, "heads.focus", 4 * 12 + 1, 3)  # the token focus's row "L5 H2" opens that head
    page.wait_for_function("() => document.querySelector('.st-key-heads-zoom .aeh-title')"
                           ".textContent.includes('Layer 5, head 2')", timeout=30_000)
    wait_idle(page)
    other = browser.new_page(viewport={"width": 1280, "height": 1000})  # the link reopens the same view
    other.goto(link)
    wait_idle(other, timeout=120_000)
    assert "Layer 3, head 5" in _title(other, "heads.zoom")
    # By keyboard: Tab from the grid's PNG button reaches the grid, which shows L1H1 and its tip at once; then
    # one right, one down.
    other.locator(".st-key-heads-grid .aeh-button", has_text="PNG").focus()
    other.keyboard.press("Tab")
    tip = other.locator(".st-key-heads-grid .aeh-tip")
    tip.wait_for(state="visible")
    assert "layer 1 · head 1" in tip.inner_text()
    for key in ("ArrowRight", "ArrowDown", "Enter"):
        other.keyboard.press(key)
    other.wait_for_function("() => document.querySelector('.st-key-heads-zoom .aeh-title')"
                            ".textContent.includes('Layer 2, head 2')", timeout=30_000)
    other.close()
    from attention.figures import grid_canvas  # the same drawing in a notebook: _repr_html_
    from attention.models import survey

    notebook = browser.new_page(viewport={"width": 900, "height": 700})
    found = survey(attend(minilm, "I sat on the river bank."))
    notebook.set_content(grid_canvas(found.tiles)._repr_html_())
    tile = found.tiles.shape[2:]
    assert notebook.locator("canvas.aeh-canvas[data-plot]").get_attribute("data-tile") == f"{tile[0]},{tile[1]}"
    notebook.close()
    page.close()


def sweep_cells(page, key: str) -> list[str]:
    """The numbers a live sweep's matrix shows now."""
    return page.evaluate(f"""() => {{
        const host = [...document.querySelectorAll('.st-key-{key} *')].find(e => e.shadowRoot);
        const scope = host ? host.shadowRoot : document.querySelector('.st-key-{key}');
        return [...scope.querySelectorAll('table.matrix td')].map(e => e.textContent);
    }}""")


def test_live_sweep_on_the_multihead_page_follows_the_drag_and_reports_the_release(app_url, browser):
    import numpy as np

    from attention.toy.live import SHARPNESS_VALUES
    from attention.toy.multihead import toy_translation

    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.goto(page_url(app_url, "multihead"))
    wait_idle(page)
    page.get_by_role("button", name="Show the rest of the page").click()  # open it without answering
    page.locator(".st-key-mh-live").wait_for(timeout=60_000)
    wait_idle(page)
    slider = page.locator(".st-key-mh-live input[type='range']").first
    slider.wait_for()
    slider.scroll_into_view_if_needed()
    box = slider.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] / 2)
    page.mouse.down()
    seen = set()
    for fraction in (0.05, 0.3, 0.62, 0.9, 0.15, 0.75):
        page.mouse.move(box["x"] + box["width"] * fraction, box["y"] + box["height"] / 2)
        sharp = SHARPNESS_VALUES[int(slider.input_value())]
        want = [f"{w:.2f}" for w in (np.rint(toy_translation(sharp).heads[0].weights * 1000) / 1000).ravel()]
        assert sweep_cells(page, "mh-live") == want, sharp
        seen.add(tuple(want))
    assert len(seen) >= 4  # it moved while the mouse was down
    page.mouse.up()
    page.wait_for_function(f"() => new URLSearchParams(location.search).get('mh.sharp') === '{sharp:g}'",
                           timeout=15_000)
    page.close()


def test_live_sweep_component_writes_hostile_names_as_text(browser):
    import numpy as np

    from attention.toy.live import Panel, slider, sweep_payload
    from pages._live import component_source

    js = component_source("live_sweep", "js")
    evil = '<img src=x onerror="window.__xss=1">'
    bars = np.array([[[[0.2, 0.8]], [[0.7, 0.3]]]])  # 1 slider x 2 steps x (1 x 2): the best bar moves
    data = sweep_payload([slider(evil, (0.0, 1.0), 1.0, "w")],
                         [Panel(evil, "bars", (evil,), (evil, "b"), bars),
                          Panel("m", "matrix", (evil, "r"), ("c", evil), np.zeros((1, 2, 2, 2)), signed=True)],
                         key="t")
    page = browser.new_page()
    page.set_content("<div id=root></div>")
    page.evaluate("""async ([js, data]) => {
        const url = URL.createObjectURL(new Blob([js], {type: 'text/javascript'}));
        (await import(url)).default({data, parentElement: document.getElementById('root'), setStateValue: () => {}});
    }""", [js, data])
    assert page.locator("#root img").count() == 0 and not page.evaluate("() => window.__xss")
    assert page.locator("#root").inner_text().count(evil) >= 4
    # The darker bar is the one Python named for this step (step 2: the first bar), not one the browser picked.
    assert page.locator("#root .fill.best").count() == 1
    assert "best" in page.locator("#root .bar").nth(0).locator(".fill").get_attribute("class")
    page.close()


def test_a_question_is_answered_with_the_keyboard_and_the_answer_is_announced(app_url, browser):
    """Predict, then see, without a mouse: Space picks a choice, Tab reaches Commit, Enter commits; the answer
    appears as a sentence in an alert (role=status: a screen reader reads it) with its bars, and the page
    below, held until then, opens."""
    from attention.toy.questions import questions_for

    questions = questions_for("scaling")
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.goto(page_url(app_url, "scaling"))
    wait_idle(page)
    assert not page.locator("[data-testid='stPlotlyChart']").count()  # nothing drawn before the question
    for q in questions:
        box = page.locator(f".st-key-lesson-{q.key.replace('.', '-')}")
        box.locator("input[type='radio']").first.focus()
        page.keyboard.press("Space")
        page.keyboard.press("Tab")
        page.keyboard.press("Enter")
        alert = box.locator("[role='status']").first  # Streamlit's alerts are live regions
        alert.wait_for(timeout=30_000)
        wait_idle(page)
        said = alert.inner_text()
        assert q.reveal().said in said and q.reveal().numbers[1:] in said, said
    assert page.get_by_text("Averaged over 200 random draws").count()  # the page is open
    page.screenshot(path=str(SHOTS / "test-question-answered.png"), full_page=True)
    page.close()
