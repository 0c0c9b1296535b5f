"""Model heads: every layer x head of a real model on your sentence, one head zoomed, one token followed."""

import numpy as np
import streamlit as st

from attention import plotting
from attention.stats import AGGREGATIONS, aggregate, drop_tokens
from pages._frame import ensure_app_frame
from pages._models import AGG_NAMES, attention_or_stop, cached_model, sentence_and_model, token_label
from pages._text import md

ensure_app_frame()

FORMULAS = {
    "head": r"A^{(\ell,h)} = \operatorname{softmax}\!\left(Q^{(\ell,h)} K^{(\ell,h)\top} / \sqrt{d_k}\right)",
    "mean": r"\bar A^{(\ell)} = \tfrac{1}{H}\sum_h A^{(\ell,h)}",
    "max": r"A^{(\ell)}_{\max} = \max_h A^{(\ell,h)}",
    "rollout": r"\tilde A^{(\ell)} = \operatorname{rownorm}\!\left(\tfrac12 \bar A^{(\ell)} + \tfrac12 I\right),\quad"
               r" R^{(\ell)} = \tilde A^{(\ell)} R^{(\ell-1)}",
    "norm": r"N^{(\ell)}_{ij} = \Big\lVert \sum_h \alpha^{(\ell,h)}_{ij}\, v^{(h)}_j W_O^{(h)} \Big\rVert",
}

st.title("Model heads")
name, text = sentence_and_model()
att = attention_or_stop(name, text)
L, H, n = att.n_layers, att.n_heads, len(att.tokens)
st.caption(f"{n} tokens · {L} layers × {H} heads · {att.kind}")

st.subheader("All heads at once")
st.plotly_chart(plotting.head_grid(att.weights), width="stretch", key="heads.grid")
st.caption("Each tile is one head: rows are queries, columns keys, in token order. Long inputs are max-pooled "
           "to a few dozen pixels per tile so thin patterns (diagonals, a column on [SEP]) stay visible.")

st.subheader("Zoom")
c1, c2, c3, c4 = st.columns(4)
how = c1.selectbox("Show", AGGREGATIONS, format_func=AGG_NAMES.get, key="agg", bind="query-params")
layer = c2.number_input("Layer", 1, L, 1, key="layer", bind="query-params") - 1
head = c3.number_input("Head", 1, H, 1, key="head", bind="query-params", disabled=how != "head") - 1
hide = c4.toggle("Hide special tokens", value=False, key="hide_special", bind="query-params",
                 help="Drop [CLS]/[SEP]/BOS rows and columns and renormalise each row")
layer, head = min(layer, L - 1), min(head, H - 1)
st.latex(FORMULAS[how])
try:
    w_o = cached_model(name).output_projections(att.self_modules) if how == "norm" else None
    matrix = aggregate(att, how, layer=layer, head=head, w_o=w_o)
except ValueError as err:
    st.warning(md(err))
    st.stop()
keep = ~att.special if hide and (~att.special).any() else np.ones(n, bool)
labels = [t for t, k in zip(att.tokens, keep, strict=True) if k]
shown = drop_tokens(matrix, keep, renormalise=how != "norm") if hide else matrix
value_name = "norm" if how == "norm" else "weight"
title = f"Layer {layer + 1}" + (f", head {head + 1}" if how == "head" else f", {AGG_NAMES[how]}")
mask = None if att.self_attn.mask is None else att.self_attn.mask[np.ix_(keep, keep)]
st.plotly_chart(plotting.heatmap(shown, labels, labels, title=title, value_name=value_name, zmin=0,
                                 zmax=None if how == "norm" else 1, mask=mask, show_values=False),
                width="stretch", key="heads.zoom")

st.subheader("Where does one token look, in every head?")
focus = st.selectbox("Token", range(n), format_func=lambda i: token_label(att, i), key="focus",
                     bind="query-params", index=min(int(np.argmax([t.lower() == "bank" for t in att.tokens])), n - 1))
focus = min(focus, n - 1)
rows = att.weights[:, :, focus, :].reshape(L * H, n)  # (L*H, n): one row per head
row_labels = [f"L{l_ + 1} H{h + 1}" for l_ in range(L) for h in range(H)]
st.plotly_chart(plotting.heatmap(rows, att.tokens, row_labels, title=f"“{att.tokens[focus]}” as the query",
                                 x_title="key token", y_title="layer · head", zmin=0, zmax=1, show_values=False,
                                 height=min(1400, 120 + 12 * L * H), max_tick_labels=96),
                width="stretch", key="heads.focus")

if att.kind == "encoder-decoder":
    st.subheader("Cross-attention: each target token reads the source")
    target = st.text_input("Target sentence (empty: the model's own greedy translation)", key="target",
                           bind="query-params", max_chars=2000)
    pair = attention_or_stop(name, text, target.strip() or None)
    cross_how = how if how in ("head", "mean", "max") else "mean"
    if cross_how != how:
        st.caption(f"{AGG_NAMES[how]} is defined for self-attention; cross-attention shows the mean over heads.")
    cross = aggregate(pair, cross_how, layer=layer, head=head, stack="cross")  # (t, n)
    title = f"Layer {layer + 1}, " + (f"head {head + 1}" if cross_how == "head" else AGG_NAMES[cross_how])
    st.plotly_chart(plotting.heatmap(cross, att.tokens, pair.target_tokens, title=title, x_title="source token (key)",
                                     y_title="target token (query)", zmin=0, zmax=1, show_values=False),
                    width="stretch", key="heads.cross")
