"""A part of a page that a widget reruns alone: a keyed st.fragment (issue 69, the everyday loop).

A new sentence on Model heads changes the grid, the zoom and the token followed, not the title, the sentence box,
the model picker, the questions or the reading switches. Rerunning the whole page sent all ~70 of its elements
again, and the browser drew each anew (React and its styles were most of the loop's time: benchmarks/NOTES.md).
The sentence box's on_change now reruns only the part keyed here (`st.rerun(key)` from a callback).

A part runs with the arguments of the last whole run; what the widget changed it reads afresh itself (`own_rerun`
says when). Where what is above it would no longer hold for the new input (a question it now gives away, a note
about a text cut short), the part asks for the whole page (`st.rerun(scope="app")`).
"""

from collections.abc import Callable

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

DRAWN = "partial.drawn"  # session key: the parts the last whole run of the page drew
# streamlit.testing's session: AppTest starts each run with an empty tree, so after a part reran alone its tree held
# that part's elements only. Under AppTest a widget reruns the whole page; the browser tests run the parts alone.
APPTEST_SESSION = "test session id"


def page_starts() -> None:
    """app.py, before a whole run of a page: no part drawn yet (a page that stops early draws none)."""
    st.session_state[DRAWN] = set()


def part(key: str) -> Callable[[Callable], Callable]:
    """@part(key): the function is a fragment a widget can rerun alone by `key` (`rerun_part`)."""

    def wrap(func: Callable) -> Callable:
        def drawn(*args, **kwargs):
            st.session_state.setdefault(DRAWN, set()).add(key)
            return func(*args, **kwargs)

        drawn.__name__, drawn.__qualname__, drawn.__doc__ = func.__name__, func.__qualname__, func.__doc__
        return st.fragment(key=key)(drawn)

    return wrap


def rerun_part(key: str | None) -> None:
    """In a widget's callback, after it kept the new value: rerun the part `key` alone where the page drew it
    (else, or with key None, the whole page reruns, Streamlit's default)."""
    ctx = get_script_run_ctx()
    if key is not None and key in st.session_state.get(DRAWN, ()) and ctx and ctx.session_id != APPTEST_SESSION:
        st.rerun(key)


def own_rerun() -> bool:
    """Whether this run is a part's rerun alone (the page above it is not running): inside a part, that its
    widget changed what it reads."""
    ctx = get_script_run_ctx()
    return bool(ctx and ctx.fragment_ids_this_run)


def whole_page() -> None:
    """From a part's own rerun: run the whole page instead (what is above the part changes too)."""
    st.rerun(scope="app")
