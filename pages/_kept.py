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


# --- controls kept in the link, and beyond it for the session ------------------------------------------------------
# A toy page's controls are bound to its URL (bind="query-params"): a link reopens them. But the sidebar opens a
# page with an empty URL, and Streamlit drops a widget's state when its page is left: coming back to the lookup
# through the sidebar reset its sliders (issue 68). `linked(key)` marks such a control; `carry_linked()`, first
# thing in every run, copies the marked controls' values aside while Streamlit still holds them (it drops a left
# page's widgets at the end of the next run, not before), and `linked` gives a control its kept value back when
# its page is drawn again without that setting in the URL. A link's own settings always win.
LINKED_KEYS = "page.linked_keys"  # session key: the keys of the controls `linked` marked
LINKED = "page.linked"  # session key: {key: the control's last value}


def linked(key: str) -> str:
    """A control's key, marked as kept for the session; before the control is drawn, its kept value is put back
    when neither this run nor the link sets it. Returns the key (`st.slider(..., key=linked("scaling.keys"))`)."""
    st.session_state.setdefault(LINKED_KEYS, set()).add(key)
    kept_values = st.session_state.get(LINKED, {})
    if key not in st.session_state and key not in st.query_params and key in kept_values:
        st.session_state[key] = kept_values[key]
    return key


def carry_linked() -> None:
    """app.py's first call each run: every marked control's current value, kept."""
    keys = st.session_state.get(LINKED_KEYS)
    if keys:
        values = st.session_state.setdefault(LINKED, {})
        values.update({key: st.session_state[key] for key in keys if key in st.session_state})
