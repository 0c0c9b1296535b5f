"""format_func callables for widgets, made here and not as lambdas in a page.

Streamlit keeps a widget's callbacks until the widget is drawn again, and a lambda written in a page
keeps that run's whole namespace alive, results included: a 4,096-token result (0.8 GB) sat beside the
next one while it was computed. These partials hold only what they label.
"""

import functools
from collections.abc import Callable


def token_labels(tokens) -> Callable[[int], str]:
    """A selectbox's format_func for token positions: 3 -> "3: bank". A model's tokens come as
    attention.models.shown_tokens(att) labels them (" bank" as "␣bank"), never att.tokens bare."""
    return functools.partial(_token_label, tuple(tokens))


def _token_label(tokens: tuple[str, ...], i: int) -> str:
    return f"{i}: {tokens[i]}"


def label_of(table: dict, field: str | None = None) -> Callable[[str], str]:
    """A format_func reading a label from a table: label_of(AGGREGATIONS, "label"), label_of(METRICS)
    for {key: (label, ...)}."""
    return functools.partial(_label, table, field)


def _label(table: dict, field: str | None, key) -> str:
    entry = table[key]
    return getattr(entry, field) if field else entry[0] if isinstance(entry, tuple) else str(entry)


def label_or_every(tokens) -> Callable[[int | None], str]:
    """A format_func for an optional token: None -> "every token", 3 -> "3: bank"."""
    return functools.partial(_label_or_every, tuple(tokens))


def _label_or_every(tokens: tuple[str, ...], i: int | None) -> str:
    return "every token" if i is None else _token_label(tokens, i)
