"""The base of every Plotly figure: the labelled heatmap, its colours and ticks, and escaping. No Streamlit here.

Every heatmap has labelled axes, a colour bar with units, the value in each cell (small matrices) and
on hover. Token labels are HTML-escaped: Plotly renders a subset of HTML in ticks and hover text, and
labels come from users. Axes are numeric with tick labels, so repeated tokens ("the", "them") keep
their own rows and columns instead of being merged by Plotly's category axes.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, replace

import numpy as np
import plotly.graph_objects as go

WEIGHT_SCALE = "Blues"
SIGNED_SCALE = "RdBu"
MASKED_TEXT = "masked"
BIG_CELLS = 600  # above this, hover comes from a template, not one string per cell (payload, render time)


def esc(label) -> str:
    """A label made safe for Plotly's pseudo-HTML (ticks, hover, annotations).

    Only & < > are escaped: without "<" no tag can start, and Plotly decodes &lt; &gt; &amp; but shows
    &quot; literally (a token `"` appeared as "&quot;" on the axes).
    """
    return html.escape(str(label), quote=False)


def two_lines(title, most: int = 12) -> str:
    """A title for a narrow place, escaped (esc): longer than `most` characters, it breaks at the space nearest
    its middle. Two panels side by side on a phone (390 px) are ~140 px each: their one-line titles ran into each
    other ("Weights as writtenShuffled, put back")."""
    title = str(title)
    spaces = [i for i, ch in enumerate(title) if ch == " "]
    if len(title) <= most or not spaces:
        return esc(title)
    cut = min(spaces, key=lambda i: abs(i - len(title) / 2))
    return f"{esc(title[:cut])}<br>{esc(title[cut + 1:])}"


def cell_number(x: float, digits: int) -> str:
    """A cell's number: `digits` decimals, −∞ and masked cells in words, and never "-0.00" (a rounding of a tiny
    negative value: it reads as a sign that is not there)."""
    if np.isneginf(x):
        return "-∞"
    if np.isnan(x):
        return MASKED_TEXT
    text = f"{x:.{digits}f}"
    return text[1:] if text.startswith("-") and not text.strip("-0.") else text


def _ticks(labels, max_labels: int = 40) -> dict:
    """Every label as a tick when they fit; otherwise Plotly's automatic numeric ticks."""
    if len(labels) <= max_labels:
        return dict(tickmode="array", tickvals=list(range(len(labels))), ticktext=labels)
    return dict(tickmode="auto")


LOG_FLOOR = 1e-4  # the log colour scale starts here: weights below read as this
CLICKABLE_CELLS = 4096  # cells up to which a heatmap can carry a clickable point per cell (64 x 64 tokens)


@dataclass(frozen=True)
class Colours:
    """How a heatmap turns values into colours."""

    zmin: float | None = None  # bottom of the scale (None: the smallest value)
    zmax: float | None = None  # top of the scale (None: the largest value)
    scale: str = WEIGHT_SCALE  # a Plotly colour scale
    centred: bool = False  # a diverging scale with 0 in its middle (signed values)
    log: bool = False  # colour by log10 of the value, LOG_FLOOR to 1 (numbers and hover keep the values)
    bar: bool | str = True  # draw the colour bar: True at the right, "top" across the top (no width taken from
    # the cells: two heatmaps side by side on 800 px kept readable numbers and their key), False none

    def logged(self, log: bool) -> Colours:
        """The same colours, by log10 when `log`."""
        return replace(self, log=log)


BELOW = dict(orientation="h", yref="container", y=0, yanchor="bottom", x=0)  # a legend under the x axis's title,
# never on it (a legend at y=-0.15 of the plot sat on "component 1" at 390 px)
WEIGHTS = Colours(0.0, 1.0)  # attention weights: 0 to 1 in blues
SIGNED = Colours(scale=SIGNED_SCALE, centred=True)  # scores, vectors, effects: red below 0, blue above


@dataclass(frozen=True)
class Ticks:
    """Which rows and columns of a heatmap are labelled."""

    x: int = 40  # every column label when there are at most this many, else Plotly's automatic ticks
    y: int | None = None  # the same for rows (None: as x)
    row_groups: int | None = None  # label only every g-th row, by its label's first word ("L3 H1" -> "L3")


AUTO_TICKS = Ticks()  # every label while up to 40 fit, then Plotly's own


