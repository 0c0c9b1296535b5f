"""What a click opens: a head picked on a chart, a table or a canvas becomes the visit's focus (pages/_focus.py),
and the buttons that open it on another page; a cell of a heatmap picks the token followed.

Each returns a module function bound with functools.partial for on_select / on_click (pages/_labels.py says
why not a lambda); a canvas reports its click through pages/_canvas.py.
"""

import functools
from collections.abc import Callable

import streamlit as st

from attention.models import Focus, ModelAttention, ModelChoice, TokenAt
from pages._canvas import clicked
from pages._focus import current, switch_to, update


def open_head_buttons(layer: int, head: int, *, key: str, source=None, text: str | None = None) -> None:
    """Buttons that open Model heads and Inside one head on this model (`source`, what the page reads: its
    ModelChoice, or a result opened from a file), text, layer and head (0-based) in this tab: the text may be far
    too long for a link, and every model page reads the focus. The page's own default model and text (the focus
    holds None for them) go with it: Model heads' defaults are other ones (Predictions' SmolLM2 L24H4 opened
    MiniLM, clamped to L6H4, on another sentence)."""
    row = st.container(horizontal=True, wrap=True)  # as wide as their labels: in two columns "See its math in
    c1 = c2 = row                                     # Inside one h…" was cut at 800 px
    for col, page, label, icon in ((c1, "pages/model_heads.py", "Zoom into it in Model heads", ":material/zoom_in:"),
                                   (c2, "pages/inside_head.py", "See its math in Inside one head",
                                    ":material/calculate:")):
        if col.button(label, icon=icon, key=f"{key}.{page}"):
            shown = {"model": source} if isinstance(source, ModelChoice) else {}
            update(layer=layer, head=head, aggregation="head", **shown, **({"text": text} if text else {}))
            switch_to(page)


def head_opener(chart_key: str, *, first: int = 0, from_customdata: bool = False) -> Callable[[], None]:
    """on_select (or a canvas's on_click) for a chart of heads: the clicked head becomes the focus's. Its layer
    and head are the point's y and x, counted from `first` (a layer x head heatmap from 0; the all-heads grid's
    tiles from 1), or the first two values of its customdata, from 0 (a scatter of heads); on a canvas, the
    tile's or the cell's (row = layer, column = head), from 0."""
    return functools.partial(_open_head, chart_key, first, from_customdata)


def row_head_opener(chart_key: str, n_heads: int) -> Callable[[], None]:
    """on_click for a canvas heatmap with one row per head, layer by layer (the token focus: "L1 H1", "L1 H2"
    ...): the clicked row's head becomes the focus's."""
    return functools.partial(_open_row_head, chart_key, n_heads)


def _open_row_head(chart_key: str, n_heads: int) -> None:
    report = clicked(chart_key)
    if report:
        layer, head = divmod(int(report["row"]), n_heads)
        update(layer=layer, head=head, aggregation="head")


def picked_head(table_key: str, heads) -> Focus:
    """Before anything that shows the open head is drawn: a row picked in the table of heads keyed
    `table_key`, drawn in the last run (one row per head, in the order of `heads`: (layer, head), 0-based, with
    on_select="rerun"), makes its head the focus's. Key the table by the open head, so that once another head
    is open the next table starts with no row ticked. Returns the focus."""
    state = st.session_state.get(table_key)
    rows = state["selection"]["rows"] if state else []
    if rows and rows[0] < len(heads):
        layer, head = heads[rows[0]]
        return update(layer=int(layer), head=int(head), aggregation="head")
    return current()


def _open_head(chart_key: str, first: int, from_customdata: bool) -> None:
    report = clicked(chart_key)  # a canvas (pages/_canvas.py): the grid's tile, or a layer x head cell, from 0
    if report:
        layer, head = report["tile"] if "tile" in report else (report["row"], report["col"])
        update(layer=int(layer), head=int(head), aggregation="head")
        return
    points = st.session_state[chart_key]["selection"]["points"]
    if points:
        point = points[0]
        layer, head = point["customdata"][:2] if from_customdata else (point["y"] - first, point["x"] - first)
        update(layer=int(round(layer)), head=int(round(head)), aggregation="head")


def cell_query(chart_key: str, att: ModelAttention, row_ids, grouping) -> Callable[[], None]:
    """on_select for the zoom: a click on a cell follows its query token (or word) below."""
    firsts = None if grouping is None else tuple(pieces[0] for pieces in grouping.pieces)
    return functools.partial(_pick_cell, chart_key, tuple(att.tokens), row_ids, firsts)


def _pick_cell(chart_key: str, tokens, row_ids, firsts) -> None:
    report = clicked(chart_key)  # a canvas heatmap's cell (pages/_canvas.py)
    if report:
        row = int(report["row"])
    else:
        points = st.session_state[chart_key]["selection"]["points"]
        if not points:
            return
        y = points[0]["y"]  # a row number, or in a large heatmap its category "12·bank"
        row = int(y.split("·")[0]) if isinstance(y, str) else int(round(y))
    index = row_ids[row] if row_ids is not None else row
    position = index if firsts is None else firsts[index]
    update(query=TokenAt(position, tokens[position]))
