"""Model heads: every layer x head of a real model on your sentence, one head zoomed, one token followed."""

import streamlit as st

from attention import plotting
from attention.models import AGGREGATIONS, token_focus, zoom
from attention.models.tokens import default_focus
from pages._frame import ensure_app_frame
from pages._labels import label_of, token_labels
from pages._models import (
    attention_or_stop,
    carried,
    layer_and_head,
    remember,
    sentence_and_model,
    survey_or_stop,
)
from pages._text import md

ensure_app_frame()

st.title("Model heads")
name, text = sentence_and_model()
att = attention_or_stop(name, text)
L, H, n = att.n_layers, att.n_heads, len(att.tokens)
st.caption(f"{n:,} tokens · {L} layers × {H} heads · {att.kind} · {att.nbytes / 1e6:.1f} MB stored (q, k, v and "
           "hidden states; weights are recomputed from q and k for each view)")

st.subheader("All heads at once")
found = survey_or_stop(name, text, att)
st.plotly_chart(plotting.head_grid(found.tiles, hover_extra=found.special, hover_label="share on the first/special "
                                   "tokens"), width="stretch", key="heads.grid")
st.caption("Each tile is one head: rows are queries, columns keys, in token order"
           + (f", each cell the largest weight in a block of {found.block}×{found.block} tokens, so thin patterns "
              "(diagonals, a column on [SEP]) stay visible." if found.block > 1 else "."))

st.subheader("Zoom")
c1, c2, c3, c4 = st.columns(4)
aggregations = list(AGGREGATIONS)
how = c1.selectbox("Show", aggregations, index=aggregations.index(carried("agg", "head")),
                   format_func=label_of(AGGREGATIONS, "label"), key="agg", bind="query-params")
remember("agg", how)
layer, head = layer_and_head(c2, c3, L, H, head_disabled=how != "head")
hide = c4.toggle("Hide special tokens", value=False, key="hide_special", bind="query-params",
                 help="Drop [CLS]/[SEP]/BOS rows and columns and renormalise each row")
st.latex(AGGREGATIONS[how].formula)
try:
    view = zoom(att, how, layer=layer, head=head, hide_special=hide)
except ValueError as err:
    st.warning(md(err))
    st.stop()
st.plotly_chart(plotting.heatmap(view.matrix, view.col_labels, view.row_labels, title=view.title,
                                 value_name=view.value_name, zmin=0, zmax=view.zmax, mask=view.mask, show_values=False),
                width="stretch", key="heads.zoom")

st.subheader("Where does one token look, in every head?")
focus = st.selectbox("Token", range(n), format_func=token_labels(att.tokens), key="focus",
                     bind="query-params", index=default_focus(att.tokens))
focus_view = token_focus(att, min(focus, n - 1))
st.plotly_chart(plotting.heatmap(focus_view.matrix, focus_view.col_labels, focus_view.row_labels,
                                 title=focus_view.title, x_title="key token", y_title="layer · head", zmin=0, zmax=1,
                                 show_values=False, height=min(1400, 120 + 12 * L * H), max_tick_labels=96,
                                 row_groups=H if L * H > 96 else None),
                width="stretch", key="heads.focus")

if att.kind == "encoder-decoder":
    st.subheader("Cross-attention: each target token reads the source")
    target = st.text_input("Target sentence (empty: the model's own greedy translation)", key="target",
                           bind="query-params", max_chars=2000)
    pair = attention_or_stop(name, text, target.strip() or None)
    cross_how = how if "cross" in AGGREGATIONS[how].stacks else "mean"
    if cross_how != how:
        st.caption(f"{AGGREGATIONS[how].label} is defined for self-attention; cross-attention shows the mean over "
                   "heads.")
    cross = zoom(pair, cross_how, layer=layer, head=head, stack="cross")  # (t, n)
    st.plotly_chart(plotting.heatmap(cross.matrix, cross.col_labels, cross.row_labels, title=cross.title,
                                     x_title="source token (key)", y_title="target token (query)", zmin=0, zmax=1,
                                     show_values=False), width="stretch", key="heads.cross")
