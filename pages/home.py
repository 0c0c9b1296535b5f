"""Home: what the app is, and a link to every page (pages/_site.py lists them)."""

import streamlit as st

from pages._frame import ensure_app_frame
from pages._site import SECTIONS

ensure_app_frame()

st.title("Attention Explorer")
st.markdown(
    "Attention in transformers, **every step of the math on screen**: drag a slider on a toy query and "
    "watch the scores, the softmax weights and the output move; then open a real pretrained model and "
    "see, head by head, what a word looks at. Everything runs offline on this machine."
)
st.latex(r"\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right) V")

for section, entries in SECTIONS.items():
    st.subheader(section)
    for page in entries:
        col_link, col_text = st.columns([1, 2])
        col_link.page_link(page.path, label=page.title, icon=page.icon)
        col_text.markdown(page.line)

st.caption("The examples come from the articles in the project's seeds; see the README for sources.")
