"""Figures of a corpus survey (attention.models.corpus_survey): the page "A head across a corpus" and
notebooks draw the same ones, through attention.figures.

    corpus_map(found)                          every head a point: the medians of two statistics over the texts
    example_rows(found, layer, head)           the head's top examples, one row each (a table)
    qk_scatter(found, layer, head)             its sampled queries and keys in one 2-D projection
    corpus_statistic(found, layer, head, ...)  one statistic's distribution over the texts, and one text's value

Heads are named L3H7 on screen, counting from 1; arguments count from 0. Labels are escaped (esc).
"""

from __future__ import annotations

import functools

import numpy as np
import plotly.graph_objects as go

from attention.figures.base import BELOW, esc
from attention.models import METRICS, TYPE_THRESHOLD, CorpusSurvey, qk_projection
from attention.naming import head_name

LAYER_SCALE = "Viridis"
TYPES = {  # a head's type over the corpus -> colour: a median share over TYPE_THRESHOLD
    "previous-token": "#d62728", "sink": "#7f7f7f", "other": "#1f77b4",
}


def head_types(found: CorpusSurvey) -> np.ndarray:
    """(L, H) str: "previous-token" or "sink" when the head's median share there is over TYPE_THRESHOLD (the
    Head atlas's rule, over texts), else "other"."""
    types = np.full((found.n_layers, found.n_heads), "other", dtype=object)
    types[found.median("sink_mass") > TYPE_THRESHOLD] = "sink"
    types[found.median("previous") > TYPE_THRESHOLD] = "previous-token"
    return types.astype(str)


def corpus_map(found: CorpusSurvey, *, x: str = "mean_distance", y: str = "entropy", colour: str = "layer",
               selected: tuple[int, int] | None = None) -> go.Figure:
    """Every head as one point at the medians over the texts of statistics `x` and `y`, coloured by layer or
    by type; each point's customdata is (layer, head) from 0, so a click on it can open that head."""
    mx, my = found.median(x), found.median(y)  # (L, H)
    L, H = mx.shape
    layers, heads = np.divmod(np.arange(L * H), H)
    names = [head_name(layer, head) for layer, head in zip(layers, heads, strict=True)]
    hover = (f"%{{text}}<br>{esc(METRICS[x][0])}: %{{x:.3f}}<br>{esc(METRICS[y][0])}: "
             "%{y:.3f}<extra></extra>")
    fig = go.Figure()
    if colour == "layer":
        fig.add_trace(go.Scatter(x=mx.ravel(), y=my.ravel(), mode="markers", text=names, hovertemplate=hover,
                                 customdata=np.stack([layers, heads], 1), showlegend=False,
                                 marker=dict(size=9, color=layers + 1, colorscale=LAYER_SCALE, showscale=True,
                                             colorbar=dict(title="layer"), line=dict(width=0.5, color="white"))))
    else:
        types = head_types(found).ravel()
        for kind, hue in TYPES.items():
            at = np.flatnonzero(types == kind)
            if len(at):
                fig.add_trace(go.Scatter(x=mx.ravel()[at], y=my.ravel()[at], mode="markers", name=kind,
                                         text=[names[i] for i in at], hovertemplate=hover,
                                         customdata=np.stack([layers[at], heads[at]], 1),
                                         marker=dict(size=9, color=hue, line=dict(width=0.5, color="white"))))
    if selected is not None:
        layer, head = selected
        fig.add_trace(go.Scatter(x=[mx[layer, head]], y=[my[layer, head]], mode="markers", showlegend=False,
                                 hoverinfo="skip", marker=dict(size=18, color="rgba(0,0,0,0)",
                                                               line=dict(width=2.5, color="black"))))
    fig.update_layout(title=dict(text=f"Every head over {len(found.texts):,} texts: the median of each"),
                      height=460, margin=dict(l=10, r=10, t=50, b=10), legend=BELOW,
                      clickmode="event+select")
    fig.update_xaxes(title_text=esc(METRICS[x][0]))
    fig.update_yaxes(title_text=esc(METRICS[y][0]))
    return fig


CONTEXT_COLUMN = "in context («query», [key])"