def heatmap(z, x_labels, y_labels, *, title: str = "", x_title: str = "key", y_title: str = "query",
            value_name: str = "weight", colours: Colours = Colours(), ticks: Ticks = AUTO_TICKS, mask=None,
            digits: int = 2, show_values: bool | None = None, height: int | None = None,
            clickable: bool = False) -> go.Figure:
    """A labelled matrix: `colours` say how values are coloured (WEIGHTS, SIGNED, or your own), `ticks`
    which rows and columns are labelled. Cells where `mask` is False are greyed and read "masked".
    `show_values` writes each cell's number (default: when the matrix is small enough to read them).
    `clickable` (up to CLICKABLE_CELLS cells) lays an invisible point on every cell: Plotly heatmaps
    report no selection on a click, points do, so a Streamlit selection (on_select) gets the cell's
    column as x and row as y.

    Shapes: z (n, m), x_labels m, y_labels n, mask (n, m) bool or None.
    """
    z = np.asarray(z, dtype=float)
    n, m = z.shape
    visible = np.ones(z.shape, bool) if mask is None else np.broadcast_to(np.asarray(mask, bool), z.shape)
    shown = np.where(visible & np.isfinite(z), z, np.nan)  # masked cells: gaps on the grey background
    if colours.log:
        shown = np.log10(np.clip(shown, LOG_FLOOR, None))
        colours = replace(colours, zmin=np.log10(LOG_FLOOR), zmax=0.0, centred=False)
    xl, yl = [esc(s) for s in x_labels], [esc(s) for s in y_labels]
    clickable = clickable and n * m <= CLICKABLE_CELLS
    if n * m > BIG_CELLS and not clickable:
        fig = _big_heatmap(shown, xl, yl, title=title, x_title=x_title, y_title=y_title, value_name=value_name,
                           colours=colours, height=height, row_groups=ticks.row_groups,
                           values=z if colours.log else None)
    else:
        fig = _small_heatmap(z, shown, visible, xl, yl, title=title, x_title=x_title, y_title=y_title,
                             value_name=value_name, colours=colours, ticks=ticks, digits=digits,
                             show_values=show_values, height=height, clickable=clickable)
    return _log_colorbar(fig) if colours.log else fig


BAR_ON_TOP_PX = 44  # room a colour bar across the top takes: the bar, its ticks and its title beside it


def _colour_args(colours: Colours, value_name: str) -> dict:
    """go.Heatmap's colour arguments."""
    bar = dict(title=dict(text=value_name), thickness=12, xpad=4)
    if colours.bar == "top":
        bar = dict(orientation="h", x=0.5, xanchor="center", y=1.0, yanchor="bottom", ypad=4, len=1.0,
                   thickness=10, title=dict(text=value_name, side="right"))
    return dict(zmin=colours.zmin, zmax=colours.zmax, colorscale=colours.scale, zmid=0 if colours.centred else None,
                showscale=bool(colours.bar), colorbar=bar)


