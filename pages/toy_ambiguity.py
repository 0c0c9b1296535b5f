"""Ambiguity in a toy model: hand-built "bank" (seed 000) and "it" (seed 004) resolved by attention."""

import streamlit as st

from attention import examples as ex
from attention import plotting
from attention.lessons import questions_for
from attention.live import PULL_VALUES, Panel, pull_frames, slider, slider_values
from attention.toy_ambiguity import bank_attention, it_attention
from pages._carried import fill, switch_to
from pages._frame import ensure_app_frame
from pages._lessons import path_links, predict_then_see
from pages._live import live_sliders
from pages._text import md

ensure_app_frame()

st.title("Ambiguity in a toy model")
st.markdown("Four-to-six readable dimensions instead of hundreds, and weights written by hand "
            "(see `attention/examples.py`), so you can see *why* attention picks the right sense. "
            "`pull` multiplies the queries: 0 means uniform attention, more means sharper.")
with st.expander("Exact value (typed, kept in the link)"):
    pull = st.number_input("pull of the context words", 0.0, 10.0, 4.0, 0.5, key="toy.pull", bind="query-params")


values = slider_values(PULL_VALUES, pull)
panels = []
for word, keys, defaults in (("bank", ("toy.bank0", "toy.bank1"), ex.BANK_SENTENCES),
                             ("it", ("toy.it0", "toy.it1"), ex.IT_SENTENCES)):
    for key, default in zip(keys, defaults, strict=True):
        sentence = st.session_state.get(key, default)
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
tab_bank, tab_it = st.tabs(["“bank”", "“it”"])

with tab_bank:
    st.latex(r"q_{bank} = \text{pull}\cdot x_{bank} W_Q,\quad k_j = x_j W_K,\quad "
             r"z_{bank} = \sum_j \alpha_j\, x_j W_V \in (\text{nature}, \text{finance})")
    cols = st.columns(2)
    results = {}
    for n, (col, default) in enumerate(zip(cols, ex.BANK_SENTENCES, strict=True)):
        sentence = col.text_input(f"sentence {n + 1}", value=default, key=f"toy.bank{n}", bind="query-params",
                                  max_chars=200)
        try:
            r = bank_attention(sentence, pull)
        except ValueError as err:
            col.error(md(err))
            continue
        results[sentence] = r
        col.plotly_chart(plotting.weights_bar(r.tokens, r.trace.weights[r.focus], title="what “bank” attends to"),
                         width="stretch", key=f"toy.bank_bar{n}")
    if results:
        st.plotly_chart(plotting.sense_plane({s: r.sense for s, r in results.items()}, axes=("nature", "finance"),
                                             title="The output vector of “bank” in each sentence"),
                        width="stretch", key="toy.bank_plane")

with tab_it:
    st.markdown("One layer is not enough: the query of “it” is the same in both sentences. Layer 1 lets "
                "“it” read what the predicate wants (*tired* wants an animate subject, *wide* a spatial one); "
                "layer 2 matches that want against the nouns.")
    st.latex(r"x' = x + \operatorname{Attn}_1(x), \qquad z_{it} = \operatorname{Attn}_2(x')_{it}"
             r" \in (\text{animate}, \text{spatial})")
    cols = st.columns(2)
    results = {}
    for n, (col, default) in enumerate(zip(cols, ex.IT_SENTENCES, strict=True)):
        sentence = col.text_input(f"sentence {n + 1}", value=default, key=f"toy.it{n}", bind="query-params",
                                  max_chars=200)
        try:
            r = it_attention(sentence, pull)
        except ValueError as err:
            col.error(md(err))
            continue
        results[sentence] = r
        for layer, t in (("layer 1: “it” finds the predicate", r.layer1), ("layer 2: “it” finds its noun", r.layer2)):
            col.plotly_chart(plotting.weights_bar(r.tokens, t.weights[r.focus], title=layer),
                             width="stretch", key=f"toy.it{n}{layer[:7]}")
    if results:
        st.plotly_chart(plotting.sense_plane({s[-25:]: r.sense for s, r in results.items()},
                                             axes=("animate", "spatial"), title="The output vector of “it”"),
                        width="stretch", key="toy.it_plane")

st.subheader("The same sentences in a real model")
c1, c2 = st.columns(2)
for col, word, keys in ((c1, "bank", ("toy.bank0", "toy.bank1")), (c2, "it", ("toy.it0", "toy.it1"))):
    if col.button(f"See “{word}” in MiniLM, head by head", icon=":material/open_in_new:", key=f"toy.real.{word}"):
        sentences = [st.session_state.get(k, d) for k, d in zip(keys, ex.BANK_SENTENCES if word == "bank"
                                                                 else ex.IT_SENTENCES, strict=True)]
        # the example follows: Ambiguous words opens on these two sentences
        fill({"pair": word, f"a_{word}": sentences[0], f"b_{word}": sentences[1], f"w_{word}": word})
        switch_to("pages/ambiguous_words.py")

path_links("pages/toy_ambiguity.py")
