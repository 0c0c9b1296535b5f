"""What is wrong with a chart a student reads: pure checks over what a chart shows, and the browser read of it.

The checks are plain functions (tests/test_charts.py gives each one a case it must fail): given a chart's tick
labels, titles, printed numbers, cell widths and answer values, they name what a reader cannot read.

    doubled_labels(["0·0", "3"])                  -> ["0·0"]      a label that says one thing twice
    code_in_titles(["q_i k_i + q_{i+d/2}"])        -> [...]        LaTeX, underscores, braces where words belong
    tiny_e_notation(["1.8e-06", "0.002"])          -> ["1.8e-06"]  a number under 1e-3 in e-notation (or 5µ)
    zero_answer([0.0, 0.0])                        -> True         an answer's bars of no length, or none
    narrow_cells(21.5, [("0.95", 12.7, 7.0)])      -> ["0.95"]     a cell narrower than its number, readable
    shrunk_labels([("0.123", 5.2)])                -> ["0.123"]    a bar's value Plotly shrank to fit its bar
    overlapping({"x title": (...), "legend": (...)}) -> [...]      two of a chart's texts drawn over each other
    cut_off({"title": (...)}, frame)                -> ["title"]    a text past the chart's edge, cut
    cut_formulas([("e = v^T tanh(...)", 233, 226)]) -> [...]        a formula wider than its place, cut on the right
    cut_tables([("scaling.table", 379, 364)])     -> ["scaling.table"]  a table whose last columns are cut

`read_charts(page)` reads every chart on a page as Chromium drew it: Plotly's SVG text (ticks, titles, legend,
the numbers on cells and bars, and each heatmap's cell width from its axis) and the canvas heatmaps' data-*
attributes (attention/figures/heatmap.js writes its labels, titles, cell width and the widest number it drew).
`defects(chart, on_path=...)` runs every check on one chart.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

READABLE_PX = 10.0  # the smallest font a number in a cell is read at; Plotly shrinks a number that does not fit
CELL_PAD_PX = 2.0  # room kept on each side of a number inside its cell
SEPARATORS = "·:|/–-"  # what joins a position to a token in a label ("12·the", "3: 1")
CODE = re.compile(r"[_{}\\^$]")  # LaTeX or code: q_{i+d/2}, \sqrt, x^2, $...$
# A number in e-notation (Plotly writes its minus as U+2212) or with an SI prefix for small values (Plotly's
# default tick format writes 0.00002 as "20µ").
E_NUMBER = re.compile(r"(?<![\w.])([-−]?\d+(?:\.\d+)?)[eE]([-−+]?\d+)(?![\w.])")
SI_NUMBER = re.compile(r"(?<![\w.])([-−]?\d+(?:\.\d+)?)([fpnμµm])(?![\w.])")
SI = {"f": 1e-15, "p": 1e-12, "n": 1e-9, "μ": 1e-6, "µ": 1e-6, "m": 1e-3}
TINY = 1e-3
ZERO = 5e-4  # an answer's bar under this reads 0.000: no length a reader sees


def doubled_labels(labels) -> list[str]:
    """Labels that say the same thing twice around a separator: "0·0", "3: 3", "48·48" (a position prefixed to
    a label that is already the position)."""
    found = []
    for label in labels:
        text = str(label).strip()
        for sep in SEPARATORS:
            left, middle, right = text.partition(sep)
            if middle and left.strip() and left.strip() == right.strip():
                found.append(text)
                break
    return found


def code_in_titles(titles) -> list[str]:
    """Titles (chart, axis, colour bar, legend) written in code: underscores, braces, backslashes, carets or
    dollars, where a reader expects words."""
    return [str(t) for t in titles if CODE.search(str(t))]


def _number(text: str) -> float:
    return float(text.replace("−", "-"))


def tiny_e_notation(texts) -> list[str]:
    """Texts holding a number under 1e-3 (and not 0) written as a scientist would, not as a beginner reads it:
    "1.8e-06", "5.55e-17", "1e−5", "20µ"."""
    found = []
    for text in texts:
        text = str(text)
        values = [_number(m[1]) * 10.0 ** _number(m[2]) for m in E_NUMBER.finditer(text)]
        values += [_number(m[1]) * SI[m[2]] for m in SI_NUMBER.finditer(text)]
        if any(0 < abs(v) < TINY for v in values):
            found.append(text)
    return found


def zero_answer(values) -> bool:
    """An answer chart that shows nothing: no bars, or every bar of no visible length (each reads 0.000)."""
    values = list(values)
    return not values or all(abs(float(v)) < ZERO for v in values)


def narrow_cells(cell_width: float, printed, *, readable: float = READABLE_PX, pad: float = CELL_PAD_PX) -> list[str]:
    """The numbers printed in heatmap cells `cell_width` px wide that do not fit at a readable size: `printed`
    holds (text, width in px, font size in px) as drawn. Plotly shrinks a number to its cell (a 4 px "0.45" is
    drawn, and cannot be read): its width at `readable` px, with `pad` on each side, is what the cell must hold."""
    found = []
    for text, width, font in printed:
        if font <= 0:
            continue
        needed = float(width) * max(1.0, readable / float(font)) + 2 * pad
        if needed > cell_width + 0.5:
            found.append(str(text))
    return sorted(set(found))


SMALLEST_PX = 8.0  # a value written on a bar or a point below this size cannot be read


def shrunk_labels(printed, *, smallest: float = SMALLEST_PX) -> list[str]:
    """The values written on bars or points (`printed`: (text, font size px) as drawn) that Plotly shrank below
    `smallest` px to fit their bar: 30 bars' values at 800 px were drawn 5 px tall."""
    return sorted({str(text) for text, font in printed if 0 < float(font) < smallest})


