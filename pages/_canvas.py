"""Heatmaps on one canvas (attention.figures.canvas, drawn by its heatmap.js) mounted as a Streamlit component.

The component is registered once, here; `canvas_heatmap` mounts one chart. Its payload is raw bytes (colour
indices and float32 values beside a JSON header), not Plotly JSON: three Plotly heatmaps were most of the
Model heads page's time in the browser (benchmarks/NOTES.md).
"""

from collections.abc import Callable

import streamlit as st

from attention.figures import CanvasHeatmap, canvas_source

# In the page's own DOM (not a shadow root): tests and benchmarks find the canvas with document.querySelector;
# heatmap.css's names all start with "aeh-".
_heatmap = st.components.v2.component("attention_explorer_heatmap", css=canvas_source("css"), js=canvas_source("js"),
                                      isolate_styles=False)


def canvas_heatmap(payload: CanvasHeatmap, *, key: str, on_click: Callable[[], None] | None = None) -> None:
    """Draw `payload` (keyed `key`); on_click() runs when a cell or tile is clicked (or opened with Enter),
    with the report in st.session_state[key]["click"]: {"row", "col"} in cells, and "tile": [layer, head]
    from 0 on a grid of tiles."""
    clicks = {} if on_click is None else {"on_click_change": on_click}  # a chart that opens nothing sends none
    _heatmap(key=key, data=payload.to_bytes(), height="content", **clicks)


def clicked(key: str) -> dict | None:
    """The last click's report on the chart keyed `key` (inside its on_click), or None."""
    state = st.session_state.get(key)
    return None if state is None else state.get("click")
