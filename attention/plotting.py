"""Pure Plotly figure builders: arrays and labels in, `go.Figure` out. No Streamlit here.

Every heatmap has labelled axes, a colour bar with units, the value in each cell (small matrices) and
on hover. Token labels are HTML-escaped: Plotly renders a subset of HTML in ticks and hover text, and
labels come from users. Axes are numeric with tick labels, so repeated tokens ("the", "them") keep
their own rows and columns instead of being merged by Plotly's category axes.
"""

from __future__ import annotations

import html

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


def _fmt(x: float, digits: int) -> str:
    if np.isneginf(x):
        return "-∞"
    if np.isnan(x):
        return MASKED_TEXT
    return f"{x:.{digits}f}"


def _ticks(labels, max_labels: int = 40) -> dict:
    """Every label as a tick when they fit; otherwise Plotly's automatic numeric ticks."""
    if len(labels) <= max_labels:
        return dict(tickmode="array", tickvals=list(range(len(labels))), ticktext=labels)
    return dict(tickmode="auto")


def heatmap(
    z, x_labels, y_labels, *, title: str = "", x_title: str = "key", y_title: str = "query",
    value_name: str = "weight", zmin=None, zmax=None, colorscale: str = WEIGHT_SCALE, mask=None,
    digits: int = 2, show_values: bool | None = None, height: int | None = None, zmid_zero: bool = False,
    show_scale: bool = True, max_tick_labels: int = 40, max_y_tick_labels: int | None = None,
    row_groups: int | None = None, log_scale: bool = False, clickable: bool = False,
) -> go.Figure:
    """A labelled matrix; cells where `mask` is False are greyed and read "masked".
    `zmid_zero` centres a diverging colour scale on 0 (for signed vectors). `row_groups` g labels only
    every g-th row, with the part of its label before the first space ("L3 H1" -> "L3": one tick per
    layer of a layers x heads list). `log_scale` colours by log10 of the value (LOG_FLOOR to 1; hover and
    numbers keep the values): a sink's 0.9 no longer washes out the 0.01s. `clickable` (up to
    CLICKABLE_CELLS cells) lays an invisible point on every cell: Plotly heatmaps report no selection on a
    click, points do, so a Streamlit selection (on_select) gets the cell's column as x and row as y.

    Shapes: z (n, m), x_labels m, y_labels n, mask (n, m) bool or None.
    """
    z = np.asarray(z, dtype=float)
    n, m = z.shape
    visible = np.ones(z.shape, bool) if mask is None else np.broadcast_to(np.asarray(mask, bool), z.shape)
    shown = np.where(visible & np.isfinite(z), z, np.nan)  # masked cells: gaps on the grey background
    if log_scale:
        shown = np.log10(np.clip(shown, LOG_FLOOR, None))
        zmin, zmax, zmid_zero = np.log10(LOG_FLOOR), 0.0, False
    xl = [esc(s) for s in x_labels]
    yl = [esc(s) for s in y_labels]
    clickable = clickable and n * m <= CLICKABLE_CELLS
    if n * m > BIG_CELLS and not clickable:
        fig = _big_heatmap(shown, xl, yl, title=title, x_title=x_title, y_title=y_title, value_name=value_name,
                           zmin=zmin, zmax=zmax, colorscale=colorscale, zmid_zero=zmid_zero, height=height,
                           show_scale=show_scale, row_groups=row_groups, values=z if log_scale else None)
        return _log_colorbar(fig) if log_scale else fig
    text = [[_fmt(z[i, j], digits) if visible[i, j] else MASKED_TEXT for j in range(m)] for i in range(n)]
    yt, xt, vn = esc(y_title), esc(x_title), esc(value_name)
    hover = [[f"{yt}: {yl[i]}<br>{xt}: {xl[j]}<br>{vn}: {text[i][j]}" for j in range(m)] for i in range(n)]
    if show_values is None:
        show_values = m <= 16 and n * m <= 400  # numbers stay legible only in small matrices
    gap = 1 if max(n, m) <= 60 else 0  # cell borders would swallow thin cells
    fig = go.Figure(go.Heatmap(
        z=shown, x=list(range(m)), y=list(range(n)), zmin=zmin, zmax=zmax, colorscale=colorscale,
        zmid=0 if zmid_zero else None,
        text=text if show_values else None, texttemplate="%{text}" if show_values else None,
        hovertext=hover, hoverinfo="text", showscale=show_scale, xgap=gap, ygap=gap,
        colorbar=dict(title=dict(text=value_name), thickness=12, xpad=4),
    ))
    fig.update_layout(
        title=dict(text=esc(title)), plot_bgcolor="#d9d9d9", margin=dict(l=10, r=10, t=50 if title else 20, b=10),
        height=height or max(260, 80 + 34 * n),
    )
    fig.update_xaxes(title_text=x_title, showgrid=False, **_ticks(xl, max_tick_labels))
    y_ticks = _ticks(yl, max_y_tick_labels or max_tick_labels)
    if row_groups:
        y_ticks = dict(tickmode="array", tickvals=list(range(0, n, row_groups)),
                       ticktext=[yl[i].split(" ")[0] for i in range(0, n, row_groups)])
    fig.update_yaxes(title_text=y_title, autorange="reversed", showgrid=False, **y_ticks)
    if clickable:
        rows, cols = np.divmod(np.arange(n * m), m)
        fig.data[0].hoverinfo = "none"  # the points on top carry the same text, and are what the pointer meets
        fig.add_trace(go.Scatter(
            x=cols, y=rows, mode="markers", showlegend=False, name="cells", hoverinfo="text",
            marker=dict(size=max(6, min(30, 640 // max(n, m))), opacity=0, symbol="square"),
            hovertext=[hover[i][j] for i, j in zip(rows, cols, strict=True)],
        ))
    return _log_colorbar(fig) if log_scale else fig


LOG_FLOOR = 1e-4  # the log colour scale starts here: weights below read as this
CLICKABLE_CELLS = 4096  # cells up to which a heatmap can carry a clickable point per cell (64 x 64 tokens)


def _log_colorbar(fig: go.Figure) -> go.Figure:
    """Label a log10 colour bar in the values it stands for: 0.0001, 0.001 ... 1."""
    exponents = list(range(int(np.log10(LOG_FLOOR)), 1))
    fig.update_traces(colorbar=dict(tickvals=exponents, ticktext=[f"{10.0 ** e:g}" for e in exponents]),
                      selector=dict(type="heatmap"))
    return fig


def image_config(file_name: str, image_format: str = "png") -> dict:
    """st.plotly_chart's `config`: the toolbar's camera button saves `file_name`.png (or .svg) at twice
    the size on screen. file_name should come from attention.models.export.file_stem (safe characters)."""
    return {"toImageButtonOptions": {"format": image_format, "filename": file_name, "scale": 2},
            "displaylogo": False}


def weights_bar(labels, weights, *, title: str = "", value_name: str = "weight", y_max: float | None = 1.0,
                highlight: int | str | None = "max") -> go.Figure:
    """One bar per key; the highlighted bar is darker: "max" (the default) the largest, an int that bar,
    None none. Shapes: weights (m,)."""
    w = np.asarray(weights, dtype=float)
    if highlight == "max":
        highlight = int(np.argmax(w)) if len(w) else None
    colors = ["#1f4e9c" if i == highlight else "#7fa7e0" for i in range(len(w))]
    fig = go.Figure(go.Bar(
        x=list(range(len(w))), y=w, marker_color=colors, text=[f"{v:.3f}" for v in w], textposition="outside",
        hovertext=[f"{esc(lab)}<br>{value_name}: {v:.4f}" for lab, v in zip(labels, w, strict=True)], hoverinfo="text",
    ))
    fig.update_layout(title=dict(text=esc(title)), height=300, margin=dict(l=10, r=10, t=50 if title else 20, b=10))
    fig.update_xaxes(tickmode="array", tickvals=list(range(len(w))), ticktext=[esc(s) for s in labels])
    fig.update_yaxes(title_text=value_name, range=[0, y_max * 1.15] if y_max else None)
    return fig


def lines(x, series: dict, *, title: str = "", x_title: str = "", y_title: str = "", log_x: bool = False,
          log_y: bool = False, marker_x=None, categorical_x: bool = False, x_hover=None) -> go.Figure:
    """Several named curves over one x axis; `marker_x` draws a vertical line (e.g. the current d);
    `categorical_x` spaces labelled x values (such as offset ranges) evenly, and `x_hover` says what
    each one covers on hover. A log y axis is labelled once per decade (0.001, 0.01, 0.1, 1)."""
    fig = go.Figure()
    xs = [esc(v) for v in x] if categorical_x else np.asarray(x)
    shown_x = "%{customdata}" if x_hover is not None else "%{x}"
    for name, y in series.items():
        fig.add_trace(go.Scatter(x=xs, y=np.asarray(y), mode="lines+markers", name=esc(name),
                                 customdata=None if x_hover is None else [esc(h) for h in x_hover],
                                 hovertemplate=f"{esc(x_title)}: {shown_x}<br>{esc(y_title)}: %{{y:.4g}}"
                                               f"<extra>{esc(name)}</extra>"))
    if marker_x is not None:
        fig.add_vline(x=marker_x, line_dash="dot", line_color="grey")
    fig.update_layout(title=dict(text=esc(title)), height=320, margin=dict(l=10, r=10, t=50, b=10),
                      legend=dict(orientation="h", y=-0.25))
    fig.update_xaxes(title_text=x_title, type="category" if categorical_x else "log" if log_x else "linear",
                     tickangle=0 if categorical_x else None)
    fig.update_yaxes(title_text=y_title, type="log" if log_y else "linear",
                     **(dict(dtick=1, tickformat="~g") if log_y else {}))
    return fig


def vector_plane(points: dict, *, axes=("dimension 1", "dimension 2"), title: str = "", faded=()) -> go.Figure:
    """2-D arrows from 0 for named vectors, on equal axes around 0 (rotations look like rotations);
    names in `faded` are drawn dotted and pale (e.g. a vector before it was rotated). Shapes: each (2,)."""
    fig = go.Figure()
    reach = max([1.0] + [float(np.hypot(*v)) for v in points.values()]) * 1.15
    for name, (a, b) in points.items():
        pale = name in faded
        fig.add_trace(go.Scatter(x=[0, a], y=[0, b], mode="lines+markers+text", name=esc(name),
                                 text=["", esc(name)], textposition="top center", opacity=0.45 if pale else 1,
                                 line=dict(dash="dot" if pale else "solid", width=2 if pale else 3),
                                 hovertemplate=f"{esc(axes[0])}: %{{x:.3f}}<br>{esc(axes[1])}: %{{y:.3f}}"
                                               f"<extra>{esc(name)}</extra>"))
    fig.update_layout(title=dict(text=esc(title)), height=380, margin=dict(l=10, r=10, t=50, b=10),
                      legend=dict(orientation="h", y=-0.2))
    fig.update_xaxes(title_text=esc(axes[0]), range=[-reach, reach], zeroline=True)
    fig.update_yaxes(title_text=esc(axes[1]), range=[-reach, reach], zeroline=True, scaleanchor="x")
    return fig


def sense_plane(points: dict, *, axes=("nature", "finance"), title: str = "") -> go.Figure:
    """2-D scatter of named vectors (e.g. the output of "bank" in each sentence) with arrows from 0."""
    fig = go.Figure()
    for name, (a, b) in points.items():
        fig.add_trace(go.Scatter(x=[0, a], y=[0, b], mode="lines+markers+text", name=esc(name),
                                 text=["", esc(name)], textposition="top center",
                                 hovertemplate=f"{esc(axes[0])}: %{{x:.3f}}<br>{esc(axes[1])}: %{{y:.3f}}"
                                               f"<extra>{esc(name)}</extra>"))
    fig.update_layout(title=dict(text=esc(title)), height=360, margin=dict(l=10, r=10, t=50, b=10),
                      legend=dict(orientation="h", y=-0.2))
    fig.update_xaxes(title_text=esc(axes[0]), range=[-0.05, 1.05])
    fig.update_yaxes(title_text=esc(axes[1]), range=[-0.05, 1.05])
    return fig


def _big_heatmap(z, xl, yl, *, title, x_title, y_title, value_name, zmin, zmax, colorscale, zmid_zero, height,
                 show_scale, row_groups=None, values=None) -> go.Figure:
    """A large matrix sent as one float32 array; labels are "position·token" categories so hover can name
    both tokens from a template (no per-cell strings: 512 x 512 cells stay ~1.4 MB)."""
    n, m = z.shape
    x = [f"{j}·{t}" for j, t in enumerate(xl)]
    y = [f"{i}·{t}" for i, t in enumerate(yl)]
    fig = go.Figure(go.Heatmap(
        z=z.astype(np.float32), x=x, y=y, zmin=zmin, zmax=zmax, colorscale=colorscale, zmid=0 if zmid_zero else None,
        customdata=None if values is None else values.astype(np.float32),
        hovertemplate=f"{esc(y_title)}: %{{y}}<br>{esc(x_title)}: %{{x}}<br>{esc(value_name)}: "
                      + ("%{z:.4f}" if values is None else "%{customdata:.4f}") + "<extra></extra>",
        colorbar=dict(title=dict(text=value_name), thickness=12, xpad=4), showscale=show_scale,
    ))
    fig.update_layout(title=dict(text=esc(title)), margin=dict(l=10, r=10, t=50 if title else 20, b=10),
                      height=height or min(900, max(400, 120 + 6 * n)))
    fig.update_xaxes(title_text=x_title, type="category", showgrid=False, showticklabels=m <= 80)
    fig.update_yaxes(title_text=y_title, type="category", autorange="reversed", showgrid=False,
                     showticklabels=n <= 80 or bool(row_groups))
    if row_groups:
        fig.update_yaxes(tickmode="array", tickvals=y[::row_groups],
                         ticktext=[t.split(" ")[0] for t in yl[::row_groups]])
    return fig


GRID_SCALE = [[0.0, "#f7fbff"], [0.05, "#c6dbef"], [0.2, "#6baed6"], [0.5, "#2171b5"], [1.0, "#08306b"]]


def head_grid(tiles: np.ndarray, *, title: str = "", hover_extra: np.ndarray | None = None,
              hover_label: str = "") -> go.Figure:
    """Every layer x head as one small tile, in a single heatmap trace (not L x H charts).

    `tiles` are each head's weights, already pooled to a few cells per side (attention.models.head_survey);
    hovering a tile names its layer and head (1-based) and, with `hover_extra` (L, H), one more number.
    Shapes: tiles (L, H, c, c').
    """
    n_layers, n_heads, c, c2 = tiles.shape
    z = np.full((n_layers * (c + 1) - 1, n_heads * (c2 + 1) - 1), np.nan, dtype=np.float32)
    extra = np.zeros(z.shape, dtype=np.uint8)  # whole percents: a quarter of float32's bytes on the wire
    for layer in range(n_layers):
        for head in range(n_heads):
            cell = (slice(layer * (c + 1), layer * (c + 1) + c), slice(head * (c2 + 1), head * (c2 + 1) + c2))
            z[cell] = tiles[layer, head]
            if hover_extra is not None:
                extra[cell] = np.rint(np.clip(hover_extra[layer, head], 0, 1) * 100)
    # Coordinates: tile (layer, head) spans layer+1 +- 0.5*c/(c+1), so rounding names the tile.
    def centres(count: int, size: int) -> np.ndarray:
        offsets = (np.arange(size + 1) - (size - 1) / 2) / (size + 1)  # size cells, then the gap at +0.5
        return (np.arange(count)[:, None] + 1 + offsets[None, :]).ravel()[:-1].astype(np.float32)

    hover = "layer %{y:.0f} · head %{x:.0f}<br>weight (block max): %{z:.3f}"
    if hover_extra is not None:
        hover += f"<br>{esc(hover_label)}: %{{customdata}}%"
    fig = go.Figure(go.Heatmap(
        z=z, x=centres(n_heads, c2), y=centres(n_layers, c), zmin=0, zmax=1, colorscale=GRID_SCALE,
        customdata=extra if hover_extra is not None else None, hovertemplate=hover + "<extra></extra>",
        colorbar=dict(title=dict(text="weight"), thickness=12, xpad=4), hoverongaps=False,
    ))
    # Plotly heatmaps report no selection on a click; a point does. One invisible point per tile, on top, so
    # that a Streamlit selection (on_select) names the tile: its x is the head and y the layer, from 1.
    layers, heads = np.divmod(np.arange(n_layers * n_heads), n_heads)
    fig.add_trace(go.Scatter(
        x=heads + 1, y=layers + 1, mode="markers", showlegend=False, name="heads",
        marker=dict(size=max(8, min(40, 480 // max(n_heads, n_layers))), opacity=0, symbol="square"),
        customdata=None if hover_extra is None else np.rint(np.clip(hover_extra, 0, 1) * 100).ravel(),
        hovertemplate="layer %{y} · head %{x}"
                      + (f"<br>{esc(hover_label)}: %{{customdata}}%" if hover_extra is not None else "")
                      + "<br>click to open it in the zoom<extra></extra>",
    ))
    fig.update_layout(title=dict(text=esc(title)), plot_bgcolor="white", height=int(min(2400, 80 + n_layers * 70)),
                      margin=dict(l=10, r=10, t=50 if title else 20, b=10))
    fig.update_xaxes(title_text="head", tickmode="array", tickvals=list(range(1, n_heads + 1)), showgrid=False,
                     zeroline=False, side="top")
    fig.update_yaxes(title_text="layer", tickmode="array", tickvals=list(range(1, n_layers + 1)), showgrid=False,
                     zeroline=False, autorange="reversed")
    return fig


HEAD_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def attention_lines(view, *, title: str = "") -> go.Figure:
    """BertViz's head view in Plotly: queries on the left, keys on the right, a line per (query, key) whose
    opacity is the weight, one colour per head (attention.models.aggregations.LineView). Lines are drawn
    in five opacity bands per head (one trace each, not one per line); hovering a line's middle names it.
    Shapes: view.lines per head (k, 3) rows (query, key, weight)."""
    labels = [esc(t) for t in view.labels]
    n = len(labels)
    fig = go.Figure()
    bands = np.array([0.0, 0.1, 0.25, 0.5, 0.75, 1.01])
    for h, (head, rows) in enumerate(zip(view.heads, view.lines, strict=True)):
        colour = HEAD_COLOURS[h % len(HEAD_COLOURS)]
        for lo, hi in zip(bands[:-1], bands[1:], strict=True):
            part = rows[(rows[:, 2] >= lo) & (rows[:, 2] < hi)]
            if not len(part):
                continue
            xs = np.tile([0.0, 1.0, np.nan], len(part))
            ys = np.column_stack([part[:, 0], part[:, 1], np.full(len(part), np.nan)]).ravel()
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=dict(color=colour, width=1 + 3 * hi),
                                     opacity=float(min(1.0, 0.15 + hi * 0.85)), hoverinfo="skip",
                                     legendgroup=head, showlegend=False))
        q, k, w = rows[:, 0].astype(int), rows[:, 1].astype(int), rows[:, 2]
        fig.add_trace(go.Scatter(  # the middles of the lines: what hover finds
            x=np.full(len(rows), 0.5), y=(q + k) / 2, mode="markers", marker=dict(size=6, color=colour, opacity=0.01),
            name=esc(head), legendgroup=head, showlegend=True,
            hovertext=[f"{esc(head)}: {labels[i]} → {labels[j]}<br>weight {v:.3f}"
                       for i, j, v in zip(q, k, w, strict=True)],
            hoverinfo="text"))
    fig.add_trace(go.Scatter(x=np.zeros(n), y=np.arange(n), mode="text", text=labels, textposition="middle left",
                             hoverinfo="skip", showlegend=False, textfont=dict(size=12)))
    fig.add_trace(go.Scatter(x=np.ones(n), y=np.arange(n), mode="text", text=labels, textposition="middle right",
                             hoverinfo="skip", showlegend=False, textfont=dict(size=12)))
    fig.update_layout(title=dict(text=esc(title)), height=int(max(300, 60 + 22 * n)), plot_bgcolor="white",
                      margin=dict(l=10, r=10, t=50 if title else 20, b=10), hovermode="closest",
                      legend=dict(orientation="h", y=1.02, x=0, yanchor="bottom"))
    fig.update_xaxes(range=[-0.6, 1.6], visible=False, fixedrange=True)
    fig.update_yaxes(range=[n - 0.5, -0.5], visible=False)
    return fig
