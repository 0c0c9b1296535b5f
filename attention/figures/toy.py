"""Charts of the toy side: weights as bars, a predict-then-see reveal, curves, vectors on a plane, a toy
trace step by step. numpy and Plotly only (no torch): the toy pages start fast."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from attention.figures.base import SIGNED, WEIGHTS, esc


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
    # Labels that do not fit flat turn to -45 degrees, each ending under its bar. Turned Plotly's own way
    # (+30), the last ones ran past the right edge at 800 px and [SEP] was dropped.
    fig.update_xaxes(tickmode="array", tickvals=list(range(len(w))), ticktext=[esc(s) for s in labels],
                     autotickangles=[0, -45, -90], automargin=True)
    fig.update_yaxes(title_text=value_name, range=[0, y_max * 1.15] if y_max else None)
    return fig


def reveal_bars(reveal) -> go.Figure:
    """A question's answer as horizontal bars: the figures that decide it (attention.toy.questions.Reveal's
    `bars`), each labelled with its value, under the title of what they measure. Labels are wrapped, not cut."""
    labels = [esc(label) for label, _ in reveal.bars]
    values = np.asarray([v for _, v in reveal.bars], dtype=float)
    best = int(np.argmax(values)) if len(values) else None
    rows = list(range(len(values)))  # one bar per position: a word said twice ("them", "the") keeps two bars
    fig = go.Figure(go.Bar(
        y=rows, x=values, orientation="h", marker_color=["#1f4e9c" if i == best else "#7fa7e0" for i in rows],
        text=[f"{v:.3g}" if abs(v) >= 1e-9 or v == 0 else "0" for v in values], textposition="outside",
        cliponaxis=False, customdata=labels, hovertemplate="%{customdata}: %{x:.4g}<extra></extra>"))
    top = float(values.max()) if len(values) and values.max() > 0 else 1.0
    fig.update_layout(title=dict(text=esc(reveal.measure)), height=80 + 34 * len(values),
                      margin=dict(l=10, r=40, t=40, b=10), showlegend=False)
    fig.update_xaxes(range=[min(0.0, float(values.min(initial=0.0))), top * 1.2], showticklabels=False)
    fig.update_yaxes(autorange="reversed", automargin=True, tickmode="array", tickvals=rows, ticktext=labels)
    return fig


def line_chart(x, series: dict, *, title: str = "", x_title: str = "", y_title: str = "", log_x: bool = False,
          log_y: bool = False, marker_x=None, categorical_x: bool = False, x_hover=None) -> go.Figure:
    """Several named curves over one x axis; `marker_x` draws a vertical line (e.g. the current d);
    `categorical_x` spaces labelled x values (such as offset ranges) evenly, and `x_hover` says what
    each one covers on hover. A log y axis is labelled at 1, 2 and 5 times a power of ten (log_ticks)."""
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
    ticks = log_ticks([v for y in series.values() for v in np.ravel(y)]) if log_y else None
    fig.update_yaxes(title_text=y_title, type="log" if log_y else "linear",
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


def trace_steps(trace, query_labels=None, key_labels=None, *, title: str = "") -> go.Figure:
    """A toy AttentionTrace (attention.toy.trace) step by step: the scaled scores beside the softmax weights,
    one row per query. Shapes: trace.scaled and trace.weights (n, m)."""

    n, m = trace.weights.shape[-2:]
    rows = [esc(x) for x in (query_labels or [f"q{i}" for i in range(n)])]
    cols = [esc(x) for x in (key_labels or [f"k{j}" for j in range(m)])]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("scaled scores q·k / √d_k", "softmax weights"),
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
