"""Ambiguity in a toy model: hand-built "bank" and "it" resolved by attention."""

import streamlit as st

from attention import figures
from attention.focus import WordPair
from attention.toy.ambiguity import AMBIGUOUS_WORDS, AmbiguousWord
from attention.toy.live import PULL_VALUES, Panel, pull_frames, slider, slider_values
from attention.toy.questions import questions_for
from pages._focus import switch_to, update
from pages._frame import ensure_app_frame
from pages._kept import linked
from pages._lessons import questions_first
from pages._live import live_sliders
from pages._path import intro, path_links
from pages._prose import for_developers, prose
from pages._text import md

ensure_app_frame()

st.title("Ambiguity in a toy model")
PAGE = "pages/toy_ambiguity.py"
intro(PAGE, "“Bank” is a river's edge or a place for money; in “…because it was too tired”, “it” is the "
            "animal, and in “…too wide” the street. A reader settles such words from the words around them, and "
            "so does attention: the ambiguous word's query asks for context, and the value of the word that "
            "answers moves its vector toward one sense. Here the vectors have four to six readable dimensions "
            "(“nature”, “finance”…) instead of hundreds, and the weights are written by hand, so you can see "
            "*why* attention picks the sense it does.")
questions_first(questions_for("toy_ambiguity"), PAGE)
prose("The pull multiplies the queries: at 0 every word gets the same weight; the more pull, the sharper the "
      "attention.")
with st.expander("Exact value (typed, kept in the link)"):
    pull = st.number_input("pull of the context words", 0.0, 10.0, 4.0, 0.5, key=linked("toy.pull"),
                           bind="query-params")


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


def sentence_pair(toy: AmbiguousWord) -> None:
    """One tab: two sentences with the word, what it attends to in each (per layer), its output in both."""
    if toy.story:
        st.markdown(toy.story)
    st.latex(toy.formula)
    results = {}
    for n, (col, default) in enumerate(zip(st.columns(2), toy.sentences, strict=True)):
        sentence = col.text_input(f"sentence {n + 1}", value=default, key=linked(f"toy.{toy.word}{n}"),
                                  bind="query-params",
                                  max_chars=200)
        try:
            r = toy.attend(sentence, pull)
        except ValueError as err:
            col.warning(md(err))  # the sentence cannot be read: the reader's to change, not a failure
            continue
        results[f"sentence {n + 1}"] = r
        for layer, (title, trace) in enumerate(r.layers, start=1):
            col.plotly_chart(figures.weights_bar(r.tokens, trace.weights[r.focus], title=title), width="stretch",
                             key=f"toy.{toy.word}_bar{n}.{layer}")
    if results:
        # labelled by number: a sentence's last 25 characters read "d money into the bank"
        st.plotly_chart(figures.sense_plane({name: r.sense for name, r in results.items()}, axes=toy.axes,
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

for_developers("The toy vectors and weights are attention.toy.examples (BANK_*, IT_*; seeds 000 and 004); "
               "each sentence is read by attention.toy.ambiguity (bank_attention, it_attention); the drag's frames "
               "attention.toy.live.pull_frames; the questions attention.toy.questions.")
path_links(PAGE)
