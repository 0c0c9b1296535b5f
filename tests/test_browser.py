"""Real browser: Debian Chromium driven by Playwright against `streamlit run app.py`."""

import re

import pytest

from serving import APP, chromium, page_url, running_app, wait_idle

pytestmark = pytest.mark.browser
SHOTS = APP.parent / "artifacts" / "screenshots"


@pytest.fixture(scope="module")
def app_url():
    with running_app() as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


def bar_labels(page) -> list[str]:
    """The numbers printed on the first bar chart (the softmax weights)."""
    chart = page.locator("[data-testid='stPlotlyChart']").first
    return [t.text_content() for t in chart.locator("g.textpoint text, text.bartext").all()]


def test_lookup_slider_changes_weights(app_url, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.goto(page_url(app_url, "lookup"))
    wait_idle(page)
    assert page.get_by_role("heading", name="Lookup: hard vs soft").is_visible()
    page.locator("[data-testid='stPlotlyChart']").first.wait_for()
    before = bar_labels(page)
    assert len(before) == 3 and before[0] == "0.372"
    slider = page.locator("[data-testid='stSlider'] input[type='range']").first
    slider.focus()
    for _ in range(10):
        slider.press("ArrowRight")
    page.wait_for_function("() => document.querySelector('[data-testid=stPlotlyChart] text.bartext')"
                           "?.textContent !== '0.372'", timeout=15_000)
    wait_idle(page)
    after = bar_labels(page)
    assert float(after[0]) > float(before[0])  # sweeter query -> more weight on apple
    assert re.search(r"sweetness=0\.9", page.url)  # the state is in the URL
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "test-lookup-after-slider.png"))
    page.close()


def test_deep_link_reopens_the_same_view(app_url, browser):
    page = browser.new_page()
    page.goto(page_url(app_url, "lookup", **{"lookup.sweetness": "0.1", "lookup.durability": "0.9"}))
    wait_idle(page)
    assert page.get_by_role("heading", name="Lookup: hard vs soft").is_visible()
    assert "chair" in page.locator("[data-testid='stAlert']").last.inner_text()
    nav = page.locator("[data-testid='stSidebarNav']").inner_text()
    assert "Toy examples" in nav  # the app's own navigation, not Streamlit's file list
    page.close()


@pytest.mark.slow
def test_typing_a_sentence_updates_the_model_grid(app_url, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.goto(page_url(app_url, "model_heads"))
    wait_idle(page, timeout=120_000)
    charts = page.locator("[data-testid='stPlotlyChart']")
    charts.first.wait_for()
    box = page.locator("[data-testid='stTextArea'] textarea").first
    box.fill("Penguins waddle across the icy beach")
    box.press("Control+Enter")
    page.wait_for_function("() => [...document.querySelectorAll('[data-testid=stPlotlyChart] text')]"
                           ".some(t => t.textContent.includes('penguins'))", timeout=60_000)
    wait_idle(page)
    assert charts.count() >= 3  # grid, zoom, token focus
    assert "Penguins" in page.url or "penguins" in page.url.lower()
    page.screenshot(path=str(SHOTS / "test-model-heads-typed.png"), full_page=True)
    # The sentence follows to the next model page (Streamlit alone would forget it on leaving the page).
    page.locator("[data-testid='stSidebarNav'] a", has_text="Inside one head").click()
    page.wait_for_function("() => location.pathname.endsWith('inside_head')")
    wait_idle(page)
    assert page.locator("[data-testid='stTextArea'] textarea").first.input_value().startswith("Penguins waddle")
    assert "penguins" in page.locator("[data-testid='stMain']").inner_text().lower()
    page.close()


@pytest.mark.slow
def test_atlas_button_opens_the_same_model_text_and_head(app_url, browser):
    """The atlas opens a head in Model heads in the same tab, on the same model (a SmolLM2 head must open
    in SmolLM2), text, layer and head: they follow from page to page, as no URL could hold a long text."""
    from attention.models import BUNDLED

    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.goto(page_url(app_url, "head_atlas", model=BUNDLED["smollm2"].label, layer="3", head="7",
                       text="The otter dove into the cold river and came up with a fish."))
    wait_idle(page, timeout=180_000)
    page.locator("[data-testid='stPlotlyChart']").first.wait_for()
    rows = page.evaluate("() => document.querySelector('[data-testid=stPlotlyChart] .js-plotly-plot')"
                         "._fullData[0].z.length")
    assert rows == 30  # the atlas shows SmolLM2's 30 layers
    page.get_by_role("button", name="Zoom into it in Model heads").click()
    page.wait_for_function("() => location.pathname.endsWith('model_heads')")
    wait_idle(page, timeout=120_000)
    page.locator("[data-testid='stPlotlyChart']").first.wait_for()
    main = page.locator("[data-testid='stMain']").inner_text()
    assert "30 layers × 9 heads" in main and "Layer 3, head 7" in main
    assert "otter" in page.locator("[data-testid='stTextArea'] textarea").first.input_value()
    page.close()


INJECTION = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script><b>bold</b>'


@pytest.mark.slow
def test_markup_in_a_sentence_is_shown_as_text_never_run(app_url, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.goto(page_url(app_url, "model_heads", text=INJECTION))
    wait_idle(page, timeout=120_000)
    page.locator("[data-testid='stPlotlyChart']").first.wait_for()
    # The token labels Plotly holds are the escaped markup: drawn as the characters "<img", never as a tag.
    labels = page.evaluate("() => [...document.querySelectorAll('.js-plotly-plot')]"
                           ".flatMap(gd => (gd.data || []).flatMap(t => Array.isArray(t.x) ? t.x.map(String) : []))")
    assert any("&lt;" in x for x in labels) and not any("<img" in x for x in labels)
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
