"""Every chart of every page, read as Chromium draws it at 1280, 800 and 390 px (a phone): no label said twice, no
code where a title should be words, no e-notation under 1e-3 on the learner's path, no answer chart of no length,
no heatmap number its cell cannot hold, no two texts drawn over each other, no text or formula cut at an edge
(tests/chart_checks.py).

The checks first, each shown able to fail (fast, no browser); then the figures that had these defects, built
here, every toy question's answer chart among them (a toy answer is computed from its own state: all of them are
checked here, in no time); then the browser walk: one server and one browser for the module, each page opened
whole (a toy page by "Show the rest of the page"; a model page's questions answered with their first choice,
which draws their answer charts from the model's result), read at 1280 px, then again after resizes to 800 and 390
px.
About 1.5 minutes on 2 cores, most of it the model pages' own work.
"""

from __future__ import annotations

import numpy as np
import pytest

from attention import figures
from attention.toy import questions as toy_questions
from attention.toy.positions import sinusoidal_positions
from pages._site import HOME, PATH, SECTIONS
from tests.chart_checks import (
    Chart,
    code_in_titles,
    cut_formulas,
    cut_off,
    cut_tables,
    defects,
    doubled_labels,
    narrow_cells,
    overlapping,
    read_charts,
    read_formulas,
    read_tables,
    shrunk_labels,
    tiny_e_notation,
    zero_answer,
)
from tests.harness import open_whole, page_url, wait_idle


# --- the checks, each able to fail --------------------------------------------------------------------------
def test_doubled_labels_are_a_label_said_twice():
    assert doubled_labels(["0·0", "3·3", "12·the", "48·48", "3: 3", "1: 4", "L1H1", "the"]) == ["0·0", "3·3",
                                                                                                "48·48", "3: 3"]
    assert doubled_labels(["0", "1", "2", "12·the", "7·1"]) == []


def test_code_in_titles_is_latex_underscores_braces():
    found = code_in_titles(["q_i k_i + q_{i+d/2} k_{i+d/2}", r"\sqrt{d}", "x^2", "Alignment α_tj", "its part of q·k",
                            "weight of “sat” → “Cat”", "scaled scores q·k / √dₖ"])
    assert found == ["q_i k_i + q_{i+d/2} k_{i+d/2}", r"\sqrt{d}", "x^2", "Alignment α_tj"]


def test_tiny_e_notation_is_a_number_under_a_thousandth_in_e_or_si_form():
    texts = ["1.8e-06", "5.55e-17", "1e−5", "20µ", "−3E-4", "0.5m", "0.000", "0.0005", "1e3", "2e-3", "5m", "L1e-05",
             "weight 7.83e-06 here"]
    assert tiny_e_notation(texts) == ["1.8e-06", "5.55e-17", "1e−5", "20µ", "−3E-4", "0.5m", "weight 7.83e-06 here"]


def test_zero_answer_is_no_bars_or_bars_that_read_zero():
    assert zero_answer([]) and zero_answer([0.0]) and zero_answer([5.55e-17, -1e-4])
    assert not zero_answer([0.0, 0.143]) and not zero_answer([0.001])


def test_narrow_cells_are_numbers_that_do_not_fit_at_a_readable_size():
    # Plotly drew "0.45" at 4 px in a 13.3 px cell (Heads at 800 px): at 10 px it is 17.5 px wide.
    assert narrow_cells(13.3, [("0.45", 7.0, 4.0), ("0.14", 7.0, 4.0)]) == ["0.14", "0.45"]
    assert narrow_cells(21.5, [("0.95", 12.7, 7.0)]) == ["0.95"]  # 18.1 px at 10 px, and 2 px each side
    assert narrow_cells(34.0, [("0.95", 18.1, 10.0), ("-0.13", 26.0, 12.0)]) == []
    assert narrow_cells(5.0, [("0.95", 20.0, 0.0)]) == []  # not drawn: nothing to read


def test_shrunk_labels_are_bar_values_drawn_too_small_to_read():
    # What heads do at 800 px: 30 MLP shares over 430 px, each value shrunk by Plotly to ~5 px.
    assert shrunk_labels([("0.123", 5.2), ("-0.04", 4.9), ("1.80", 12.0)]) == ["-0.04", "0.123"]
    assert shrunk_labels([("0.50", 8.0), ("0.25", 11.0)]) == []


