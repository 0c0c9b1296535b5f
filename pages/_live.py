"""Live controls: Streamlit components (st.components.v2) that redraw while a slider moves.

Their JavaScript and CSS live in pages/components/, one file each; the numbers they draw come from
attention/live.py (the browser only looks them up). On release they hand the value back, and the page's
ordinary widgets (bound to the URL, settable from AppTest) take it.
"""

from pathlib import Path

import streamlit as st

COMPONENTS = Path(__file__).with_name("components")

_live_lookup = st.components.v2.component(
    "attention_explorer_live_lookup",
    css=(COMPONENTS / "live_lookup.css").read_text(encoding="utf-8"),
    js=(COMPONENTS / "live_lookup.js").read_text(encoding="utf-8"),
)


def live_lookup(data: dict, *, key: str, on_query: callable, on_pair: callable):
    """Mount the live lookup (attention.live.lookup_payload builds `data`). on_query() runs when a drag
    ends, on_pair() when another plane is chosen; both read st.session_state[key]."""
    return _live_lookup(key=key, data=data, default={"query_steps": data["query_steps"], "plane_pair": 0},
                        on_query_steps_change=on_query, on_plane_pair_change=on_pair, height="content")
