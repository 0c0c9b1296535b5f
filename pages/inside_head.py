"""Inside one head: the math of a real head for one token, rebuilt from the Q, K, V the model computed."""

import pandas as pd
import streamlit as st

from attention import plotting
from attention.models import attention_row
from attention.models.tokens import default_focus
from pages._frame import ensure_app_frame
from pages._models import attention_or_stop, sentence_and_model, token_label
from pages._text import md

ensure_app_frame()

st.title("Inside one head")
name, text = sentence_and_model()
att = attention_or_stop(name, text)
L, H, n = att.n_layers, att.n_heads, len(att.tokens)

c1, c2, c3 = st.columns(3)
layer = min(c1.number_input("Layer", 1, L, 1, key="layer", bind="query-params"), L) - 1
head = min(c2.number_input("Head", 1, H, 1, key="head", bind="query-params"), H) - 1
i = c3.selectbox("Query token", range(n), index=default_focus(att.tokens), format_func=lambda j: token_label(att, j),
                 key="focus", bind="query-params")
i = min(i, n - 1)
try:
    t = att.head_trace(layer, head)
    gap = att.rebuild_gap(layer, head)
except ValueError as err:
    st.warning(md(err))
    st.stop()
d = t.d_k
word = att.tokens[i]
st.caption(f"Layer {layer + 1}, head {head + 1}: d_k = {d}, scale = {t.scale:.4f}. Recomputed from the captured "
           f"Q, K, V; largest difference from the model's own attention weights: {gap:.1e}.")

st.header("1 · the query and the keys")
st.latex(rf"q_{{{i}}} = x_{{{i}}} W_Q^{{(h)}} \in \mathbb{{R}}^{{{d}}},\qquad k_j = x_j W_K^{{(h)}}")
dims = [str(j) for j in range(d)]


def vectors(matrix, rows, title, key, y_title="key token", value_name="value", height=None):
    """Rows of d-dimensional vectors, diverging colours centred on 0."""
    fig = plotting.heatmap(matrix, dims, rows, title=title, x_title="dimension", y_title=y_title,
                           value_name=value_name, colorscale=plotting.SIGNED_SCALE, zmid_zero=True, height=height,
                           max_tick_labels=16)
    st.plotly_chart(fig, width="stretch", key=key)


vectors(t.q[i:i + 1], [word], f"q for “{word}”", "inside.q", y_title="", height=170)
vectors(t.k, att.tokens, "k for every token", "inside.k")

st.header("2 · q × k, element by element")
st.latex(rf"q_{{{i}}} \cdot k_j = \sum_{{c=1}}^{{{d}}} q_{{{i},c}}\, k_{{j,c}}")
vectors(t.score_terms(i), att.tokens, "q ⊙ k_j (each row sums to the score)", "inside.products", value_name="product")

st.header("3 · scores, scaling, softmax")
c1, c2, c3 = st.columns(3)  # one formula per column: on one line they ran off an 800 px screen
c1.latex(rf"s_j = q_{{{i}}} \cdot k_j")
c2.latex(rf"\tilde s_j = s_j \cdot {t.scale:.4f}")
c3.latex(r"\alpha_j = \operatorname{softmax}(\tilde s)_j")
if t.mask is not None:
    st.caption("Masked keys (future tokens in a decoder) get −∞ before the softmax, so their weight is exactly 0.")
table = pd.DataFrame({"key": att.tokens, "q·k": t.scores[i], "scaled": t.scaled[i], "softmax weight": t.weights[i],
                      "model's own weight": attention_row(att, i, layer=layer, head=head)})
st.dataframe(table.style.format(precision=4), hide_index=True, key="inside.table")
st.plotly_chart(plotting.weights_bar(att.tokens, t.weights[i], title=f"What “{word}” attends to"), width="stretch",
                key="inside.bar")

st.header("4 · weighted values and the output")
st.latex(rf"z_{{{i}}} = \sum_j \alpha_j v_j")
vectors(t.weighted_values(i), att.tokens, "α_j · v_j", "inside.weighted", y_title="value token")
vectors(t.output[i:i + 1], [word], f"z: this head's output for “{word}”", "inside.output", y_title="", height=170)