def overlapping(boxes: dict, *, slack: float = 1.0) -> list[tuple[str, str]]:
    """Pairs of a chart's texts drawn over each other: `boxes` maps a name ("x title", "legend") to its box
    (left, top, right, bottom) in px; boxes that share more than `slack` px each way overlap."""
    names = sorted(boxes)
    found = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            (l1, t1, r1, b1), (l2, t2, r2, b2) = boxes[a], boxes[b]
            if min(r1, r2) - max(l1, l2) > slack and min(b1, b2) - max(t1, t2) > slack:
                found.append((a, b))
    return found


def cut_off(boxes: dict, frame, *, slack: float = 1.0) -> list[str]:
    """The texts of `boxes` (name -> left, top, right, bottom px) that run past the left or right edge of the
    chart's `frame` (its box): the browser cuts them there ("Each frequency pair's part of q·l")."""
    left, _, right, _ = frame
    return sorted(name for name, (x0, _, x1, _) in boxes.items() if x0 < left - slack or x1 > right + slack)


FORMULA_SLACK_PX = 3  # KaTeX's struts overhang their box by a pixel or two in every formula


def cut_formulas(formulas, *, slack: float = FORMULA_SLACK_PX) -> list[str]:
    """The formulas, as (TeX, width it needs px, width it has px), that need more than they have: the page cuts
    them on the right (Scoring's additive score lost its closing parenthesis at 800 px)."""
    return [tex for tex, needed, has in formulas if needed > has + slack]


@dataclass(frozen=True)
class Chart:
    """One chart as the browser drew it."""

    where: str  # "positions @800 pos-similarity": the page, the width and the chart's key (or its index)
    kind: str  # "plotly" or "canvas"
    titles: tuple[str, ...] = ()  # chart title, axis titles, colour-bar title, legend entries, subplot titles
    ticks: tuple[tuple[str, ...], ...] = ()  # each axis's tick labels, in order
    numbers: tuple[str, ...] = ()  # every number written on the chart: cells, bars, colour-bar ticks
    cells: tuple[tuple[float, tuple[tuple[str, float, float], ...]], ...] = ()  # (cell width px, printed)
    answer: tuple[float, ...] | None = None  # a question's answer chart: its bars' values
    labels_px: tuple[tuple[str, float], ...] = ()  # values written on bars and points: (text, font size px)
    boxes: dict = field(default_factory=dict)  # name -> (left, top, right, bottom) px
    frame: tuple[float, float, float, float] | None = None  # the chart's own box: texts past it are cut


