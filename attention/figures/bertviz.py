"""BertViz's calls, answered here: head_view and model_view take BertViz's arguments (a model's own
output_attentions and its tokens) and draw this package's figures; html_action="return" gives a ViewHTML as
BertViz's does. A notebook that imported them from bertviz works with one changed import."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from attention.figures.models import head_grid
from attention.figures.results import lines
from attention.models import from_attentions, survey

__all__ = ["ViewHTML", "head_view", "model_view"]


@dataclass(frozen=True)
class ViewHTML:
    """What html_action="return" gives, as BertViz's does: `.data` is the page (self-contained: plotly.js
    inline, no script from the network); a notebook shows it."""

    data: str

    def _repr_html_(self) -> str:
        return self.data


def _given(attention, tokens, encoder_attention, decoder_attention, cross_attention, encoder_tokens,
           decoder_tokens, prettify_tokens: bool):
    if attention is not None:
        if tokens is None:
            raise ValueError("tokens are needed with attention")
        return from_attentions(tokens, attention, prettify=prettify_tokens)
    if encoder_attention is None or encoder_tokens is None:
        raise ValueError("give attention and tokens, or encoder_attention and encoder_tokens")
    return from_attentions(encoder_tokens, encoder_attention, decoder_tokens=decoder_tokens,
                           decoder_attentions=decoder_attention, cross_attentions=cross_attention,
                           prettify=prettify_tokens)


def _shown(fig: go.Figure, html_action: str):
    if html_action == "return":
        return ViewHTML(fig.to_html(include_plotlyjs=True, full_html=True))
    if html_action != "view":
        raise ValueError(f"html_action must be 'view' or 'return', not {html_action!r}")
    return fig


def head_view(attention=None, tokens=None, sentence_b_start=None, prettify_tokens=True, layer=None, heads=None,
              encoder_attention=None, decoder_attention=None, cross_attention=None, encoder_tokens=None,
              decoder_tokens=None, include_layers=None, html_action="view"):
    """BertViz's head_view, same arguments: the lines of one layer's heads (default: the first layer in
    include_layers, and every head). Returns the figure (a notebook shows it), or with html_action="return"
    a ViewHTML. sentence_b_start is accepted and does not change the picture: every token is drawn."""
    att = _given(attention, tokens, encoder_attention, decoder_attention, cross_attention, encoder_tokens,
                 decoder_tokens, prettify_tokens)
    layer = (include_layers or [0])[0] if layer is None else layer
    return _shown(lines(att, layer, heads), html_action)


def model_view(attention=None, tokens=None, sentence_b_start=None, prettify_tokens=True, display_mode="dark",
               encoder_attention=None, decoder_attention=None, cross_attention=None, encoder_tokens=None,
               decoder_tokens=None, include_layers=None, include_heads=None, html_action="view"):
    """BertViz's model_view, same arguments: every layer x head as one tile of one figure (include_layers and
    include_heads pick some, numbered from 1 within the pick). Returns the figure, or with
    html_action="return" a ViewHTML. display_mode is accepted; the figure keeps the app's colours."""
    att = _given(attention, tokens, encoder_attention, decoder_attention, cross_attention, encoder_tokens,
                 decoder_tokens, prettify_tokens)
    found = survey(att)
    layers = list(include_layers) if include_layers is not None else list(range(att.n_layers))
    heads = list(include_heads) if include_heads is not None else list(range(att.n_heads))
    tiles = found.tiles[np.ix_(layers, heads)]
    return _shown(head_grid(tiles, hover_extra=found.sink_mass[np.ix_(layers, heads)], hover_label="sink mass"),
                  html_action)
