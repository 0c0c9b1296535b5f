"""Streamlit's chart and table code fetched ahead, while the browser is idle.

Streamlit's browser code loads the code of a Plotly chart (4.7 MB) and of a dataframe (1.2 MB with its Arrow
formatting) the first time a page of the session draws one. Model heads draws neither since its heatmaps became
canvases, so the next page a learner opens (Inside one head, step 8 of the path) paid for both: 2.5-3.2 s
against 0.3-0.5 s on a second visit (benchmarks/NOTES.md). The app's frame mounts `prefetch_charts()` in the
sidebar on every run; its JS imports those modules once a session, when the browser is idle, and Streamlit's
own import of the same files later finds them loaded. The files are found by name in Streamlit's static folder:
if a later Streamlit renames them, nothing is fetched and nothing else changes.
"""

from functools import cache
from pathlib import Path

import streamlit as st

from pages._live import COMPONENTS

STATIC_JS = Path(st.__file__).parent / "static" / "static" / "js"
CHUNKS = ("PlotlyChart.*.js", "DataFrame.*.js")  # Streamlit's lazily loaded modules for st.plotly_chart, st.dataframe

_prefetch = st.components.v2.component("attention_explorer_prefetch",
                                       js=(COMPONENTS / "prefetch.js").read_text(encoding="utf-8"))


@cache
def chunk_urls() -> tuple[str, ...]:
    """The modules' URLs relative to the app's root ("./static/js/PlotlyChart.D9Z0_fxz.js")."""
    return tuple(f"./static/js/{p.name}" for pattern in CHUNKS for p in sorted(STATIC_JS.glob(pattern)))


def prefetch_charts() -> None:
    """Mount the prefetch (nothing drawn) in the sidebar: it runs once a browser session."""
    urls = chunk_urls()
    if urls:
        with st.sidebar:
            _prefetch(key="prefetch", data={"urls": list(urls)}, height="content")
