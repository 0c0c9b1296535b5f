"""Attention Explorer: the frame. Process settings, page config, navigation over pages/, nothing else.

Run with `make run` (or `attention-explorer`, see serving.py). Each page is a thin file in pages/ that
reads its widgets, calls one function of the `attention` package and draws the result.
"""

import streamlit as st

import serving

serving.configure_process()  # torch threads and malloc settings, once per server process
st.set_page_config(page_title="Attention Explorer", page_icon=":material/visibility:", layout="wide")

# Sections of the sidebar. The home page lists the same pages with a line each.
PAGES = {
    "Start": [
        st.Page("pages/home.py", title="Home", icon=":material/home:", default=True),
    ],
    "Toy examples": [
        st.Page("pages/lookup.py", title="Lookup: hard vs soft", icon=":material/search:"),
        st.Page("pages/self_attention.py", title="Step by step: self-attention", icon=":material/stairs:"),
        st.Page("pages/scaling.py", title="Why scale by √d_k", icon=":material/straighten:"),
        st.Page("pages/scoring.py", title="Scoring functions", icon=":material/functions:"),
        st.Page("pages/multihead.py", title="Multi-head, masks, cross-attention", icon=":material/view_column:"),
        st.Page("pages/toy_ambiguity.py", title="Ambiguity in a toy model", icon=":material/alt_route:"),
        st.Page("pages/positions.py", title="Word order and positions", icon=":material/format_list_numbered:"),
        st.Page("pages/bottleneck.py", title="The bottleneck, and attention", icon=":material/compress:"),
    ],
    "Pretrained models": [
        st.Page("pages/model_heads.py", title="Model heads", icon=":material/grid_view:"),
        st.Page("pages/inside_head.py", title="Inside one head", icon=":material/calculate:"),
        st.Page("pages/ambiguous_words.py", title="Ambiguous words", icon=":material/compare_arrows:"),
        st.Page("pages/head_atlas.py", title="Head atlas", icon=":material/map:"),
        st.Page("pages/predictions.py", title="Predictions and head effects", icon=":material/target:"),
    ],
}

st.navigation(PAGES, expanded=True).run()  # every page listed: a collapsed list hid the model pages