def test_overlapping_texts_share_area_not_an_edge():
    boxes = {"x title": (100, 240, 260, 256), "legend": (60, 250, 330, 318), "title": (20, 10, 280, 30),
             "y title": (0, 40, 16, 200), "touching": (16, 40, 30, 200)}
    assert overlapping(boxes) == [("legend", "x title")]


def test_cut_off_texts_run_past_the_charts_edge():
    frame = (10, 0, 310, 300)
    boxes = {"title": (20, 5, 330, 25), "y title": (4, 40, 20, 200), "x title": (100, 270, 200, 290)}
    assert cut_off(boxes, frame) == ["title", "y title"]


def test_cut_formulas_need_more_width_than_they_have():
    formulas = [(r"e_{ij} = v_a^\top \tanh(W_1 q_i + W_2 k_j)", 233, 226), (r"e_{ij} = q_i^\top k_j", 87, 85)]
    assert cut_formulas(formulas) == [r"e_{ij} = v_a^\top \tanh(W_1 q_i + W_2 k_j)"]


def test_cut_tables_need_more_width_than_they_have():
    assert cut_tables([("scaling.table", 379, 364), ("lookup.steps", 300, 358), ("a table", 359, 358)]) == \
        ["scaling.table"]


def test_defects_name_the_chart_and_each_thing_wrong():
    bad = Chart(where="positions @800 pos-pe", kind="plotly", titles=("q_{i+d/2}",), ticks=(("0·0", "1·1"),),
                numbers=("5.55e-17",), cells=((13.3, (("0.45", 7.0, 4.0),)),), answer=(0.0,),
                boxes={"a": (0, 0, 10, 10), "b": (5, 5, 15, 15)}, frame=(0, 0, 12, 20), labels_px=(("0.1", 5.0),))
    found = defects(bad, on_path=True)
    assert len(found) == 8 and all(f.startswith("positions @800 pos-pe: ") for f in found)
    assert not [f for f in defects(bad, on_path=False) if "e-notation" in f]  # a researcher's page may say 1e-5
    assert defects(Chart(where="ok", kind="plotly", titles=("weight",), ticks=(("the", "cat"),), numbers=("0.50",),
                         cells=((40.0, (("0.50", 20.0, 12.0),)),), answer=(0.5,)), on_path=True) == []


# --- the figures that had these defects ----------------------------------------------------------------------
def test_a_big_heatmap_of_positions_says_each_position_once():
    """The positions page's PE heatmap (50 x 64 cells, drawn with categories) labelled position 3 as "3·3"."""
    pe = sinusoidal_positions(50, 64)
    fig = figures.heatmap(pe, [str(i) for i in range(64)], [str(p) for p in range(50)], colours=figures.SIGNED)
    assert not doubled_labels(fig.data[0].x) and not doubled_labels(fig.data[0].y)
    assert list(fig.data[0].y[:3]) == ["0", "1", "2"]
    repeated = figures.heatmap(np.zeros((30, 30)), ["the"] * 30, [str(i) for i in range(30)])
    assert len(set(repeated.data[0].x)) == 30  # a repeated token keeps its own column


@pytest.mark.parametrize("q", toy_questions.QUESTIONS, ids=lambda q: q.key)
def test_every_toy_answer_chart_has_length_and_plain_numbers(q):
    """A question's bars: some bar a reader can see (Word order's first answer was one bar of 5.55e-17), each
    labelled as a beginner reads it (the toy translation's said 1.8e-06)."""
    reveal = q.reveal()
    bars = figures.reveal_bars(reveal).data[0]  # the chart the answer draws
    assert not zero_answer(bars.x), (q.key, reveal.bars)
    assert not tiny_e_notation(bars.text), (q.key, bars.text)
    assert not code_in_titles([reveal.measure]), (q.key, reveal.measure)


def test_two_equal_curves_are_both_visible_and_the_legend_clears_the_axis_title():
    """PE[p]·PE[p+Δ] from two starts is one curve: the second is dashed over the first, not hidden under it."""
    y = np.linspace(1, 0, 10)
    fig = figures.line_chart(list(range(10)), {"from position 0": y, "from position 25": y.copy(), "other": y + 1},
                             x_title="distance Δ", y_title="dot product")
    first, second, other = fig.data
    assert second.line.dash == "dash" and second.line.color != first.line.color and other.line.dash is None
    assert fig.layout.legend.yref == "container" and fig.layout.legend.yanchor == "bottom"


