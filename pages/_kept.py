"""A page's own choices that are not the visit's focus, kept for the session (a widget's state is not).

The image page picks an image model, an image, a layer, a head and a patch: none of them means anything to
the text pages, so they are not in the focus (attention.focus.Focus), but they must hold when the visitor
leaves the page and comes back. Streamlit drops a widget's state when its page is left; these values stay.
Widgets are drawn controlled, as the focus's are (pages/_focus.py): `drawn(key, name, default)` sets the
widget to the kept value before it is drawn, and `keeping(key, name)` is its on_change.
"""

import functools
from collections.abc import Callable

import streamlit as st

from pages._focus import show

KEPT = "page.kept"  # session key: {name: value}


def kept(name: str, default=None):
    """The value kept under `name`, or `default`."""
    return st.session_state.get(KEPT, {}).get(name, default)


def keep(name: str, value) -> None:
    """Keep `value` under `name` (a click, a button)."""
    st.session_state[KEPT] = {**st.session_state.get(KEPT, {}), name: value}


def drawn(key: str, name: str, default) -> str:
    """Before the widget keyed `key` is drawn: set it to the value kept under `name` (or `default`)."""
    return show(key, kept(name, default))


def keeping(key: str, name: str) -> Callable[[], None]:
    """A widget's on_change: its new value is kept under `name`."""
    return functools.partial(_from_widget, key, name)


def _from_widget(key: str, name: str) -> None:
    keep(name, st.session_state[key])