def example_rows(found: CorpusSurvey, layer: int, head: int, k: int | None = None) -> list[dict]:
    """The head's top examples as table rows, largest weight first: the weight, the text around them as the
    tokenizer decodes it, the query in «» and the key in [ ] (one token may be both: «[ ]»), and the query and
    key tokens as every page labels them (a leading space as ␣)."""
    rows = []
    for rank, example in enumerate(found.top_examples(layer, head, k), start=1):
        pieces, q, j = found.context(example)
        line = "".join(_marked(piece, ("«" if i == q else "") + ("[" if i == j else ""),
                               ("]" if i == j else "") + ("»" if i == q else "")) for i, piece in enumerate(pieces))
        labels = found.labels(example.text_index)
        rows.append({"rank": rank, "weight": round(example.weight, 4), CONTEXT_COLUMN: line.strip(),
                     "query": labels[example.query], "key": labels[example.key], "text": example.text_index + 1})
    return rows


def _marked(piece: str, left: str, right: str) -> str:
    """A piece of context with marks around its token, inside the spaces around it: " «saddle»", "«[CLS]» "."""
    body = piece.strip(" ")
    before = piece[:len(piece) - len(piece.lstrip(" "))]
    return before + left + body + right + piece[len(before) + len(body):]


def qk_scatter(found: CorpusSurvey, layer: int, head: int, *, colour: str = "kind") -> go.Figure:
    """The head's sampled queries and keys in one projection (attention.models.qk_projection): two colours
    (colour="kind"), or both coloured by token position (colour="position"). Hover: the token in context."""
    p = qk_projection(found, layer, head)
    pieces = functools.lru_cache(maxsize=None)(found.pieces)  # each text's pieces once, not once a point
    labels = [_in_context(pieces(int(t)), int(pos)) for t, pos in zip(found.sample_text, found.sample_position,
                                                                      strict=True)]
    position = found.sample_position.astype(float)
    fig = go.Figure()
    for name, xy, symbol, hue in (("queries", p.queries, "circle", "#1f77b4"), ("keys", p.keys, "diamond", "#ff7f0e")):
        marker = dict(size=5, symbol=symbol, opacity=0.7, color=hue)
        if colour == "position":
            marker |= dict(color=position, colorscale="Viridis", showscale=name == "keys",
                           colorbar=dict(title="position"))
        fig.add_trace(go.Scattergl(x=xy[:, 0], y=xy[:, 1], mode="markers", name=name, text=labels, marker=marker,
                                   hovertemplate=f"{name[:-1]}: %{{text}}<extra></extra>"))
    fig.update_layout(title=dict(text=f"{head_name(layer, head)}: {len(labels):,} queries and their keys, "
                                      f"one projection (PCA {p.explained[0]:.0%} + {p.explained[1]:.0%})"),
                      height=520, margin=dict(l=10, r=10, t=50, b=10), legend=BELOW)
    fig.update_xaxes(title_text="component 1", zeroline=False)
    fig.update_yaxes(title_text="component 2", zeroline=False, scaleanchor="x")
    return fig


def corpus_statistic(found: CorpusSurvey, layer: int, head: int, name: str = "entropy", *,
                     current: float | None = None, current_label: str = "your sentence") -> go.Figure:
    """One head's statistic per text, as a box with every text a point (hover: the text), and `current`, the
    same statistic on another text (the page's sentence), as a line across."""
    values = found.statistics[name][:, layer, head]
    texts = [esc(_short(t)) for t in found.texts]
    fig = go.Figure(go.Box(y=values, name=head_name(layer, head), boxpoints="all", jitter=0.4, pointpos=0,
                           text=texts, marker=dict(size=4, opacity=0.6),
                           hovertemplate="%{y:.3f}: %{text}<extra></extra>"))
    if current is not None:
        fig.add_hline(y=current, line=dict(color="#d62728", dash="dash"),
                      annotation_text=esc(f"{current_label}: {current:.3f}"), annotation_position="top left")
    fig.update_layout(title=dict(text=f"{esc(METRICS[name][0])} of {head_name(layer, head)} over "
                                      f"{len(values):,} texts"),
                      height=380, margin=dict(l=10, r=10, t=50, b=10), showlegend=False)
    fig.update_yaxes(title_text=esc(METRICS[name][0]))
    return fig


def _in_context(pieces: tuple[str, ...], position: int, width: int = 4) -> str:
    line = "".join((*pieces[max(0, position - width):position], _marked(pieces[position], "«", "»"),
                    *pieces[position + 1:position + 1 + width]))
    return esc(line.strip())


def _short(text: str, size: int = 80) -> str:
    return text if len(text) <= size else text[:size - 1] + "…"
