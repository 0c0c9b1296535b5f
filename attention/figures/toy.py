"""Charts of the toy side: weights as bars, a predict-then-see reveal, curves, vectors on a plane, a toy
trace step by step. numpy and Plotly only (no torch): the toy pages start fast."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from attention.figures.base import BELOW, SIGNED, WEIGHTS, cell_number, esc, two_lines

# A legend under the chart, in the figure's own coordinates: Plotly keeps the room it needs below the x axis's
# title. Placed under the plot area instead (y=-0.25 of its height), it ran over the title at some widths.
COVERING = "#d62728"  # a curve drawn over an equal one: dashed, in a colour no theme gives the one beneath


BAR_VALUES = 6  # bars whose values weights_bar writes flat above them; more are written turned upright (flat,
# 7 and more in half a page at 800 px shrank to 5 px; dropped, a reader's own sentence showed no values at all)
VALUE_PX = 11  # a bar's value is written this size, never shrunk to fit its bar; where neighbours' values would
# overlap (bars narrower than a line of text) the browser hides some (pages/components/fit.js), hover keeps all


def weights_bar(labels, weights, *, title: str = "", value_name: str = "weight", y_max: float | None = 1.0,
                highlight: int | str | None = "max") -> go.Figure:
    """One bar per key; the highlighted bar is darker: "max" (the default) the largest, an int that bar,
    None none. Each value is written beyond its bar's end at VALUE_PX (flat up to BAR_VALUES bars, upright
    beyond), and on hover always. Shapes: weights (m,)."""
    w = np.asarray(weights, dtype=float)
    if highlight == "max":
        highlight = int(np.argmax(w)) if len(w) else None
    colors = ["#1f4e9c" if i == highlight else "#7fa7e0" for i in range(len(w))]
    upright = len(w) > BAR_VALUES
    fig = go.Figure(go.Bar(
        x=list(range(len(w))), y=w, marker_color=colors, textposition="outside", text=[f"{v:.3f}" for v in w],
        textangle=-90 if upright else 0, cliponaxis=False, textfont=dict(size=VALUE_PX), constraintext="none",
        hovertext=[f"{esc(lab)}<br>{value_name}: {v:.4f}" for lab, v in zip(labels, w, strict=True)], hoverinfo="text",
    ))
    fig.update_layout(title=dict(text=esc(title)), height=300, margin=dict(l=10, r=10, t=50 if title else 20, b=10))
    # Labels that do not fit flat turn to -45 degrees, each ending under its bar. Turned Plotly's own way
    # (+30), the last ones ran past the right edge at 800 px and [SEP] was dropped.
    fig.update_xaxes(tickmode="array", tickvals=list(range(len(w))), ticktext=[esc(s) for s in labels],
                     autotickangles=[0, -45, -90], automargin=True)
    head_room = 1.4 if upright else 1.15  # an upright "0.123" above a full bar needs ~a third of the plot's height
    if y_max:
        shown = [0, y_max * head_room]
    else:  # signed (a difference): room beyond each end for the values written there, clear of the tick labels
        low, high = min(0.0, float(w.min(initial=0.0))), max(0.0, float(w.max(initial=0.0)))
        span = (high - low) * (0.45 if upright else 0.2)  # an upright "-0.237" is ~40 px of a ~200-px plot
        shown = [low - (span if low < 0 else 0), high + (span if high > 0 else 0)] if high > low else None
    fig.update_yaxes(title_text=value_name, range=shown)
    return fig


def reveal_bars(reveal) -> go.Figure:
    """A question's answer as horizontal bars: the figures that decide it (attention.toy.reveal.Reveal's
    `bars`), each labelled with its value as the answer's sentence says it (Reveal.shown: one rounding rule),
    under the title of what they measure. Labels are wrapped, not cut."""
    labels = [esc(label) for label, _ in reveal.bars]
    values = np.asarray([v for _, v in reveal.bars], dtype=float)
    best = int(np.argmax(values)) if len(values) else None
    rows = list(range(len(values)))  # one bar per position: a word said twice ("them", "the") keeps two bars
    fig = go.Figure(go.Bar(
        y=rows, x=values, orientation="h", marker_color=["#1f4e9c" if i == best else "#7fa7e0" for i in rows],
        text=[reveal.shown(v) for v in values], textposition="outside",
        cliponaxis=False, customdata=labels, hovertemplate="%{customdata}: %{x:.4g}<extra></extra>"))
    # Weights, probabilities and shares (all within 0 to 1) on a 0-to-1 scale: 0.36 drawn across the whole width
    # read as "close to 1" beside an answer that said it stays well below.
    unit = len(values) and values.min() >= 0 and values.max() <= 1
    top = 1.0 if unit else float(values.max()) if len(values) and values.max() > 0 else 1.0
    fig.update_layout(title=dict(text=esc(reveal.measure)), height=80 + 34 * len(values),
                      margin=dict(l=10, r=40, t=40, b=10), showlegend=False)
    low = min(0.0, float(values.min(initial=0.0)))  # a negative bar's value is written left of it: room for it
    fig.update_xaxes(range=[low - (0.25 * (top - low) if low < 0 else 0.0), top * 1.2], showticklabels=False)
    fig.update_yaxes(autorange="reversed", automargin=True, tickmode="array", tickvals=rows, ticktext=labels)
    return fig


def line_chart(x, series: dict, *, title: str = "", x_title: str = "", y_title: str = "", log_x: bool = False,
          log_y: bool = False, marker_x=None, marker_label: str | None = None, categorical_x: bool = False,
          x_hover=None) -> go.Figure:
    """Several named curves over one x axis; `marker_x` draws a vertical line (e.g. the current d), labelled
    `marker_label` (default "<x_title> = <marker_x>": a line without its label was a line a reader guessed at);
    `categorical_x` spaces labelled x values (such as offset ranges) evenly, and `x_hover` says what
    each one covers on hover. A log y axis is labelled at 1, 2 and 5 times a power of ten (log_ticks).
    A curve equal to one drawn before it (two positions' similarity, which depends on distance alone) is drawn
    dashed on top of it, so both show; the legend sits below the x axis's title, never on it."""
    fig = go.Figure()
    xs = [esc(v) for v in x] if categorical_x else np.asarray(x)
    shown_x = "%{customdata}" if x_hover is not None else "%{x}"
    drawn: list[np.ndarray] = []
    for name, y in series.items():
        y = np.asarray(y, dtype=float)
        covers = any(d.shape == y.shape and np.allclose(d, y, rtol=1e-6, atol=1e-9, equal_nan=True) for d in drawn)
        drawn.append(y)
        fig.add_trace(go.Scatter(x=xs, y=y, mode="lines" if covers else "lines+markers", name=esc(name),
                                 line=dict(dash="dash", width=2.5, color=COVERING) if covers else None,
                                 customdata=None if x_hover is None else [esc(h) for h in x_hover],
                                 hovertemplate=f"{esc(x_title)}: {shown_x}<br>{esc(y_title)}: %{{y:.4g}}"
                                               f"<extra>{esc(name)}</extra>"))
    if marker_x is not None:
        fig.add_vline(x=marker_x, line_dash="dot", line_color="grey")
        label = marker_label if marker_label is not None else f"{x_title} = {marker_x:g}".strip(" =")
        at = np.log10(marker_x) if log_x and not categorical_x else marker_x  # an annotation on a log axis: log10
        fig.add_annotation(x=at, xref="x", y=1.0, yref="paper", yanchor="bottom", xanchor="center", showarrow=False,
                           text=esc(label), font=dict(size=11, color="grey"))
    fig.update_layout(title=dict(text=esc(title)), height=320, margin=dict(l=10, r=10, t=50, b=10),
                      legend=BELOW)
    fig.update_xaxes(title_text=esc(x_title), type="category" if categorical_x else "log" if log_x else "linear",
                     tickangle=0 if categorical_x else None)
    ticks = log_ticks([v for y in series.values() for v in np.ravel(y)]) if log_y else None
    fig.update_yaxes(title_text=esc(y_title), type="log" if log_y else "linear",
                     **(dict(tickvals=ticks, ticktext=[f"{t:g}" for t in ticks]) if ticks else {}))
    return fig


def log_ticks(values, most: int = 8) -> list[float]:
    """Tick values for a log axis over `values` (the positive ones): the powers of ten inside their range, with
    2x and 5x when that makes fewer than three ticks, and 1x-9x when even that does not (a curve within one
    decade, such as 0.02-0.09, had a single label). At most `most`, thinned to every other; [] (Plotly's own
    ticks) when fewer than two fit."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v) & (v > 0)]
    if not v.size:
        return []
    lo, hi = v.min() * (1 - 1e-9), v.max() * (1 + 1e-9)
    decades = 10.0 ** np.arange(np.floor(np.log10(lo)), np.ceil(np.log10(hi)) + 1)
    for steps in ((1,), (1, 2, 5), range(1, 10)):
        ticks = [float(f"{d * s:.6g}") for d in decades for s in steps if lo <= d * s <= hi]
        if len(ticks) >= 3:
            break
    while len(ticks) > most:
        ticks = ticks[::2]
    return ticks if len(ticks) >= 2 else []


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
    fig.update_layout(title=dict(text=esc(title)), height=380, margin=dict(l=10, r=10, t=50, b=10), legend=BELOW)
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
    fig.update_layout(title=dict(text=esc(title)), height=360, margin=dict(l=10, r=10, t=50, b=10), legend=BELOW)
    fig.update_xaxes(title_text=esc(axes[0]), range=[-0.05, 1.05])
    fig.update_yaxes(title_text=esc(axes[1]), range=[-0.05, 1.05])
    return fig


def trace_steps(trace, query_labels=None, key_labels=None, *, title: str = "") -> go.Figure:
    """A toy AttentionTrace (attention.toy.trace) step by step: the scaled scores beside the softmax weights,
    one row per query. Shapes: trace.scaled and trace.weights (n, m)."""

    n, m = trace.weights.shape[-2:]
    rows = [esc(x) for x in (query_labels or [f"q{i}" for i in range(n)])]
    cols = [esc(x) for x in (key_labels or [f"k{j}" for j in range(m)])]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("scaled scores q·k / √dₖ", "softmax weights"),
                        horizontal_spacing=0.12)
    scaled = np.where(np.isfinite(trace.scaled), trace.scaled, np.nan)
    for col, (z, scale, colours) in enumerate(((scaled, "score", SIGNED), (trace.weights, "weight", WEIGHTS)), 1):
        fig.add_trace(go.Heatmap(z=z, x=cols, y=rows, colorscale=colours.scale, zmin=colours.zmin, zmax=colours.zmax,
                                 zmid=0 if colours.centred else None, text=np.round(z, 3), texttemplate="%{text}",
                                 hovertemplate=f"query %{{y}}<br>key %{{x}}<br>{scale}: %{{z:.4f}}<extra></extra>",
                                 colorbar=dict(x=0.44 if col == 1 else 1.0, thickness=10, title=dict(text=scale))),
                      row=1, col=col)
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(title=dict(text=esc(title)), height=max(260, 90 + 40 * n), margin=dict(l=10, r=10, t=60, b=10))
    return fig


def heatmap_panels(matrices, x_labels, y_labels, *, titles, colours=WEIGHTS, value_name: str = "weight",
                   x_title: str = "key", y_title: str = "query", mask=None, per_row: int = 2,
                   show_values: bool = True, digits: int = 2) -> go.Figure:
    """Matrices of the same shape side by side in one figure, `per_row` to a row, each under its title: all the
    same size, on one colour scale with one colour bar (so equal colours are equal values across panels), the
    row labels once per row. (One chart per matrix in page columns gave the chart with the colour bar narrower
    cells than the others: at 800 px its numbers shrank to 4 px.) Cells where `mask` is False are grey and
    read "masked". Shapes: matrices (p, n, m), x_labels m, y_labels n, mask (n, m) bool or None."""
    z = np.asarray(matrices, dtype=float)
    count, n, m = z.shape
    rows = -(-count // per_row)
    visible = np.ones((n, m), bool) if mask is None else np.asarray(mask, bool)
    xl, yl = [esc(s) for s in x_labels], [esc(s) for s in y_labels]
    # Shared axes: row labels at the left of each row, column labels under the last row only (under every row,
    # turned labels ran into the next row's titles). Rows about 40 px apart: room for the next row's titles.
    wrapped = per_row > 1 and any(two_lines(t) != esc(t) for t in titles)  # a title on two lines: 16 px more on top
    height = rows * (40 + 30 * n) + 90 + 16 * wrapped
    fig = make_subplots(rows=rows, cols=per_row, shared_yaxes=True, shared_xaxes=True, horizontal_spacing=0.03,
                        vertical_spacing=min(0.3, 40 / (height - 150)),
                        subplot_titles=[two_lines(t) if per_row > 1 else esc(t) for t in titles])
    for i in range(count):
        shown = np.where(visible & np.isfinite(z[i]), z[i], np.nan)  # masked cells: gaps on the grey background
        text = [[cell_number(z[i, r, c], digits) if visible[r, c] else "masked" for c in range(m)] for r in range(n)]
        where = [[f"{esc(y_title)}: {yl[r]}<br>{esc(x_title)}: {xl[c]}" for c in range(m)] for r in range(n)]
        fig.add_trace(go.Heatmap(z=shown, x=list(range(m)), y=list(range(n)), coloraxis="coloraxis", xgap=1, ygap=1,
                                 text=text, texttemplate="%{text}" if show_values else None, customdata=where,
                                 hovertemplate=f"{esc(titles[i])}<br>%{{customdata}}<br>{esc(value_name)}: "
                                               "%{text}<extra></extra>"),
                      row=i // per_row + 1, col=i % per_row + 1)
    fig.update_xaxes(tickmode="array", tickvals=list(range(m)), ticktext=xl, showgrid=False)
    fig.update_yaxes(tickmode="array", tickvals=list(range(n)), ticktext=yl, autorange="reversed", showgrid=False)
    for r in range(rows):
        fig.update_yaxes(title_text=esc(y_title), row=r + 1, col=1)
    for c in range(per_row):
        fig.update_xaxes(title_text=esc(x_title), row=rows, col=c + 1)
    scale = dict(cmin=colours.zmin, cmax=colours.zmax, cmid=0 if colours.centred else None)
    fig.update_layout(coloraxis=dict(colorscale=colours.scale, showscale=colours.bar,
                                     colorbar=dict(title=dict(text=esc(value_name)), thickness=12, xpad=4),
                                     **{k: v for k, v in scale.items() if v is not None}),
                      plot_bgcolor="#d9d9d9", height=height, margin=dict(l=10, r=10, t=40 + 16 * wrapped, b=10, pad=0))
    return fig
