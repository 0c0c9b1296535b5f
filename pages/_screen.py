"""The frame's look on every screen: a printed page, a phone, and heatmap numbers only where a cell holds them.

app.py calls `screen()` on every run. A phone (390 px) cut formulas on the right and drew numbers 4 px tall in
heatmap cells (issue 68): displayed formulas take a smaller size there and scroll inside their own frame if one
still does not fit; a dataframe's toolbar no longer covers the heading above it; Plotly charts (components/fit.js)
hide the heatmap numbers their cells cannot hold legibly (hover keeps them), shrink a title wider than its chart
and thin tick labels that would overlap; `phone_only` shows a line on a phone's width only.
"""

import zlib

import streamlit as st

from pages._live import COMPONENTS

PRINT = """@media print {
  [data-testid="stSidebar"], [data-testid="stHeader"], [data-testid="stToolbar"], [data-testid="stDecoration"],
  [data-testid="stBaseButton-secondary"], [data-testid="stBaseButton-primary"], [data-testid="stDownloadButton"],
  [data-testid="stSelectbox"], [data-testid="stCheckbox"], [data-testid="stPageLink"],
  .st-key-noprint { display: none !important; }
  [data-testid="stMain"], [data-testid="stAppViewContainer"] { margin: 0 !important; padding: 0 !important; }
  [data-testid="stMainBlockContainer"] { max-width: 100% !important; padding: 0 1rem !important; }
}"""
PHONE = """.katex-display { overflow-x: auto; overflow-y: hidden; }
@media (max-width: 640px) {
  .katex-display > .katex { font-size: 1em; }
  [data-testid="stMainBlockContainer"] { padding-left: 0.75rem; padding-right: 0.75rem; }
}
[data-testid="stElementToolbar"] { top: -0.25rem !important; }
[class*="st-key-phone-only"] { display: none; }
@media (max-width: 640px) { [class*="st-key-phone-only"] { display: block; } }"""
PHONE_ONLY = "phone-only"  # a container key's prefix: shown on a phone's width only

_fit = st.components.v2.component("attention_explorer_fit", js=(COMPONENTS / "fit.js").read_text(encoding="utf-8"))


def screen() -> None:
    """The styles (printed pages, phones) and the heatmap-number fit, mounted in the sidebar (nothing drawn)."""
    st.html(f"<style>{PRINT}\n{PHONE}</style>")
    with st.sidebar:
        _fit(key="fit", data={}, height="content")


def phone_only(draw, *args, **kwargs) -> None:
    """`draw(*args, **kwargs)` (st.caption, ...) in a container shown only on a phone's width: a word a phone
    needs ("swipe the table sideways") that a laptop would not."""
    with st.container(key=f"{PHONE_ONLY}-{zlib.crc32(repr(args).encode())}"):
        draw(*args, **kwargs)
