"""Scoring functions: five ways to score a query against a key, on the same inputs."""

import pandas as pd
import streamlit as st

from attention import METHODS, attention_from_embeddings, causal_mask, figures, scored_attention
from attention.toy import examples as ex
from attention.toy.questions import questions_for
from attention.toy.scoring import FORMULAS
from pages._frame import ensure_app_frame
from pages._kept import linked
from pages._lessons import questions_first
from pages._path import intro, path_links
from pages._prose import for_developers

ensure_app_frame()

NAMES = {"dot": "Dot (Luong)", "scaled_dot": "Scaled dot (Transformer)", "multiplicative": "Multiplicative / general",
         "reduced_rank": "Reduced-rank multiplicative", "additive": "Additive (Bahdanau)"}

st.title("Scoring functions")
PAGE = "pages/scoring.py"
intro(PAGE, "Every kind of attention does three things: it gives each query a score against each key, turns "
            "the scores into weights with softmax, and mixes the values by those weights. Only the **score** "
            "differs from one design to the next. Here are five classic ones, on the same small sentence, "
            "“Cat sat on the mat” from the step-by-step page (queries and keys of d_k = 3 numbers). The extra "
            "matrices some of them use (W, U, V, W₁, W₂, v_a) are fixed random ones here, where a trained "
            "model would have learned them.")
questions_first(questions_for("scoring"), PAGE)
c1, c2 = st.columns(2)
causal = c1.toggle("causal mask (decoder)", value=False, key=linked("scoring.causal"), bind="query-params")
show = c2.radio("show", ["weights (after softmax)", "scores (before softmax)"], horizontal=True,
                key=linked("scoring.show"), bind="query-params")

sentence = ex.cat_sentence()
base = attention_from_embeddings(sentence.x, sentence.w_q, sentence.w_k, sentence.w_v)
params = ex.scoring_parameters()
tokens = list(sentence.tokens)
mask = causal_mask(len(tokens)) if causal else None
traces = {m: scored_attention(base.q, base.k, base.v, m, mask=mask, **params[m]) for m in METHODS}

weights_shown = show.startswith("weights")
st.caption("Each cell's number is written in it where the cell can hold it (hover for any cell); " +
           ("darker blue, more weight (0 to 1)." if weights_shown else
            "blue above 0, red below, each chart on its own scale."))
# Two per row, the colour bar across each chart's top: at the right, at 800 px, it left the cells too narrow for
# their numbers.
cells = [c for _ in range(3) for c in st.columns(2)]
for cell, method in zip(cells, METHODS, strict=False):
    t = traces[method]
    with cell:
        st.markdown(f"**{NAMES[method]}**")
        st.latex(r"\small " + FORMULAS[method])  # a half column at 800 px: the additive score was cut
        if weights_shown:
            fig = figures.heatmap(t.weights, tokens, tokens, colours=figures.Colours(0.0, 1.0, bar="top"), mask=mask,
                                  height=360)
        else:
            fig = figures.heatmap(t.scaled, tokens, tokens, value_name="score", mask=mask, height=360,
                                  colours=figures.Colours(scale=figures.SIGNED.scale, centred=True, bar="top"))
        st.plotly_chart(fig, width="stretch", key=f"scoring.{method}")
with cells[len(METHODS)], st.expander("The parameters (fixed, seeded random)"):
    for method, ps in params.items():
        for name, value in ps.items():
            st.markdown(f"{NAMES[method]}: `{name}` {value.shape}")
            st.dataframe(pd.DataFrame(value), key=f"scoring.param.{method}.{name}")

for_developers("The five methods are attention.toy.scoring (METHODS, FORMULAS) through "
               "attention.scored_attention; the inputs attention.toy.examples.cat_sentence and scoring_parameters "
               "(seed 003); the questions attention.toy.questions.")
path_links(PAGE)
