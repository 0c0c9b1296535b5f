"""Home: what the app is, and a link to every page."""

import streamlit as st

from pages._frame import ensure_app_frame

ensure_app_frame()

st.title("Attention Explorer")
st.markdown(
    "Attention in transformers, **every step of the math on screen**: drag a slider on a toy query and "
    "watch the scores, the softmax weights and the output move; then open a real pretrained model and "
    "see, head by head, what a word looks at. Everything runs offline on this machine."
)
st.latex(r"\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right) V")

LINKS = [
    ("pages/lookup.py", "Lookup: hard vs soft", "A dictionary answers *apple*; attention also answers *fruit*."),
    ("pages/self_attention.py", "Step by step: self-attention",
     "“Thinking Machines”: embeddings → Q, K, V → scores → ÷√d_k → softmax → weighted sum."),
    ("pages/scaling.py", "Why scale by √d_k", "Score variance grows with d; softmax saturates without scaling."),
    ("pages/scoring.py", "Scoring functions", "Dot, scaled dot, multiplicative, reduced-rank, additive."),
    ("pages/multihead.py", "Multi-head, masks, cross-attention",
     "“Hang them, not let them go”, causal masks and a toy translation."),
    ("pages/toy_ambiguity.py", "Ambiguity in a toy model", "Hand-built “bank” and “it” that attention resolves."),
    ("pages/positions.py", "Word order and positions",
     "Shuffle a sentence; sinusoidal positions; rotary positions in 2-D and in SmolLM2."),
    ("pages/bottleneck.py", "The bottleneck, and attention",
     "Two trained GRUs reverse digits: one context vector fails on long inputs, attention aligns."),
    ("pages/model_heads.py", "Model heads", "Every layer × head of MiniLM or SmolLM2 on your sentence, offline."),
    ("pages/inside_head.py", "Inside one head", "q, each k, q⊙k, scores, softmax, output of a real head."),
    ("pages/ambiguous_words.py", "Ambiguous words", "“bank”, “it”, “plant” in two sentences, head by head."),
    ("pages/head_atlas.py", "Head atlas", "Entropy, [SEP] sinks, previous-token heads (Clark et al. 2019)."),
    ("pages/predictions.py", "Predictions and head effects",
     "“The capital of France is” → “ Paris”: generate step by step, then remove each head to see which matter."),
]

st.subheader("Pages")
for path, title, line in LINKS:
    col_link, col_text = st.columns([1, 2])
    col_link.page_link(path, label=title)
    col_text.markdown(line)

st.caption("The examples come from the articles in the project's seeds; see the README for sources.")
