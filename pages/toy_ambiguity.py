"""Ambiguity in a toy model: hand-built "bank" (seed 000) and "it" (seed 004) resolved by attention."""

import streamlit as st

from attention.focus import WordPair
from attention.toy import plotting
from attention.toy.ambiguity import AMBIGUOUS_WORDS, AmbiguousWord
from attention.toy.lessons import questions_for
from attention.toy.live import PULL_VALUES, Panel, pull_frames, slider, slider_values
from pages._focus import switch_to, update
from pages._frame import ensure_app_frame
from pages._lessons import path_links, predict_then_see
from pages._live import live_sliders
from pages._text import md

ensure_app_frame()

st.title("Ambiguity in a toy model")
st.markdown("Four-to-six readable dimensions instead of hundreds, and weights written by hand "
            "(see `attention/toy/examples.py`), so you can see *why* attention picks the right sense. "
            "`pull` multiplies the queries: 0 means uniform attention, more means sharper.")
with st.expander("Exact value (typed, kept in the link)"):
    pull = st.number_input("pull of the context words", 0.0, 10.0, 4.0, 0.5, key="toy.pull", bind="query-params")


values = slider_values(PULL_VALUES, pull)
panels = []
for word, toy in AMBIGUOUS_WORDS.items():
    for n, default in enumerate(toy.sentences):
        sentence = st.session_state.get(f"toy.{word}{n}", default)
        try:
            tokens, frames = pull_frames(sentence, word, values)
        except ValueError:
            continue  # the tab below says what is wrong with this sentence
        title = f"“{word}” in “{sentence}”" + (" (layer 2)" if word == "it" else "")
        panels.append(Panel(title, "bars", (word,), tokens, frames))
if panels:
    live_sliders([slider("pull", values, pull, "toy.pull")], panels, key="toy")
    st.caption("Drag the pull: what “bank” and “it” attend to redraws at every step (computed in advance); the "
               "tabs below follow when you let go.")
predict_then_see(questions_for("toy_ambiguity"))


def sentence_pair(toy: AmbiguousWord) -> None:
    """One tab: two sentences with the word, what it attends to in each (per layer), its output in both."""
    if toy.story:
        st.markdown(toy.story)
    st.latex(toy.formula)
    results = {}
    for n, (col, default) in enumerate(zip(st.columns(2), toy.sentences, strict=True)):
        sentence = col.text_input(f"sentence {n + 1}", value=default, key=f"toy.{toy.word}{n}", bind="query-params",
                                  max_chars=200)
        try:
            r = toy.attend(sentence, pull)
        except ValueError as err:
            col.warning(md(err))  # the sentence cannot be read: the reader's to change, not a failure
            continue
        results[sentence] = r
        for layer, (title, trace) in enumerate(r.layers, start=1):
            col.plotly_chart(plotting.weights_bar(r.tokens, trace.weights[r.focus], title=title), width="stretch",
                             key=f"toy.{toy.word}_bar{n}.{layer}")
    if results:
        st.plotly_chart(plotting.sense_plane({s[-25:]: r.sense for s, r in results.items()}, axes=toy.axes,
                                             title=f"The output vector of “{toy.word}” in each sentence"),
                        width="stretch", key=f"toy.{toy.word}_plane")


for tab, toy in zip(st.tabs([f"“{word}”" for word in AMBIGUOUS_WORDS]), AMBIGUOUS_WORDS.values(), strict=True):
    with tab:
        sentence_pair(toy)

st.subheader("The same sentences in a real model")
c1, c2 = st.columns(2)
for col, (word, toy) in zip((c1, c2), AMBIGUOUS_WORDS.items(), strict=True):
    if col.button(f"See “{word}” in MiniLM, head by head", icon=":material/open_in_new:", key=f"toy.real.{word}"):
        sentences = [st.session_state.get(f"toy.{word}{n}", default) for n, default in enumerate(toy.sentences)]
        # the example follows: Ambiguous words opens on these two sentences
        update(pair=WordPair(sentences[0], sentences[1], word))
        switch_to("pages/ambiguous_words.py")

path_links("pages/toy_ambiguity.py")
