"""Live controls: Streamlit components (st.components.v2) that redraw while a slider moves.

Their JavaScript and CSS live in pages/components/, one file each; the numbers they draw come from
attention/live.py (the browser only looks them up). On release they hand the value back, and the page's
ordinary widgets (bound to the URL, settable from AppTest) take it.
"""

import functools
from collections.abc import Callable
from pathlib import Path

import streamlit as st

COMPONENTS = Path(__file__).with_name("components")



def component_source(name: str, kind: str) -> str:
    """A component's CSS or JS (kind "css" or "js"): pages/components/common.<kind>, then <name>.<kind>."""
    return "\n".join((COMPONENTS / f"{stem}.{kind}").read_text(encoding="utf-8") for stem in ("common", name))


_live_lookup = st.components.v2.component(
    "attention_explorer_live_lookup", css=component_source("live_lookup", "css"),
    js=component_source("live_lookup", "js"),
)


def live_lookup(data: dict, *, key: str, on_query: callable, on_pair: callable):
    """Mount the live lookup (attention.live.lookup_payload builds `data`). on_query() runs when a drag
    ends, on_pair() when another plane is chosen; both read st.session_state[key]."""
    return _live_lookup(key=key, data=data, default={"query_steps": data["query_steps"], "plane_pair": 0},
                        on_query_steps_change=on_query, on_plane_pair_change=on_pair, height="content")


_live_sweep = st.components.v2.component(
    "attention_explorer_live_sweep", css=component_source("live_sweep", "css"),
    js=component_source("live_sweep", "js"),
)


def live_sweep(data: dict, *, key: str, on_release: callable):
    """Mount a live sweep (attention.live.sweep_payload builds `data`); on_release() runs when a slider is
    let go and reads the step indices from st.session_state[key]["indices"]."""
    return _live_sweep(key=key, data=data, default={"indices": [s["index"] for s in data["sliders"]]},
                       on_indices_change=on_release, height="content")


def release_to(live_key: str, widget_keys: tuple[str, ...], values: tuple[tuple, ...]) -> Callable[[], None]:
    """on_release for a live sweep: slider f's released step becomes widget_keys[f]'s value, read from
    values[f] (numbers of the widget's own type: int for an integer input)."""
    return functools.partial(_release, live_key, widget_keys, values)


def _release(live_key: str, widget_keys: tuple[str, ...], values: tuple[tuple, ...]) -> None:
    indices = st.session_state[live_key]["indices"]
    for key, index, steps in zip(widget_keys, indices, values, strict=True):
        st.session_state[key] = steps[int(index)]
