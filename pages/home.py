"""Home: what the app is, and a link to every page (pages/_site.py lists them)."""

import streamlit as st

from pages._frame import ensure_app_frame
from pages._learner import next_step, progress, was_seen
from pages._path import go_on
from pages._prose import EXPLAINED, explained, fresh_page
from pages._site import PATH, SECTIONS, entry

ensure_app_frame()

st.title("Attention Explorer")
st.markdown(
    "Attention in transformers, **every step of the math on screen**: drag a slider on a toy query and "
    "watch the scores, the softmax weights and the output move; then open a real pretrained model and "
    "see, head by head, what a word looks at. Everything runs offline on this machine."
)
st.latex(r"\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right) V")

fresh_page()  # each term explained on hover where it first appears on this page


def line(text: str) -> None:
    """A caption of our own prose, its glossary terms explained on hover where they first appear."""
    st.caption(explained(text, st.session_state[EXPLAINED]), unsafe_allow_html=True)


st.subheader("Start here: a path through attention")
seen_pages, answered, right = progress()
total_minutes = sum(entry(p).minutes for p in PATH)
st.markdown(f"{len(PATH)} pages, from a toy lookup to what a real model's heads do, about {total_minutes} minutes in "
            "all. Each page explains, then asks you to **predict** before it shows; your place and answers last "
            f"while this tab stays open (reloading it starts again). So far: **{seen_pages} of {len(PATH)}** pages "
            f"on the path, **{answered}** "
            f"question{'' if answered == 1 else 's'} answered, **{right}** right.")
for number, path in enumerate(PATH, 1):  # a link, then its line: two columns clipped the titles at 800 px
    page = entry(path)
    st.page_link(path, label=f"{number}. {page.title} · about {page.minutes} min",
                 icon=":material/check_circle:" if was_seen(path) else page.icon)
    line(page.line)
upcoming = next_step()  # after the step the learner was on last: not back to step 1 for a page skipped
if upcoming is not None and st.button(f"{'Continue' if seen_pages else 'Start'}: {entry(upcoming).title}",
                                      icon=":material/arrow_forward:", type="primary", key="path.start"):
    go_on(upcoming)

st.subheader("Every page")
for section, entries in SECTIONS.items():
    st.markdown(f"**{section}**")
    for page in entries:
        st.page_link(page.path, label=page.title, icon=page.icon)
        line(page.line)

st.caption("The examples come from well-known introductions to attention; the README lists them.")
