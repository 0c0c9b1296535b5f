"""notebook_heatmap: a result (attend, from_attentions, load_npz) or any canvas payload as a NotebookHeatmap, the
chart a notebook shows, an exported page keeps and a code host shows as a picture (attention.figures.notebook says
how, and what it costs). The views are the Model heads page's: every head, one head (or the layer's aggregation),
one token in every head."""

from __future__ import annotations

import numpy as np

from attention.figures.base import SIGNED, WEIGHTS
from attention.figures.canvas import CanvasHeatmap, grid_canvas, matrix_canvas, view_canvas
from attention.figures.models import focus_meta
from attention.figures.notebook import NotebookHeatmap
from attention.models import AS_IS, ModelAttention, Reading, file_stem, shown_tokens, survey, token_focus, zoom

__all__ = ["notebook_heatmap"]


def notebook_heatmap(shown, layer: int | None = None, head: int | None = None, *,
                     token: int | None = None, how: str = "head", reading: Reading = AS_IS, hide_special: bool = False,
                     scale: int | None = None) -> NotebookHeatmap:
    """A chart for a notebook, as the Model heads page draws it. `shown` is a CanvasHeatmap (any of
    attention.figures' *_canvas builders), a 2-D array (a cache's pattern of one head, a table of effects: its
    rows and columns numbered from 0; figures.matrix_canvas names them) or a result (attend, from_attentions,
    load_npz); from a result:
    every layer x head by default, one head (or `how`: "mean", "max", "rollout", "norm" over the layer) with
    `layer`, or where one query token looks in every head with `token`. Layers, heads and tokens count from 0.
    Shapes: a result's weights (L, H, n, n) -> a grid of L x H tiles, an (n, n) matrix or an (L * H, n) one."""
    if isinstance(shown, CanvasHeatmap):
        return NotebookHeatmap(shown, scale)
    if getattr(shown, "ndim", None) == 2:  # a plain matrix (numpy, a torch tensor on the CPU): rows and columns from 0
        z = np.asarray(shown, dtype=np.float64)
        columns, rows = [str(c) for c in range(z.shape[1])], [str(r) for r in range(z.shape[0])]
        return NotebookHeatmap(matrix_canvas(z, columns, rows, x_title="column", y_title="row", value_name="value",
                                             colours=SIGNED if np.nanmin(z) < 0 else WEIGHTS), scale)
    if not isinstance(shown, ModelAttention):
        raise TypeError(f"notebook_heatmap draws a CanvasHeatmap, a 2-D array or a result (attend, from_attentions, "
                        f"load_npz), not {type(shown).__name__}")
    if head is not None and layer is None:
        raise ValueError(f"head {head} of which layer? Give both: notebook_heatmap(att, layer, {head})")
    att, units = shown, shown_tokens(shown)
    L, H = att.n_layers, att.n_heads
    if token is not None:
        view = token_focus(att, token, reading=reading)
        return NotebookHeatmap(view_canvas(view, x_title="key word" if reading.words else "key token",
                                           y_title="layer · head", height=min(1400, max(320, 120 + 12 * L * H)),
                                           row_groups=H if L * H > 96 else None,
                                           file_name=file_stem(att.model_name, "token", token),
                                           meta=focus_meta(token=units[token])), scale)
    if layer is not None:
        head = head or 0
        view = zoom(att, how, layer=layer, head=head, reading=reading, hide_special=hide_special)
        one = how == "head"  # one head, not an aggregation of the layer's
        stem = file_stem(att.model_name, f"layer-{layer + 1}", f"head-{head + 1}" if one else how)
        meta = focus_meta(layer=layer, head=head if one else None)
        return NotebookHeatmap(view_canvas(view, file_name=stem, meta=meta), scale)
    found = survey(att)
    return NotebookHeatmap(grid_canvas(found.tiles, title=f"Every head: {L} layers × {H} heads of {att.model_name}",
                                       hover_extra=found.sink_mass, hover_label="sink mass",
                                       layer_kinds=tuple(att.layer_kind(i) for i in range(L)), block=found.block,
                                       tokens=units, file_name=file_stem(att.model_name, "all-heads")), scale)
