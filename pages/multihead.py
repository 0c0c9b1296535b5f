"""Multi-head attention, masks and cross-attention."""

import streamlit as st

from attention import causal_mask, figures, multi_head_attention
from attention.toy import examples as ex
from attention.toy.live import SHARPNESS_VALUES, Panel, cross_attention_frames, slider, slider_values
from attention.toy.multihead import toy_translation
from attention.toy.questions import questions_for
from pages._frame import ensure_app_frame
from pages._kept import linked
from pages._lessons import questions_first
from pages._live import live_sliders
from pages._path import intro, path_links
from pages._prose import for_developers

ensure_app_frame()

st.title("Heads, masks, cross-attention")
PAGE = "pages/multihead.py"
intro(PAGE, "Three ideas that every real transformer uses. **Several heads**: one attention pattern can only "
            "express one reading of a sentence, so a layer runs several heads side by side, each looking for "
            "something different. **Masks**: a model that writes text may not look at words it has not written "
            "yet; a causal mask hides them. **Cross-attention**: a translator's words being written look at "
            "the words of the sentence being translated.")
questions_first(questions_for("multihead"), PAGE)

# --- Multi-head self-attention --------------------------------------------------------------------------
st.header("Several heads, one sentence")
st.markdown("“Hang them, not let them go” can be read two ways: as written it says *hang them*; move the "
            "comma, “Hang them not, let them go”, and it says *spare them*. Which words “not” belongs with "
            "decides the meaning, and one attention pattern can only express one reading. Multi-head attention "
            "runs several heads in parallel, each on its own slice of the word vectors, then mixes their "
            "outputs with W_O. The heads below have **random, untrained** weights (word vectors of 8 numbers): "
            "their patterns show what several heads, a mask and softmax look like, not what a trained model reads "
            "in this sentence. Model heads, in the next part of the path, shows trained heads.")
# Two lines: on one, the formula ran past the right edge at 800 px.
st.latex(r"\text{head}_i = \operatorname{softmax}\!\left(\frac{X W_Q^{(i)} (X W_K^{(i)})^\top}{\sqrt{d_k}}"
         r" + M\right) X W_V^{(i)}")
st.latex(r"\text{MultiHead}(X) = [\text{head}_1;\dots;\text{head}_h]\, W_O")
c1, c2 = st.columns(2)
n_heads = c1.segmented_control("heads", [1, 2, 4, 8], default=4, key=linked("mh.heads"), bind="query-params") or 4
causal = c2.toggle("causal mask", value=False, key=linked("mh.causal"), bind="query-params",
                   help="A decoder cannot look ahead: each word sees only itself and the words before it.")
if causal:
    st.latex(r"M_{ij} = \begin{cases} 0 & j \le i \\ -\infty & j > i \end{cases}"
             r"\quad\Rightarrow\quad \alpha_{ij} = 0 \text{ for } j > i")

hang = ex.hang_sentence()
tokens = list(hang.tokens)
mask = causal_mask(len(tokens)) if causal else None
mh = multi_head_attention(hang.x, None, hang.w_q, hang.w_k, hang.w_v, hang.w_o, n_heads, mask=mask)
st.caption(f"Word vectors of {hang.x.shape[1]} numbers, {n_heads} head(s) of d_k = {hang.x.shape[1] // n_heads}. "
           "Grey cells marked “masked” get weight exactly 0."
           + (" With 8 heads the cells are too small for their numbers: hover a cell for its weight."
              if n_heads > 4 else ""))
st.plotly_chart(figures.heatmap_panels([head.weights for head in mh.heads], tokens, tokens, mask=mask,
                                       titles=[f"head {h + 1}" for h in range(n_heads)],
                                       per_row=min(n_heads, 2 if n_heads <= 4 else 4), show_values=n_heads <= 4),
                width="stretch", key="mh.heads_chart")

# --- Cross-attention ------------------------------------------------------------------------------------
st.header("Cross-attention: a toy translation")
st.markdown("In an encoder–decoder model, the decoder's queries come from the target sentence and the keys "
            "and values from the encoded source; the two sentences can differ in length. Toy embeddings "
            f"over meaning axes ({', '.join(ex.TRANSLATION_AXES)}). Here W_Q = W_K = s·I, where I is the identity "
            "matrix (it leaves a vector as it is): each query and key is its word's vector times the sharpness s.")
# Two lines, one under the other: one line ran past a phone's edge; two columns cut both at 800 px.
st.latex(r"Q = Y W_Q,\quad K = X W_K,\quad V = X W_V")
st.latex(r"\text{CrossAttn}(Y, X) = \operatorname{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}}\right) V")
with st.expander("Exact value (typed, kept in the link)"):
    sharp = st.number_input("sharpness s", 0.0, 6.0, 3.0, 0.5, key=linked("mh.sharp"), bind="query-params")


values = slider_values(SHARPNESS_VALUES, sharp)
live_sliders([slider("sharpness s", values, sharp, "mh.sharp")],
             [Panel("cross-attention weights, live", "matrix", ex.TARGET_SENTENCE, ex.SOURCE_SENTENCE,
                    cross_attention_frames(values))], key="mh")
st.caption("Drag s: the weights above redraw at every step (precomputed with the same function); the chart "
           "below, with hover and export, follows when you let go.")
cross = toy_translation(sharp)
st.plotly_chart(figures.heatmap(cross.heads[0].weights, ex.SOURCE_SENTENCE, ex.TARGET_SENTENCE,
                                 title=f"Target ({len(ex.TARGET_SENTENCE)} words) attends to source "
                                       f"({len(ex.SOURCE_SENTENCE)} words)",
                                 x_title="source (English, keys)", y_title="target (French, queries)",
                                 colours=figures.WEIGHTS), width="stretch", key="mh.cross")
st.caption("“le” splits its attention between the two “the”: nothing in these toy vectors says which one.")

for_developers("Heads: attention.multi_head_attention on attention.toy.examples.hang_sentence (seeds 003 "
               "and 004); the translation attention.toy.multihead.toy_translation; the drag's frames "
               "attention.toy.live.cross_attention_frames; the questions attention.toy.questions.")
path_links(PAGE)