def defects(chart: Chart, *, on_path: bool) -> list[str]:
    """Everything the checks find on one chart, each as a line naming the chart and what is wrong."""
    found = []
    labels = [t for axis in chart.ticks for t in axis]
    if doubled := doubled_labels(labels):
        found.append(f"doubled labels {doubled[:4]}")
    if code := code_in_titles(chart.titles):
        found.append(f"code in titles {code}")
    if on_path and (tiny := tiny_e_notation([*labels, *chart.numbers, *chart.titles])):
        found.append(f"e-notation under 1e-3 {tiny[:4]}")
    if chart.answer is not None and zero_answer(chart.answer):
        found.append(f"an answer chart of no length {list(chart.answer)}")
    if small := shrunk_labels(chart.labels_px):
        found.append(f"values shrunk below {SMALLEST_PX:g} px to fit their bars {small[:4]}")
    for width, printed in chart.cells:
        if narrow := narrow_cells(width, printed):
            found.append(f"cells {width:.1f} px wide, narrower than their numbers {narrow[:4]}")
    if overlap := overlapping(chart.boxes):
        found.append(f"texts drawn over each other {overlap}")
    if chart.frame is not None and (cut := cut_off(chart.boxes, chart.frame)):
        found.append(f"texts cut at the chart's edge {cut}")
    return [f"{chart.where}: {d}" for d in found]


# What the page shows, read in Chromium: one call per page and width. Plotly: gd._fullLayout and its SVG text;
# canvas heatmaps: their data-* attributes (heatmap.js). A chart's key is its container's st-key-* class.
READ = r"""() => {
  const keyOf = (el) => { const c = el.closest('[class*="st-key-"]');
    return c ? [...c.classList].find((x) => x.startsWith('st-key-')).slice(7) : ''; };
  const box = (e) => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const seen = (e) => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  const text = (e) => e.textContent.trim();
  const charts = [];
  document.querySelectorAll('[data-testid=stPlotlyChart] .js-plotly-plot').forEach((gd, i) => {
    const fl = gd._fullLayout;
    if (!fl || !seen(gd)) return;
    const titles = [...gd.querySelectorAll('.infolayer text[class$=title], .legendtext, .annotation-text')]
      .map(text).filter(Boolean);
    const ticks = [...gd.querySelectorAll('.xaxislayer-above, .yaxislayer-above')]
      .map((g) => [...g.querySelectorAll('text')].filter(seen).map(text));
    const numbers = [...gd.querySelectorAll('.heatmap-label text, text.bartext, .textpoint text,'
                                          + ' .colorbar text')].filter(seen).map(text).filter(Boolean);
    const drawnPx = (t) => { const m = t.getScreenCTM();  // Plotly fits a bar's value by scaling it, not its font
      return parseFloat(getComputedStyle(t).fontSize) * (m ? Math.hypot(m.a, m.b) : 1); };
    const labelsPx = [...gd.querySelectorAll('text.bartext, .textpoint text')].filter(seen)
      .map((t) => [text(t), drawnPx(t)]);
    const cells = [...gd.querySelectorAll('.cartesianlayer .subplot')].map((s) => {
      const id = [...s.classList].find((c) => c !== 'subplot'), plot = fl._plots[id];
      const labels = [...s.querySelectorAll('.heatmap-label text')].filter(seen);  // hidden where cells are narrow
      if (!plot || !labels.length) return null;
      const xa = plot.xaxis, width = xa._length / Math.abs(xa.range[1] - xa.range[0]);
      return [width, labels.map((t) => [text(t), t.getBBox().width, parseFloat(getComputedStyle(t).fontSize)])];
    }).filter(Boolean);
    const boxes = {}; // titles, legend, subplot titles, each axis's tick labels, each heatmap's numbers
    gd.querySelectorAll('.infolayer text[class$=title], .legend, .annotation, .xaxislayer-above, .yaxislayer-above,'
                        + ' .heatmaplayer').forEach((g, j) => {
      if (seen(g) && g.getBBox().width > 0 && g.textContent.trim()) boxes[`${g.getAttribute('class')} ${j}`] = box(g);
    });
    const key = keyOf(gd) || `chart ${i}`;
    const answer = key.startsWith('lesson-bars-')
      ? [...(gd._fullData[0] && gd._fullData[0].x || [])].map(Number) : null;
    charts.push({ key, kind: 'plotly', titles, ticks, numbers, cells, answer, boxes, frame: box(gd), labelsPx });
  });
  document.querySelectorAll('canvas.aeh-canvas').forEach((c, i) => {
    if (!seen(c) || !c.dataset.texts) return;
    const d = c.dataset, t = JSON.parse(d.texts);
    const widest = parseFloat(d.valueWidth || '0'), font = parseFloat(d.valueFont || '0');
    charts.push({ key: keyOf(c) || `canvas ${i}`, kind: 'canvas', titles: t.titles.filter(Boolean),
                  ticks: [JSON.parse(d.xLabels || '[]'), JSON.parse(d.yLabels || '[]')], numbers: t.colorbar,
                  cells: font ? [[parseFloat(d.cellWidth), [['widest number', widest, font]]]] : [],
                  answer: null, boxes: {}, frame: null, labelsPx: [] });
  });
  return charts;
}"""