def test_panel_titles_break_where_two_panels_share_a_phone():
    """Positions at 390 px: "Weights as writtenShuffled, put back": each panel's title now breaks at its middle
    space, escaped, and the figure grows to hold the second line."""
    from attention.figures.base import two_lines

    assert two_lines("Weights as written") == "Weights as<br>written"
    assert two_lines("head 1") == "head 1"
    assert two_lines("<b>bold</b> title here") == "&lt;b&gt;bold&lt;/b&gt;<br>title here"
    w = np.full((2, 3, 3), 1 / 3)
    one = figures.heatmap_panels(w, list("abc"), list("abc"), titles=["head 1", "head 2"])
    two = figures.heatmap_panels(w, list("abc"), list("abc"), titles=["Weights as written", "Shuffled, put back"])
    assert [a.text for a in two.layout.annotations[:2]] == ["Weights as<br>written", "Shuffled,<br>put back"]
    assert two.layout.height == one.layout.height + 16 and two.layout.margin.t == one.layout.margin.t + 16


def test_bars_keep_their_values_and_a_marker_line_says_what_it_marks():
    """Ambiguous words on the reader's own sentence showed no values (more bars than BAR_VALUES dropped them); Why
    scale's dotted line for d had no label."""
    few = figures.weights_bar(list("abc"), [0.2, 0.3, 0.5]).data[0]
    many = figures.weights_bar([f"t{i}" for i in range(14)], np.full(14, 1 / 14))
    assert list(few.text) == ["0.200", "0.300", "0.500"] and few.textangle == 0
    assert len(many.data[0].text) == 14 and many.data[0].textangle == -90  # upright, every one
    assert many.data[0].constraintext == "none" and many.data[0].textfont.size >= 10  # never shrunk unreadable
    signed = figures.weights_bar(list("abcdefgh"), [-0.3, 0.1, 0.2, 0, 0, 0, 0.05, 0], y_max=None, highlight=None)
    low, high = signed.layout.yaxis.range
    assert low < -0.3 - 0.1 and high > 0.2 + 0.1  # room beyond each end for the values written there
    line = figures.line_chart([1, 10, 100, 1000], {"y": [1, 2, 3, 4]}, x_title="d", log_x=True, marker_x=64,
                              marker_label="your d = 64")
    marker = line.layout.annotations[0]
    assert marker.text == "your d = 64" and marker.x == pytest.approx(np.log10(64))  # log axes place by log10
    plain = figures.line_chart([0, 1, 2], {"y": [1, 2, 3]}, x_title="distance Δ", marker_x=2)
    assert plain.layout.annotations[0].text == "distance Δ = 2"


def test_a_heatmap_can_carry_its_colour_bar_across_its_top():
    """Scoring's five heatmaps had no key: a bar at the right took their cells' width at 800 px; across the top it
    takes none."""
    fig = figures.heatmap(np.eye(3), list("abc"), list("abc"), colours=figures.Colours(0.0, 1.0, bar="top"))
    bar = fig.data[0].colorbar
    assert fig.data[0].showscale and bar.orientation == "h" and bar.title.text == "weight"
    assert fig.layout.margin.t >= 20 + 40  # room above the plot for it
    assert figures.heatmap(np.eye(3), list("abc"), list("abc")).data[0].colorbar.orientation in (None, "v")


def test_heatmap_panels_share_one_colour_bar_and_their_cells():
    """Heads, masks, cross-attention drew each head as its own chart in a column: the head with the colour bar
    got narrower cells. One figure: every panel the same size, one colour axis."""
    w = np.random.default_rng(0).dirichlet(np.ones(6), size=(4, 6))
    mask = np.tril(np.ones((6, 6), bool))
    fig = figures.heatmap_panels(w, list("abcdef"), list("abcdef"), titles=[f"head {h + 1}" for h in range(4)],
                                 mask=mask)
    assert [t.coloraxis for t in fig.data] == ["coloraxis"] * 4 and fig.layout.coloraxis.showscale is not False
    widths = {round(fig.layout[f"xaxis{i if i > 1 else ''}"].domain[1] - fig.layout[f"xaxis{i if i > 1 else ''}"]
                    .domain[0], 9) for i in range(1, 5)}
    assert len(widths) == 1
    assert fig.data[0].text[0][5] == "masked" and np.isnan(np.asarray(fig.data[0].z, float)[0, 5])


