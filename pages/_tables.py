"""Tables that fit a phone: each column of a learner's table as wide as its numbers, under a short header.

A phone's page is about 364 px wide. Streamlit gives a table's columns 200 px each unless told, so Why scale's
five columns ran to 379 px and the lookup's editor to 611 px: the last ones were cut at the table's edge until the
reader thought to scroll it sideways (issue 68). `column(...)` gives one column a width in pixels and a short label
over it, its full name on hover; the data keeps its own column names (the tests and a downloaded CSV read them).
"""

import streamlit as st


def column(label: str, width: int, *, full: str | None = None, digits: int | None = None):
    """A column `width` px wide headed `label` (its full name `full` on hover), numbers written to `digits`
    places (None: as the data says)."""
    if digits is None:
        return st.column_config.Column(label, width=width, help=full)
    return st.column_config.NumberColumn(label, width=width, help=full, format=f"%.{digits}f")
