"""The visit's focus in a Streamlit session: the one module that reads it, changes it and writes it to the URL.

What a visit looks at (the model, the sentence, a layer and head, a token, the reading switches, a target and
a foil: attention.focus.Focus) is one value kept here. Pages read it with `current()` (a model page with
`on_page()`, which also writes it into the URL, then `shown()` once it is fitted to the page's result) and
change it with `update()` in a callback or before switching page. Its widgets are drawn "controlled": before
a run draws one, `show(key, value)` sets it to what the focus holds, and its on_change sets the focus
(`on_change(key, setter)`). So a widget never shows a stale value: a sentence typed on one page, a tile
clicked, a question answered or a link opened all change the focus, and every widget follows it. Widget
keys are namespaced by the page or picker that draws them ("heads.layer"): no two pages share a widget's
state, and two pickers can stand on one page.

Streamlit drops a widget's state when its page is left; the focus stays, in the session. A URL with focus
parameters this session did not write (a link opened, the browser's Back) replaces it.
"""

import functools
from collections.abc import Callable

import streamlit as st

from attention.focus import PARAMS, Focus
from pages._text import md

FOCUS_KEY = "visit.focus"  # session key: the Focus (tests read it there)
_WRITTEN = "visit.url"  # session key: the focus parameters this session last wrote into the URL
_NOTES = "visit.notes"  # session key: what was changed to fit the focus, said once on the next page drawn


def current() -> Focus:
    """The focus: the one a URL names when this session did not write it (a link was opened), else the
    session's."""
    session = st.session_state.get(FOCUS_KEY)
    url = {name: st.query_params[name] for name in PARAMS if name in st.query_params}
    if url and url != st.session_state.get(_WRITTEN):
        focus, notes = Focus.from_params(url, session)
        st.session_state[_WRITTEN] = url
        _keep(focus, notes)
        return focus
    return session if session is not None else Focus()


def update(**changes) -> Focus:
    """Change some fields of the focus (Focus.replace); for a callback, a button, or before a page switch."""
    focus = current().replace(**changes)
    st.session_state[FOCUS_KEY] = focus
    return focus


def put(focus: Focus, notes: tuple[str, ...] = ()) -> Focus:
    """Make `focus` the focus, with notes on what was changed to make it fit (said where the page shows them)."""
    _keep(focus, notes)
    return focus


def _keep(focus: Focus, notes) -> None:
    st.session_state[FOCUS_KEY] = focus
    if notes:
        st.session_state[_NOTES] = (*st.session_state.get(_NOTES, ()), *notes)


def on_page() -> Focus:
    """The focus, as a model page starts to draw it: kept and written into the URL at once, so that a page that
    stops early (a text it cannot read) still has the link to what it was asked to show."""
    focus = current()
    _publish(focus)
    return focus


def shown(focus: Focus) -> None:
    """A model page has fitted `focus` to what it shows: keep it, write it into the URL (a link to this page
    reopens it), and say in a line each what was changed to make it fit this model and text."""
    _publish(focus)
    for note in st.session_state.pop(_NOTES, ()):
        st.caption(f":material/info: {md(note)}")  # notes name the user's tokens: escaped


def _publish(focus: Focus) -> None:
    st.session_state[FOCUS_KEY] = focus
    params = focus.to_params()
    for name in PARAMS:
        if name not in params and name in st.query_params:
            del st.query_params[name]  # rare (a field back to its default): one message each
    changed = {name: value for name, value in params.items() if st.query_params.get(name) != value}
    if changed:  # one message to the browser, one history entry, however many fields changed
        st.query_params.update(changed)
    st.session_state[_WRITTEN] = params


def following(focus: Focus, layer: int, head: int) -> Focus:
    """Where a view follows a ranked result: its top head (layer, head, from 0) becomes the focus's head unless
    the visitor picked one (Focus.following), kept and written into the URL like any head shown. Returns it."""
    followed = focus.following(layer, head)
    if followed != focus:
        _publish(followed)
    return followed


def show(key: str, value) -> str:
    """Before the widget keyed `key` is drawn: set it to `value`, what the focus holds. Returns the key.

    Set on every run, not only when the value differs: a widget a run did not draw (the page stopped above it)
    is drawn again by the browser from its default, while its state here still held the focus's value, so a
    value set only "when changed" left the control showing layer 1 over a chart of layer 3 (issue 59). A value
    set this run is sent to the browser with the widget."""
    st.session_state[key] = value
    return key



def on_change(key: str, setter: Callable[[Focus, object], Focus]) -> Callable[[], None]:
    """A widget's on_change: `setter(focus, the widget's new value)` becomes the focus. `setter` is a module
    function or a partial, not a lambda written in a page (pages/_labels.py says why)."""
    return functools.partial(_from_widget, key, setter)


def _from_widget(key: str, setter) -> None:
    _keep(setter(current(), st.session_state[key]), ())


def setting(field: str) -> Callable[[Focus, object], Focus]:
    """A setter that puts the widget's value in one field of the focus."""
    return functools.partial(_set_field, field)


def _set_field(field: str, focus: Focus, value) -> Focus:
    return focus.replace(**{field: value})


def changing(**changes) -> Callable[[], None]:
    """An on_click that changes these fields of the focus."""
    return functools.partial(update, **changes)


def switch_to(page: str) -> None:
    """Open another page in this tab. Its URL starts empty and it reads the focus from the session. (A plain
    st.switch_page keeps this page's query parameters, which name this page's widgets.)"""
    st.switch_page(page, query_params={})