def _small_heatmap(z, shown, visible, xl, yl, *, title, x_title, y_title, value_name, colours, ticks, digits,
                   show_values, height, clickable) -> go.Figure:
    """A matrix small enough for a hover string (and maybe a number) per cell."""
    n, m = z.shape
    text = [[cell_number(z[i, j], digits) if visible[i, j] else MASKED_TEXT for j in range(m)] for i in range(n)]
    yt, xt, vn = esc(y_title), esc(x_title), esc(value_name)
    hover = [[f"{yt}: {yl[i]}<br>{xt}: {xl[j]}<br>{vn}: {text[i][j]}" for j in range(m)] for i in range(n)]
    if show_values is None:
        show_values = m <= 16 and n * m <= 400  # numbers stay legible only in small matrices
    gap = 1 if max(n, m) <= 60 else 0  # cell borders would swallow thin cells
    fig = go.Figure(go.Heatmap(
        z=shown, x=list(range(m)), y=list(range(n)), text=text if show_values else None,
        texttemplate="%{text}" if show_values else None, hovertext=hover, hoverinfo="text", xgap=gap, ygap=gap,
        **_colour_args(colours, value_name),
    ))
    fig.update_layout(
        title=dict(text=esc(title)), plot_bgcolor="#d9d9d9",
        margin=dict(l=10, r=10, t=(50 if title else 20) + (BAR_ON_TOP_PX if colours.bar == "top" else 0), b=10),
        height=height or max(260, 80 + 34 * n),
    )
    fig.update_xaxes(title_text=x_title, showgrid=False, **_ticks(xl, ticks.x))
    y_ticks = _ticks(yl, ticks.y or ticks.x)
    if ticks.row_groups:
        y_ticks = dict(tickmode="array", tickvals=list(range(0, n, ticks.row_groups)),
                       ticktext=[yl[i].split(" ")[0] for i in range(0, n, ticks.row_groups)])
    fig.update_yaxes(title_text=y_title, autorange="reversed", showgrid=False, **y_ticks)
    if clickable:
        rows, cols = np.divmod(np.arange(n * m), m)
        fig.data[0].hoverinfo = "none"  # the points on top carry the same text, and are what the pointer meets
        fig.add_trace(go.Scatter(
            x=cols, y=rows, mode="markers", showlegend=False, name="cells", hoverinfo="text",
            marker=dict(size=max(6, min(30, 640 // max(n, m))), opacity=0, symbol="square"),
            hovertext=[hover[i][j] for i, j in zip(rows, cols, strict=True)],
        ))
    return fig


def categories(labels) -> list[str]:
    """A big heatmap's axis categories, one per row or column: the labels themselves when each is said once
    (positions "0", "1" ... stay "0", not "0·0"), else "position·label", which keeps a repeated token's rows
    apart ("3·the", "7·the") and lets hover name it from a template."""
    labels = [str(t) for t in labels]
    if len(set(labels)) == len(labels):
        return labels
    return [f"{i}·{t}" for i, t in enumerate(labels)]


def _big_heatmap(z, xl, yl, *, title, x_title, y_title, value_name, colours, height, row_groups=None,
                 values=None) -> go.Figure:
    """A large matrix sent as one float32 array; labels are categories (`categories`) so hover can name both
    tokens from a template (no per-cell strings: 512 x 512 cells stay ~1.4 MB)."""
    n, m = z.shape
    x, y = categories(xl), categories(yl)
    fig = go.Figure(go.Heatmap(
        z=z.astype(np.float32), x=x, y=y, customdata=None if values is None else values.astype(np.float32),
        hovertemplate=f"{esc(y_title)}: %{{y}}<br>{esc(x_title)}: %{{x}}<br>{esc(value_name)}: "
                      + ("%{z:.4f}" if values is None else "%{customdata:.4f}") + "<extra></extra>",
        **_colour_args(colours, value_name),
    ))
    fig.update_layout(title=dict(text=esc(title)), margin=dict(l=10, r=10, t=50 if title else 20, b=10),
                      height=height or min(900, max(400, 120 + 6 * n)))
    fig.update_xaxes(title_text=x_title, type="category", showgrid=False, **_every_kth(x, xl))
    fig.update_yaxes(title_text=y_title, type="category", autorange="reversed", showgrid=False, **_every_kth(y, yl))
    if row_groups:
        fig.update_yaxes(tickmode="array", tickvals=y[::row_groups],
                         ticktext=[t.split(" ")[0] for t in yl[::row_groups]])
    return fig


BIG_TICKS = 20  # labels an axis of a big heatmap carries at most: every k-th row or column, the first at 0


def _every_kth(categories_shown, labels) -> dict:
    """A big heatmap's axis labelled at every k-th row or column, at most BIG_TICKS of them (hover names every
    one): with 200 positions it showed no label at all, with all 200 they ran into each other."""
    step = max(1, -(-len(labels) // BIG_TICKS))
    return dict(tickmode="array", tickvals=list(categories_shown[::step]), ticktext=list(labels[::step]))


def _log_colorbar(fig: go.Figure) -> go.Figure:
    """Label a log10 colour bar in the values it stands for: 0.0001, 0.001 ... 1."""
    exponents = list(range(int(np.log10(LOG_FLOOR)), 1))
    fig.update_traces(colorbar=dict(tickvals=exponents, ticktext=[f"{10.0 ** e:g}" for e in exponents]),
                      selector=dict(type="heatmap"))
    return fig


def image_config(file_name: str, image_format: str = "png") -> dict:
    """st.plotly_chart's `config`: the toolbar's camera button saves `file_name`.png (or .svg) at twice
    the size on screen. file_name should come from attention.models.recorded.export.file_stem (safe characters)."""
    return {"toImageButtonOptions": {"format": image_format, "filename": file_name, "scale": 2},
            "displaylogo": False}


# --- the all-heads grid's layout, shared by its Plotly figure (models.head_grid) and its canvas (canvas.grid_canvas)
GRID_SCALE = [[0.0, "#f7fbff"], [0.05, "#c6dbef"], [0.2, "#6baed6"], [0.5, "#2171b5"], [1.0, "#08306b"]]


def tiled(tiles: np.ndarray, fill: np.ndarray | None = None) -> np.ndarray:
    """Every (layer, head) tile in one matrix, layers down and heads across, a one-cell gap (NaN) between
    tiles; with `fill` (L, H), each tile's cells hold that one number instead of its weights.
    Shapes: tiles (L, H, c, c') -> (L * (c + 1) - 1, H * (c' + 1) - 1) float32."""
    n_layers, n_heads, c, c2 = tiles.shape
    cells = tiles if fill is None else np.broadcast_to(np.asarray(fill)[:, :, None, None], tiles.shape)
    padded = np.full((n_layers, c + 1, n_heads, c2 + 1), np.nan, dtype=np.float32)
    padded[:, :c, :, :c2] = np.asarray(cells).transpose(0, 2, 1, 3)
    return padded.reshape(n_layers * (c + 1), n_heads * (c2 + 1))[:-1, :-1]


def layer_names(layer_kinds: tuple[str, ...], n_layers: int) -> tuple[list[str], str | None]:
    """The grid's layer labels: "6 · global" for a layer whose kind (ModelAttention.layer_kind) differs from
    the most common one, else its number from 1; and that most common kind's first word (None: one kind)."""
    common = max(set(layer_kinds), key=layer_kinds.count) if any(layer_kinds) else None
    names = [f"{i + 1} · {kind.split(',')[0]}" if common is not None and kind != common else str(i + 1)
             for i, kind in enumerate(layer_kinds or ("",) * n_layers)]
    return names, None if common is None else common.split(",")[0]