def read_charts(page, where: str) -> list[Chart]:
    """Every chart on `page` (a Playwright page, drawn and idle) as a Chart; `where` names the page and width."""
    return [Chart(where=f"{where} {c['key']}", kind=c["kind"], titles=tuple(c["titles"]),
                  ticks=tuple(tuple(a) for a in c["ticks"]), numbers=tuple(c["numbers"]),
                  cells=tuple((w, tuple((s, bw, f) for s, bw, f in printed)) for w, printed in c["cells"]),
                  answer=None if c["answer"] is None else tuple(c["answer"]),
                  labels_px=tuple((t, f) for t, f in c["labelsPx"]),
                  boxes={k: tuple(v) for k, v in c["boxes"].items()},
                  frame=None if c["frame"] is None else tuple(c["frame"]))
            for c in page.evaluate(READ)]


# Every data table on the page (st.dataframe, st.data_editor): its key, the width its columns need and the width it
# has. Glide's grid scrolls inside its frame, but a phone reader saw "weight, scal" and "0.0" and no sign of more.
READ_TABLES = r"""() => [...document.querySelectorAll('[data-testid=stDataFrame]')].filter((f) => f.clientWidth > 0)
  .map((f) => { const s = f.querySelector('.dvn-scroller'), c = f.closest('[class*="st-key-"]');
                const key = c ? [...c.classList].find((x) => x.startsWith('st-key-')).slice(7) : 'a table';
                return s ? [key, s.scrollWidth, s.clientWidth] : null; }).filter(Boolean)"""


def read_tables(page) -> list[tuple[str, float, float]]:
    """Every data table on `page` as (key, width its columns need, width it has) in px (cut_tables reads them)."""
    return [tuple(t) for t in page.evaluate(READ_TABLES)]


def cut_tables(tables, *, slack: float = 1.0) -> list[str]:
    """The tables, as (key, width needed, width had), whose columns run past their frame: the last ones are cut
    until the reader thinks of scrolling the table sideways."""
    return [key for key, needed, has in tables if needed > has + slack]


# Every displayed formula on the page (st.latex): its TeX, the width it needs and the width it is given.
READ_FORMULAS = r"""() => [...document.querySelectorAll('.katex-display')].filter((e) => e.clientWidth > 0)
  .map((e) => { const a = e.querySelector('annotation');
                return [a ? a.textContent : e.textContent, e.scrollWidth, e.clientWidth]; })"""


def read_formulas(page) -> list[tuple[str, float, float]]:
    """Every formula on `page` as (TeX, width needed, width given) in px (cut_formulas reads them)."""
    return [tuple(f) for f in page.evaluate(READ_FORMULAS)]
