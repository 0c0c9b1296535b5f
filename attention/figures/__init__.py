"""Every figure the app draws, for pages and notebooks alike: this front is the one place to import them from.

A *view* (attention.models: `zoom`, `token_focus`, a MatrixView) is the numbers a chart shows; a *figure* is
the picture this package draws from them. (BertViz's `head_view` and `model_view` keep BertViz's names.)

    base.py     the labelled heatmap, its colours (Colours, WEIGHTS, SIGNED), ticks, escaping: esc, heatmap
    toy.py      the toy side's charts: weights_bar, reveal_bars, line_chart, vector_plane, sense_plane, trace_steps,
                heatmap_panels
    canvas.py   heatmaps as canvas payloads from binary arrays: grid_canvas, view_canvas, matrix_canvas,
                layer_head_canvas
    census.py   the head census's map: census_canvas (each head's published score, its threshold boxed)
    models.py   a real model's builders, from arrays and views: view_heatmap, head_grid, attention_lines,
                layer_head_heatmap, lens_heatmap, and the figures of analyses (effects, comparison, pair)
    results.py  one call per view from a result (below): grid, head, token, lines, statistic, distance
    classroom.py the teacher's view of a class: class_answers (one question's answers, the right one marked)
    bertviz.py  BertViz's head_view and model_view, with its argument names
    corpus.py   a corpus survey's four: corpus_map, example_rows, qk_scatter, corpus_statistic
    batch.py    analyses over a batch of prompt pairs: m_rows, prompt_strip, attribution_canvas, head_rows,
                parts_gap, patching_canvas, patching_rows, counted_prompts
    images.py   an image model's three, over its picture: picture, heads_over_image, norms_chart
    notebook.py a canvas heatmap for notebooks and files: NotebookHeatmap, shown as HTML (heatmap.js inline) with a
                PNG beside it; to_html(path), to_png(path)
    notebook_results.py  notebook_heatmap: a result (every head, one head, one token) or a payload -> NotebookHeatmap
    png.py      a canvas heatmap as a PNG drawn in Python (Pillow): heatmap_png
    svg.py      the same picture as SVG, written in Python: heatmap_svg
    paper.py    write_figure(figure, "x.svg" | "x.pdf" | "x.png"): any builder's output as a file for a paper

From a result (`attend(load_model(...), text)`, `from_attentions(...)` on any model's output_attentions, or
`load_npz(...)`):

    grid(att)                         every layer x head, one tile each (the Model heads page)
    head(att, layer, head)            one head (or an aggregation) as a heatmap, with a Reading
    token(att, token)                 where one token looks, in every head
    lines(att, layer, heads)          BertViz's head view: a line per (query, key)
    statistic(att, "entropy")         one Head atlas statistic per head
    distance(att, layer, head)        attention by distance
    effects(head_effects)             one number per head (ablation, patching, direct shares)
    qk_attribution_heatmap(found)     why this key: a score's (query part x key part) pairs
    comparison(cmp)                   two models or precisions: how far each head moved (compare_heads)
    pair(head_pair(...))              one head of A beside B's, and B − A, in three panels
    head_view(...), model_view(...)   BertViz's two functions, with its argument names: change the import
    notebook_heatmap(att, layer, head) the app's canvas heatmap in a notebook: tens of kB where head_view's page
                                      is 4.9 MB; it renders in an exported page and (as a PNG) on a code host

The toy side's names, base.py's, canvas.py's and models.py's builders load with this front (numpy and Plotly: a
toy page starts without torch); the others (results, bertviz, corpus, images, notebook_results; notebook and png)
load their module, and with it torch (or only Pillow), when first used.
"""

from __future__ import annotations

import importlib

from attention.figures.base import (
    AUTO_TICKS,
    CLICKABLE_CELLS,
    GRID_SCALE,
    LOG_FLOOR,
    SIGNED,
    WEIGHT_SCALE,
    WEIGHTS,
    Colours,
    Ticks,
    esc,
    heatmap,
    image_config,
)
from attention.figures.batch import (
    attribution_canvas,
    counted_prompts,
    head_rows,
    m_rows,
    parts_gap,
    patching_canvas,
    patching_rows,
    prompt_strip,
)
from attention.figures.canvas import CanvasHeatmap, grid_canvas, layer_head_canvas, matrix_canvas, view_canvas
from attention.figures.canvas import source as canvas_source
from attention.figures.census import census_canvas
from attention.figures.classroom import class_answers
from attention.figures.models import (
    HEAD_COLOURS,
    LENS_SHOWN,
    attention_lines,
    comparison,
    effects,
    focus_meta,
    head_grid,
    layer_head_heatmap,
    lens_heatmap,
    named,
    pair,
    qk_attribution_heatmap,
    row_distance,
    view_heatmap,
    window_edge,
)
from attention.figures.toy import (
    heatmap_panels,
    line_chart,
    reveal_bars,
    sense_plane,
    trace_steps,
    vector_plane,
    weights_bar,
)
from attention.naming import head_name, head_words

_LATER = {  # name -> the module that holds it, imported on first use (it imports torch, attention.models, or Pillow)
    **dict.fromkeys(("distance", "grid", "head", "lines", "statistic", "token"), "attention.figures.results"),
    **dict.fromkeys(("head_view", "model_view", "ViewHTML"), "attention.figures.bertviz"),
    **dict.fromkeys(("CONTEXT_COLUMN", "corpus_map", "corpus_statistic", "example_rows", "head_types", "qk_scatter"),
                    "attention.figures.corpus"),
    **dict.fromkeys(("heads_over_image", "image_uri", "norms_chart", "picture"), "attention.figures.images"),
    "NotebookHeatmap": "attention.figures.notebook",
    "notebook_heatmap": "attention.figures.notebook_results",
    "heatmap_png": "attention.figures.png",
    "heatmap_svg": "attention.figures.svg",
    **dict.fromkeys(("FigureExportError", "write_figure"), "attention.figures.paper"),
}

__all__ = ["AUTO_TICKS", "CLICKABLE_CELLS", "GRID_SCALE", "LOG_FLOOR", "SIGNED", "WEIGHT_SCALE", "WEIGHTS", "Colours",
           "Ticks", "class_answers",
           "esc", "heatmap", "image_config", "CanvasHeatmap", "canvas_source", "grid_canvas", "layer_head_canvas",
           "matrix_canvas", "view_canvas", "census_canvas",
           "head_name", "head_words",
           "HEAD_COLOURS", "attention_lines", "comparison", "effects", "focus_meta", "head_grid", "layer_head_heatmap",
           "LENS_SHOWN", "lens_heatmap", "named", "pair", "qk_attribution_heatmap", "row_distance", "view_heatmap",
           "window_edge",
           "attribution_canvas", "counted_prompts", "head_rows", "m_rows", "parts_gap", "patching_canvas",
           "patching_rows", "prompt_strip",
           "heatmap_panels", "line_chart", "reveal_bars", "sense_plane", "trace_steps", "vector_plane", "weights_bar",
           *_LATER]


def __getattr__(name: str):
    """A model, corpus or image figure: its module is imported now (PEP 562), then the name is kept here."""
    if name not in _LATER:
        raise AttributeError(f"module 'attention.figures' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LATER[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
