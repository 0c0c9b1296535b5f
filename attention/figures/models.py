"""Figures of a real model's attention, the ones the model pages draw, for notebooks too (the catalogue is in
attention.figures, this module's front). The builders (view_heatmap, head_grid, attention_lines,
layer_head_heatmap, lens_heatmap) take arrays and views; results.py makes one from a result in one call,
bertviz.py answers BertViz's calls. Figures are Plotly's: in JupyterLab and VS Code they
render offline (plotly.js ships with the plotly package, no CDN); `html_action="return"` gives
self-contained HTML. Labels are escaped as in attention.figures.base. This module takes arrays and the views'
fields only (numpy and Plotly): it loads without torch."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from attention.figures.base import (
    AUTO_TICKS,
    GRID_SCALE,
    SIGNED,
    WEIGHTS,
    Colours,
    Ticks,
    esc,
    heatmap,
    layer_names,
    tiled,
)
from attention.naming import head_name

__all__ = ["attention_lines", "comparison", "pair", "row_distance", "effects", "focus_meta", "head_grid",
           "layer_head_heatmap", "lens_heatmap", "named", "view_heatmap", "window_edge", "HEAD_COLOURS",
           "qk_attribution_heatmap"]


def view_heatmap(view, *, x_title: str = "key", y_title: str = "query", height: int | None = None,
                 ticks: Ticks = AUTO_TICKS, clickable: bool = False) -> go.Figure:
    """A MatrixView (attention.models.recorded.views) as a heatmap: its labels, title and mask, weights from 0 to
    its zmax, by log10 when the view was read with log colours (view.log)."""
    colours = WEIGHTS if view.zmax == 1.0 else Colours(0.0, view.zmax)
    fig = heatmap(view.matrix, view.col_labels, view.row_labels, title=view.title, x_title=x_title,
                  y_title=y_title, value_name=view.value_name, colours=colours.logged(view.log), ticks=ticks,
                  mask=view.mask, show_values=False, height=height, clickable=clickable)
    return window_edge(fig, view)


def window_edge(fig: go.Figure, view) -> go.Figure:
    """A local layer's sliding window drawn on its heatmap: a dashed line along the first key each query still
    sees (query i sees keys i - window + 1 .. i), from the first query whose window is full to the last.
    Nothing is drawn where the text is no longer than the window (every key is then in it)."""
    window, b = view.window, view.block
    rows = view.matrix.shape[0]
    if window is None or rows * b <= window:
        return fig

    def cell(token_edge: float) -> float:  # a position between tokens, in the heatmap's cell coordinates
        return token_edge / b - 0.5

    # One key further for each query further: a line of slope 1 from the first full window to the bottom edge.
    y0, y1 = cell(window - 0.5), rows - 0.5
    fig.add_shape(type="line", x0=cell(0), y0=y0, x1=cell(0) + y1 - y0, y1=y1,
                  line=dict(color="#d62728", width=2, dash="dash"), xref="x", yref="y", layer="above")
    fig.add_annotation(x=cell(0), y=cell(window - 0.5), text=f"window: {window:,} tokens", showarrow=False,
                       xanchor="left", yanchor="top", font=dict(color="#d62728", size=12),
                       bgcolor="rgba(255,255,255,0.7)")
    return fig




def focus_meta(*, layer: int | None = None, head: int | None = None, token: str | None = None) -> dict:
    """What a chart shows: the layer and head (from 0; None where it shows no one head, or every one) and the
    query token. Its title says the same in words ("Layer 3, head 5: “bank” …", from 1); the meta lets a
    test or a notebook check that every chart of a page shows the same focus (a Plotly figure's
    layout.meta, a canvas heatmap's meta)."""
    return {"layer": layer, "head": head, "token": token}


def named(fig: go.Figure, *, layer: int | None = None, head: int | None = None, token: str | None = None) -> go.Figure:
    """A Plotly figure that says what it shows in its layout's meta (focus_meta)."""
    return fig.update_layout(meta=focus_meta(layer=layer, head=head, token=token))


def head_grid(tiles: np.ndarray, *, title: str = "", hover_extra: np.ndarray | None = None,
              hover_label: str = "", layer_kinds: tuple[str, ...] = ()) -> go.Figure:
    """Every layer x head as one small tile, in a single heatmap trace (not L x H charts).

    `tiles` are each head's weights, already pooled to a few cells per side (attention.models.forward.head_survey);
    hovering a tile names its layer and head (1-based) and, with `hover_extra` (L, H), one more number.
    `layer_kinds` (ModelAttention.layer_kind per layer: "global", "local, window 512") label the layers whose
    kind differs from the most common one ("6 · global").
    Shapes: tiles (L, H, c, c').
    """
    n_layers, n_heads, c, c2 = tiles.shape
    z = tiled(tiles)
    extra = None  # whole percents: a quarter of float32's bytes on the wire
    if hover_extra is not None:
        extra = np.nan_to_num(tiled(tiles, np.rint(np.clip(hover_extra, 0, 1) * 100))).astype(np.uint8)
    # Coordinates: tile (layer, head) spans layer+1 +- 0.5*c/(c+1), so rounding names the tile.
    def centres(count: int, size: int) -> np.ndarray:
        offsets = (np.arange(size + 1) - (size - 1) / 2) / (size + 1)  # size cells, then the gap at +0.5
        return (np.arange(count)[:, None] + 1 + offsets[None, :]).ravel()[:-1].astype(np.float32)

    hover = "layer %{y:.0f} · head %{x:.0f}<br>weight (block max): %{z:.3f}"
    if hover_extra is not None:
        hover += f"<br>{esc(hover_label)}: %{{customdata}}%"
    fig = go.Figure(go.Heatmap(
        z=z, x=centres(n_heads, c2), y=centres(n_layers, c), zmin=0, zmax=1, colorscale=GRID_SCALE,
        customdata=extra, hovertemplate=hover + "<extra></extra>",
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
    ticks, common = layer_names(layer_kinds, n_layers)
    fig.update_yaxes(title_text="layer" + (f" (the others {common})" if common else ""),
                     tickmode="array", tickvals=list(range(1, n_layers + 1)), ticktext=ticks, showgrid=False,
                     zeroline=False, autorange="reversed")
    return fig


HEAD_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def attention_lines(view, *, title: str = "") -> go.Figure:
    """BertViz's head view in Plotly: queries on the left, keys on the right, a line per (query, key) whose
    opacity is the weight, one colour per head (attention.models.recorded.views.LineView). Lines are drawn
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


def layer_head_heatmap(values, *, title: str, value_name: str, signed: bool = True, zmax: float | None = None,
                       clickable: bool = False, open_head: tuple[int, int] | None = None) -> go.Figure:
    """One number per head, layers down and heads across (1-based): effects, shares, role scores. `open_head`
    (layer, head), 0-based, is outlined; `zmax` the top of the scale (signed: −zmax to zmax), so that two charts
    side by side share one. Shapes: values (L, H)."""
    values = np.asarray(values, dtype=float)
    L, H = values.shape
    colours = Colours(-zmax if zmax else None, zmax, scale="RdBu", centred=True) if signed else Colours(0.0, zmax)
    fig = heatmap(values, [str(h + 1) for h in range(H)], [str(i + 1) for i in range(L)], title=title,
                  x_title="head", y_title="layer", value_name=value_name, colours=colours, show_values=False,
                  height=min(1000, 140 + 22 * L), clickable=clickable)
    if open_head is not None:
        fig.add_trace(go.Scatter(x=[open_head[1]], y=[open_head[0]], mode="markers", showlegend=False, name="open",
                                 hoverinfo="skip", marker=dict(size=max(10, min(34, 640 // max(H, L))),
                                                               symbol="square-open", color="#d62728",
                                                               line=dict(width=2))))
    return fig


LENS_PLOT_PX = 300  # the logit lens's plot width on an 800-px page (its sidebar open), less the colour bar
LENS_SHOWN = 8  # positions the lens shows by default: the last ones, each cell wide enough to name its token


def _cut(token: str, chars: int) -> str:
    """A token shortened to `chars` characters ("Elizabeth" -> "Eliz…") where it would overflow its cell; whole on
    hover."""
    return token if len(token) <= chars else token[:max(1, chars - 1)] + "…"


def lens_heatmap(lens, *, target: bool = False, last: int | None = LENS_SHOWN) -> go.Figure:
    """The logit lens (attention.models.analyses.readout.LogitLens): a row per layer (0: the embeddings), a column
    per position (the `last` ones; None: every position the lens read); each cell coloured by the top token's
    probability (or, with `target`, the target's) and labelled with the top token where a cell is wide enough
    to read it at 800 px (cut to fit, whole on hover), else only on hover."""
    keep = slice(None) if last is None else slice(-last, None)
    probabilities = (lens.target_probability if target else lens.top_probability)[:, keep]
    top_p = lens.top_probability[:, keep]
    top_tokens = [row[keep] for row in lens.top_tokens]
    tokens, at = lens.tokens[keep], [int(i) for i in np.asarray(lens.positions)[keep]]  # positions in the text
    rows, cols = probabilities.shape
    chars = int((LENS_PLOT_PX / max(cols, 1) - 6) // 6)  # characters that fit a cell at 10 px
    shown = rows * cols <= 600 and chars >= 3
    fig = go.Figure(go.Heatmap(
        z=probabilities, x=at, y=list(range(rows)), zmin=0, zmax=1, colorscale="Blues",
        text=[[esc(_cut(t, chars)) for t in row] for row in top_tokens] if shown else None,
        customdata=[[[p, esc(t)] for p, t in zip(ps, ts, strict=True)] for ps, ts in zip(top_p, top_tokens,
                                                                                        strict=True)],
        texttemplate="%{text}" if shown else None, textfont=dict(size=10),
        hovertemplate="after layer %{y}, position %{x}<br>top token: %{customdata[1]} (p = %{customdata[0]:.3f})"
                      + ("<br>target: %{z:.3f}" if target else "") + "<extra></extra>",
        colorbar=dict(title=dict(text="p(target)" if target else "p(top token)"), thickness=12, xpad=4),
    ))
    fig.update_layout(height=min(1200, 120 + 24 * rows), margin=dict(l=10, r=10, t=20, b=10),
                      title=dict(text=""))
    fig.update_xaxes(title_text="position (the token read there)", tickmode="array", tickvals=at,
                     ticktext=[esc(t) for t in tokens], tickangle=-45)
    fig.update_yaxes(title_text="after layer (0 = embeddings)", autorange="reversed", tickmode="array",
                     tickvals=list(range(0, rows, max(1, rows // 16))))
    return fig


def comparison(cmp, *, clickable: bool = False, open_head: tuple[int, int] | None = None) -> go.Figure:
    """A HeadComparison (attention.models.compare_heads) as one cell per head of A: its distance from B (the
    same head, or on words its nearest, named on hover), in bits, to three significant digits. `open_head`
    (layer, head), 0-based, is outlined; `clickable` lays a point on every cell, so a click names its head
    (x the head, y the layer, from 1). Shapes: cmp.distance (L, H)."""
    d = np.asarray(cmp.distance, dtype=float)
    n_layers, n_heads = d.shape
    hover = "layer %{y} · head %{x}<br>JSD: %{z:.3g} bits"
    custom = None
    if cmp.words:
        custom = np.asarray(cmp.match) + 1
        hover += "<br>nearest in B: L%{customdata[0]}H%{customdata[1]}"
    top = max(float(np.nanmax(d)) if d.size else 0.0, 1e-12)
    fig = go.Figure(go.Heatmap(
        z=d, x=list(range(1, n_heads + 1)), y=list(range(1, n_layers + 1)), zmin=0.0, zmax=top, colorscale="Blues",
        customdata=custom, hovertemplate=hover + "<extra></extra>", xgap=1, ygap=1,
        colorbar=dict(title=dict(text="JSD (bits)", side="right"), thickness=12, exponentformat="e",
                      tickformat=".2~g" if top >= 0.01 else ".1e")))
    if clickable:  # the points are what the pointer meets: they carry the cell's hover too
        layers, heads = np.divmod(np.arange(n_layers * n_heads), n_heads)
        point = np.column_stack([d.ravel(), *(() if custom is None else (custom[..., 0].ravel(),
                                                                         custom[..., 1].ravel()))])
        said = "layer %{y} · head %{x}<br>JSD: %{customdata[0]:.3g} bits" + (
            "<br>nearest in B: L%{customdata[1]}H%{customdata[2]}" if cmp.words else "")
        fig.add_trace(go.Scatter(x=heads + 1, y=layers + 1, mode="markers", showlegend=False, name="heads",
                                 marker=dict(size=max(8, min(30, 600 // max(n_heads, n_layers))), opacity=0,
                                             symbol="square"), customdata=point,
                                 hovertemplate=said + "<br>click to open it below<extra></extra>"))
    if open_head is not None:
        fig.add_trace(go.Scatter(x=[open_head[1] + 1], y=[open_head[0] + 1], mode="markers", showlegend=False,
                                 name="open", hoverinfo="skip",
                                 marker=dict(size=max(10, min(34, 640 // max(n_heads, n_layers))), symbol="square-open",
                                             color="#d62728", line=dict(width=2))))
    fig.update_layout(title=dict(text="Distance from B, per head (the open head outlined)" if open_head is not None
                                 else "Distance from B, per head"),
                      height=min(1000, 150 + 22 * n_layers), margin=dict(l=10, r=10, t=50, b=10),
                      plot_bgcolor="white")
    fig.update_xaxes(title_text="head", tickmode="array", tickvals=list(range(1, n_heads + 1)), showgrid=False,
                     zeroline=False)
    fig.update_yaxes(title_text="layer", tickmode="array", tickvals=list(range(1, n_layers + 1)), showgrid=False,
                     zeroline=False, autorange="reversed")
    return fig


PAIR_KEY_LABELS = 6  # key labels per panel of `pair`: upright, 6 fit a third of an 800-px page (~80 px)


def pair(p) -> go.Figure:
    """A HeadPair (attention.models.head_pair) as one figure of three panels on the same query rows: A's head,
    B's, and B − A (blue: more weight in B, red: less). Hover names the query and key and the value."""
    d = p.difference
    n, m = d.matrix.shape
    top = max(float(np.nanmax(np.abs(d.matrix))) if d.matrix.size else 0.0, 1e-9)
    fig = make_subplots(rows=1, cols=3, shared_yaxes=True, horizontal_spacing=0.06,
                        subplot_titles=["A", "B", "B − A"])
    rows, cols = [esc(t) for t in d.row_labels], [esc(t) for t in d.col_labels]
    names = np.array([[f"{rows[i]} → {cols[j]}" for j in range(m)] for i in range(n)], dtype=object) \
        if n * m <= 65_536 else None  # "query → key" per cell, while the payload stays small
    for col, (view, axis) in enumerate(((p.a, "coloraxis"), (p.b, "coloraxis"), (d, "coloraxis2")), start=1):
        z = np.asarray(view.matrix, dtype=float)
        if view.mask is not None:
            z = np.where(view.mask, z, np.nan)
        fig.add_trace(go.Heatmap(
            z=z, x=list(range(m)), y=list(range(n)), coloraxis=axis, customdata=names, xgap=1 if m <= 60 else 0,
            ygap=1 if n <= 60 else 0, hoverongaps=False,
            hovertemplate=("%{customdata}" if names is not None else "query %{y} → key %{x}")
                          + f"<br>{esc(view.value_name)}: %{{z:.4f}}<extra></extra>"), row=1, col=col)
    fig.update_layout(
        title=dict(text=f"{head_name(p.layer, p.head)} of A beside {head_name(p.b_layer, p.b_head)} of B"),
        height=min(900, max(360, 170 + 20 * n)), margin=dict(l=10, r=10, t=70, b=10), plot_bgcolor="#d9d9d9",
        coloraxis=dict(colorscale="Blues", cmin=0.0, cmax=1.0,  # two colour bars stacked on the right
                       colorbar=dict(title=dict(text="weight"), x=1.01, y=1.0, yanchor="top", len=0.46, thickness=10)),
        coloraxis2=dict(colorscale=SIGNED.scale, cmin=-top, cmax=top, cmid=0.0,
                        colorbar=dict(title=dict(text="B − A"), x=1.01, y=0.0, yanchor="bottom", len=0.46,
                                      thickness=10)))
    # A third of the width each (~230 px at 800): key labels stand upright, at most PAIR_KEY_LABELS per panel, so
    # that neighbours never run into each other (every key is named on hover).
    step = -(-m // PAIR_KEY_LABELS)
    fig.update_xaxes(showgrid=False, tickmode="array", tickvals=list(range(0, m, step)), ticktext=cols[::step],
                     tickangle=-90, title_text="key")
    fig.update_yaxes(showgrid=False, autorange="reversed", tickmode="array" if n <= 40 else "auto",
                     tickvals=list(range(n)) if n <= 40 else None, ticktext=rows if n <= 40 else None)
    fig.update_yaxes(title_text="query", row=1, col=1)
    fig.update_annotations(font_size=13)
    return fig


def row_distance(p) -> go.Figure:
    """Each query row's JSD between A and B in one head pair (HeadPair.row_distance), in bits."""
    fig = go.Figure(go.Bar(x=list(range(len(p.labels))), y=p.row_distance, marker_color="#1f4e9c",
                           customdata=[esc(t) for t in p.labels],
                           hovertemplate="%{customdata}: %{y:.4f} bits<extra></extra>"))
    fig.update_layout(height=260, margin=dict(l=10, r=10, t=40, b=10),
                      title=dict(text="Each query row's distance (JSD, bits)"))
    shown = len(p.labels) <= 60
    fig.update_xaxes(tickmode="array", tickvals=list(range(len(p.labels))) if shown else None,
                     ticktext=[esc(t) for t in p.labels] if shown else None, title_text="query")
    fig.update_yaxes(title_text="JSD (bits)", rangemode="tozero", exponentformat="e")  # not "2µ": bits, not SI
    return fig


QK_PARTS = 6  # parts of each side "why this key" draws, the rest summed: 7 columns keep a cell's number (+1.23)
# legible in the chart's width at 800 px; with 11 columns the numbers shrank below 6 px


def qk_attribution_heatmap(found, tokens=None, *, parts: int = QK_PARTS, height: int | None = None) -> go.Figure:
    """Why this key (attention.models.qk_attribution): query parts (rows) x key parts (columns), the `parts`
    largest of each side, the rest summed into "other parts"; hover gives both parts and the value. `tokens`
    (the result's token labels, attention.models.shown_tokens) name the query and the key in the title;
    positions count from 0."""
    def named(position: int) -> str:
        return f"{position}" if tokens is None else f"{position} “{tokens[position]}”"

    shown = found.top_parts(parts)
    versus = {None: "", "mean": ", minus the mean over the keys it sees"}.get(
        found.against, f", minus key {named(found.against) if isinstance(found.against, int) else ''}")
    lines = (f"{head_name(found.layer, found.head)}: query {named(found.query)} × key {named(found.key)}{versus}",
             f"sum of the parts {found.total:+.3f}, the model's scaled score {found.score:+.3f}")
    # Each cell is a part of the score (its units), not a share; as tall as its rows need (in layer 1 only
    # the embeddings have written: one cell was drawn 560 px tall).
    fig = heatmap(shown.matrix, shown.key_parts, shown.query_parts, title=lines[0], x_title="key part",
                  y_title="query part", value_name="part of the scaled score",
                  colours=SIGNED, ticks=Ticks(x=parts + 1, y=parts + 1), show_values=True,
                  height=height or min(560, 240 + 40 * len(shown.query_parts)))
    # the colour bar's title beside it, not above: above, its width came out of the cells' at 800 px
    fig.update_traces(colorbar=dict(title=dict(side="right")), selector=dict(type="heatmap"))
    return fig.update_layout(title=dict(text="<br>".join(esc(line) for line in lines)), margin=dict(t=70))


def effects(result, *, title: str | None = None) -> go.Figure:
    """One number per head: a HeadEffects (ablation), a Patching over heads, or direct shares."""
    values = getattr(result, "effect", None)
    values = getattr(result, "heads", None) if values is None else values
    return layer_head_heatmap(values, title=title or getattr(result, "metric", "effect per head"), value_name="effect")