# --- the browser walk -------------------------------------------------------------------------------------------
ALL_PAGES = [HOME.path, *(e.path for entries in SECTIONS.values() for e in entries)]
EXTRA_VIEWS = [  # views a page's defaults do not show
    ("pages/positions.py", {"pos.real": "true"}),  # a toy page's model section, opened by its toggle
    ("pages/inside_head.py", {"model": "smollm2", "layer": "19", "head": "7"}),  # "why this key" over 162 earlier
    # heads (its cells were drawn 8 px tall at 800 px)
    ("pages/multihead.py", {"mh.heads": "8"}),  # eight heads, four to a row
]
XFAIL: dict[str, str] = {}  # defects the walk finds and that are not mended yet, each named (strict: a fix makes it
# fail, and its line goes)


def _views():
    for path in ALL_PAGES:
        marks = [pytest.mark.xfail(strict=True, reason=XFAIL[path])] if path in XFAIL else []
        yield pytest.param(path, {}, marks=marks, id=path.split("/")[-1][:-3])
    for path, params in EXTRA_VIEWS:
        marks = [pytest.mark.xfail(strict=True, reason=XFAIL[path])] if path in XFAIL else []
        yield pytest.param(path, params, marks=marks, id=path.split("/")[-1][:-3] + "+" + "+".join(params))


PATH_STEMS = {p.split("/")[-1][:-3] for p in PATH}
# Tables on the learner's path that may scroll sideways on a phone, each saying so there (pages/_screen.phone_only):
SCROLLING_TABLES = {"lookup-table"}  # the lookup's editor: seven columns, each with its pencil, in 364 px
TOY_STEMS = {q.page for q in toy_questions.QUESTIONS}  # their answer charts are checked above, without a browser


def answer_all(page) -> int:
    """Answer each question a (model) page asks with its first choice: its answer chart is drawn from the model's
    result, and the page moves to the question's example. -> how many were answered."""
    commit = page.get_by_role("button", name="Commit, then see")
    answered = 0
    while commit.count() and answered < 8:
        page.locator("[data-testid=stRadio] [role=radiogroup] label").first.click()
        commit.first.click()
        wait_idle(page, timeout=180_000)
        answered += 1
    page.wait_for_timeout(300)
    return answered


def settled_charts(page, where: str, timeout_ms: int = 5_000) -> list:
    """The page's charts once they are drawn at the window's width: Plotly and the canvas redraw after a resize
    (later on a busy machine, where a read 300 ms after it found a chart still drawn for the old width), so the
    charts are read until two reads 250 ms apart agree."""
    before = read_charts(page, where)
    for _ in range(timeout_ms // 250):
        page.wait_for_timeout(250)
        now = read_charts(page, where)
        if now == before:
            return now
        before = now
    return before


def read_both_widths(page, where: str, widths=(1280, 800, 390)) -> list[str]:
    """Every defect on the page's charts at each width in turn (the page resized between them)."""
    found = []
    for i, width in enumerate(widths):
        if i:
            page.set_viewport_size({"width": width, "height": 900})
        for chart in settled_charts(page, f"{where} @{width}"):
            found += defects(chart, on_path=where.split(" ")[0] in PATH_STEMS)
        found += [f"{where} @{width}: a formula cut on the right: {tex}" for tex in cut_formulas(read_formulas(page))]
        if where.split(" ")[0] in PATH_STEMS:  # a researcher's wide table may scroll; a learner's fits
            found += [f"{where} @{width}: a table's columns cut at its edge: {key}"
                      for key in cut_tables(read_tables(page)) if key not in SCROLLING_TABLES]
    return found


@pytest.fixture(scope="module")
def tab(browser):
    """One tab for the walk: each page is a fresh session (page.goto), the browser's cache kept."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    yield page
    page.close()


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("path, params", _views())
def test_every_chart_reads_at_1280_800_and_390_px(app_url, tab, path, params):
    """Read at 1280 px, then after a resize to 800 px and to 390 px (a phone); a model page's questions then
    answered (its answer charts drawn, the page on their example) and read again, at 800 px and at 390 px."""
    stem = path.split("/")[-1][:-3]
    page = tab
    page.set_viewport_size({"width": 1280, "height": 900})
    open_whole(page, page_url(app_url, "" if path == HOME.path else stem, **params))
    found = read_both_widths(page, stem)
    if stem not in TOY_STEMS and answer_all(page):
        found += read_both_widths(page, f"{stem} answered", widths=(800, 390))
    assert not found, "\n".join(found)
    assert page.locator("[data-testid='stException']").count() == 0
