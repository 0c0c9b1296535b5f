"""What the model pages carry from one page to the next: widget values kept in the session.

Streamlit forgets a widget's state when its page is left, so a sentence typed on Model heads was gone on
Inside one head, and a 4,000-token text cannot travel in a URL (uvicorn refuses request lines over
16 KB). Each shared widget takes carried(key, default) as its default and remember()s what it returns;
a URL's own ?text= still wins: it sets the widget when the page opens.
"""

import functools
from collections.abc import Callable

import streamlit as st


def carried(key: str, default):
    """The value the widget `key` had on the last model page, else `default`."""
    return st.session_state.get(f"carried.{key}", default)


def remember(key: str, value) -> None:
    st.session_state[f"carried.{key}"] = value


def fill(values: dict) -> None:
    """Set widgets (by key) and remember them; in a callback, so the widget, the browser and the URL take it."""
    for key, value in values.items():
        remember(key, value)
        st.session_state[key] = value


def example_filler(examples: dict, picker: str, fields: tuple[str | None, ...]) -> Callable[[], None]:
    """on_change for an example picker: copy the chosen example's values into the widgets keyed `fields`
    (None skips one). Only a change of example fills them: a sentence brought from another page stays."""
    return functools.partial(_fill_from_example, examples, picker, fields)


def _fill_from_example(examples: dict, picker: str, fields: tuple[str | None, ...]) -> None:
    values = examples[st.session_state[picker]]
    fill({field: value for field, value in zip(fields, values, strict=True) if field})


def model_switcher(name: str) -> Callable[[], None]:
    """on_click for a button that moves this page (and the next ones) to model `name`."""
    return functools.partial(fill, {"model": name})


def head_opener(layer: int, head: int) -> Callable[[], None]:
    """on_click for a button that sets the Layer and Head inputs to (layer, head), 0-based."""
    return functools.partial(fill, {"layer": layer + 1, "head": head + 1})


def switch_to(page: str) -> None:
    """Open another page in this tab. Its URL starts empty; the values carried here follow. (A plain
    st.switch_page refuses to clear a URL holding a widget-bound value, such as ?layer=3.)"""
    st.switch_page(page, query_params={})
