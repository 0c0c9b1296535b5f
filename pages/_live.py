"""Live controls: Streamlit components (st.components.v2) that redraw while a slider moves.

Their JavaScript and CSS live in pages/components/, one file each; the numbers they draw come from
attention/toy/live.py (the browser only looks them up). On release they hand the value back, and the page's
ordinary widgets (bound to the URL, settable from AppTest) take it.
"""

import functools
from collections.abc import Callable
from pathlib import Path

import streamlit as st

from attention.toy.live import Panel, Slider, sweep_payload

COMPONENTS = Path(__file__).with_name("components")


def component_source(name: str, kind: str) -> str:
    """A component's CSS or JS (kind "css" or "js"): pages/components/common.<kind>, then <name>.<kind>."""
    return "\n".join((COMPONENTS / f"{stem}.{kind}").read_text(encoding="utf-8") for stem in ("common", name))


_live_lookup = st.components.v2.component(
    "attention_explorer_live_lookup", css=component_source("live_lookup", "css"),
    js=component_source("live_lookup", "js"),
)


def live_lookup(data: dict, *, key: str, on_query: Callable[[], None], on_pair: Callable[[], None]):
    """Mount the live lookup (attention.toy.live.lookup_payload builds `data`). on_query() runs when a drag
    ends, on_pair() when another plane is chosen; both read st.session_state[key]."""
    return _live_lookup(key=key, data=data, default={"query_steps": data["query_steps"], "plane_pair": 0},
                        on_query_steps_change=on_query, on_plane_pair_change=on_pair, height="content")


_live_sweep = st.components.v2.component(
    "attention_explorer_live_sweep", css=component_source("live_sweep", "css"),
    js=component_source("live_sweep", "js"),
)


def live_sliders(sliders: list[Slider], panels: list[Panel], *, key: str) -> None:
    """Sliders that redraw `panels` on every frame of a drag (attention.toy.live.sweep_payload), mounted as
    `<key>.live`; when a slider is let go, its value goes to its widget (Slider.widget), and the page runs
    again from there."""
    live_key = f"{key}.live"
    data = sweep_payload(sliders, panels, key=key)
    _live_sweep(key=live_key, data=data, default={"indices": [s["index"] for s in data["sliders"]]},
                on_indices_change=functools.partial(_release, live_key, tuple(sliders)), height="content")


def _release(live_key: str, sliders: tuple[Slider, ...]) -> None:
    """on_indices_change (a partial, not a page lambda: pages/_labels.py says why): each slider's released
    step becomes its widget's value."""
    indices = st.session_state[live_key]["indices"]
    for s, index in zip(sliders, indices, strict=True):
        st.session_state[s.widget] = s.value_at(index)
