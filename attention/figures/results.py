"""One call per view, from a result: grid(att), head(att, 2, 5), token(att, 6), lines(att, 2), statistic(att),
distance(att, 2, 5). Each reads the view it needs (attention.models: zoom, token_focus, line_view, survey) and
draws it with a builder of attention.figures.models. Layers and heads count from 0."""

from __future__ import annotations

import plotly.graph_objects as go

from attention.figures.base import Ticks
from attention.figures.models import attention_lines, head_grid, layer_head_heatmap, view_heatmap
from attention.figures.toy import line_chart
from attention.models import AS_IS, METRICS, Reading, line_view, survey, token_focus, zoom
from attention.naming import head_words

__all__ = ["distance", "grid", "head", "lines", "statistic", "token"]


def grid(att, *, title: str = "") -> go.Figure:
    """Every layer x head as one small tile (block maxima for long inputs); hover names each head's sink mass."""
    found = survey(att)
    return head_grid(found.tiles, title=title, hover_extra=found.sink_mass, hover_label="sink mass")


def head(att, layer: int, head: int = 0, *, how: str = "head", reading: Reading = AS_IS,
         hide_special: bool = False) -> go.Figure:
    """One head (0-based), or an aggregation of the layer (how: "mean", "max", "rollout", "norm")."""
    return view_heatmap(zoom(att, how, layer=layer, head=head, reading=reading, hide_special=hide_special))


def token(att, token: int, *, reading: Reading = AS_IS) -> go.Figure:
    """Where one token (a word, when reading words) looks in every layer and head."""
    view = token_focus(att, token, reading=reading)
    L, H = att.n_layers, att.n_heads
    return view_heatmap(view, x_title="key", y_title="layer · head", height=min(1400, max(320, 120 + 12 * L * H)),
                        ticks=Ticks(x=96, row_groups=H if L * H > 96 else None))


def lines(att, layer: int, heads=None, *, query: int | None = None, reading: Reading = AS_IS) -> go.Figure:
    """BertViz's head view: queries left, keys right, a line per pair whose opacity is the weight."""
    heads = range(att.n_heads) if heads is None else heads
    return attention_lines(line_view(att, layer, heads, query=query, reading=reading),
                           title=f"Layer {layer + 1}: line opacity = weight")


def statistic(att, metric: str = "entropy") -> go.Figure:
    """One Head atlas statistic per head (attention.models.forward.head_survey.METRICS)."""
    if metric not in METRICS:
        raise ValueError(f"unknown statistic {metric!r}; choose one of {', '.join(METRICS)}")
    found = survey(att)
    label = METRICS[metric][0]
    return layer_head_heatmap(getattr(found, metric), title=label, value_name=label, signed=False,
                              zmax=found.upper_bound(metric))


def distance(att, layer: int, head: int | None = None) -> go.Figure:
    """Attention by distance (query − key), one head and the mean of its layer."""
    profile = survey(att).distance_profile()
    curves = {f"layer {layer + 1}, mean of its heads": profile.of(layer)}
    if head is not None:
        curves = {head_words(layer, head): profile.of(layer, head), **curves}
    return line_chart(profile.labels, curves, title="Mean weight of a (query, key) pair by distance",
                      x_title="query − key (tokens)", y_title="mean weight (log scale)", log_y=True, categorical_x=True,
                      x_hover=profile.spans)
