"""Step by step: self-attention, from the word vectors to the output of one token."""

import pandas as pd
import streamlit as st

from attention import attention_from_embeddings, figures
from attention.toy.answers import SELF_EXAMPLES
from attention.toy.live import QUERY_STEP, QUERY_VALUES, Panel, query_sweeps, slider, step_of, with_query
from attention.toy.questions import questions_for
from pages._frame import ensure_app_frame
from pages._kept import linked
from pages._labels import token_labels
from pages._lessons import questions_first
from pages._live import live_sliders
from pages._path import intro, path_links
from pages._prose import for_developers

ensure_app_frame()

EXAMPLES = SELF_EXAMPLES  # one list with the questions': a question names its example by the same label
STEPS = ["1 · embeddings", "2 · Q, K, V", "3 · scores", "4 · ÷ √d_k", "5 · softmax", "6 · weighted sum"]


@st.cache_data(max_entries=4)
def load_example(name: str):
    """One of the page's examples by its label (the questions name theirs by the same label)."""
    return EXAMPLES[name]()


st.title("Step by step: self-attention")
PAGE = "pages/self_attention.py"
intro(PAGE, "Self-attention lets every word of a sentence look at the other words and take in a mix of what "
            "they mean. Each word's embedding is turned into a query (what it looks for), a key (what it "
            "offers) and a value (what it hands over); six steps then turn them into one new vector per word. "
            "Two examples: “Thinking Machines”, with vectors the size of a real model's, and “Cat sat on the "
            "mat”, small enough to read every number.")
questions_first(questions_for("self_attention"), PAGE)
c1, c2 = st.columns([2, 1])
name = c1.selectbox("Example", list(EXAMPLES), key=linked("self.example"), bind="query-params",
                    help="Thinking Machines: embeddings of 512 numbers (d_model), queries and keys of 64 (d_k). "
                         "Cat sat on the mat: 4 and 3.")
data = load_example(name)
tokens = list(data.tokens)
query_tok = c2.selectbox("Query token", range(len(tokens)), format_func=token_labels(tokens),
                         key=linked("self.query"), bind="query-params")
query_tok = min(query_tok, len(tokens) - 1)
shown = st.select_slider("Show steps up to", options=STEPS, value=STEPS[-1], key=linked("self.step"),
                         bind="query-params")
upto = STEPS.index(shown) + 1

trace = attention_from_embeddings(data.x, data.w_q, data.w_k, data.w_v)
d_k = trace.d_k
i = query_tok
word = tokens[i]


def vectors(title, matrix, labels, value_name="value"):
    """Rows of vectors as a heatmap; numbers written in the cells when there are few."""
    st.plotly_chart(figures.heatmap(matrix, [str(j) for j in range(matrix.shape[1])], labels, title=title,
                                     x_title="dimension", y_title="token", value_name=value_name,
                                     colours=figures.SIGNED),
                    width="stretch", key=f"self.{title}")


st.header(STEPS[0])
st.latex(r"x_i \in \mathbb{R}^{d_{model}}")
vectors(f"Embeddings X ({data.x.shape[0]} × {data.x.shape[1]})", data.x, tokens)

if upto >= 2:
    st.header(STEPS[1])
    st.latex(r"Q = X W_Q,\quad K = X W_K,\quad V = X W_V")
    st.caption(f"W_Q, W_K: {data.w_q.shape[0]} × {d_k}; W_V: {data.w_v.shape[0]} × {data.w_v.shape[1]} "
               "(learned in a real model; fixed here).")
    for label, m in (("Q", trace.q), ("K", trace.k), ("V", trace.v)):
        vectors(f"{label} ({m.shape[0]} × {m.shape[1]})", m, tokens)

if upto >= 3:
    st.header(STEPS[2])
    st.latex(rf"\text{{score}}_{{{i},j}} = q_{{{i}}} \cdot k_j")
    scores = pd.DataFrame({"key": tokens, f"q_{i}·k_j": trace.scores[i]})
    st.dataframe(scores.style.format(precision=3), hide_index=True, key="self.scores")

if upto >= 4:
    st.header(STEPS[3])
    st.latex(rf"\text{{score}} / \sqrt{{d_k}} = \text{{score}} / \sqrt{{{d_k}}}"
             rf" = \text{{score}} \times {trace.scale:.4g}")
    st.dataframe(pd.DataFrame({"key": tokens, "scaled": trace.scaled[i]}).style.format(precision=3),
                 hide_index=True, key="self.scaled")

if upto >= 5:
    st.header(STEPS[4])
    st.latex(r"\alpha_{ij} = \frac{\exp(\text{scaled}_{ij})}{\sum_{l} \exp(\text{scaled}_{il})}")
    c_bar, c_heat = st.columns(2)
    c_bar.plotly_chart(figures.weights_bar(tokens, trace.weights[i], title=f"What “{word}” attends to"),
                       width="stretch", key="self.bar")
    c_heat.plotly_chart(figures.heatmap(trace.weights, tokens, tokens, title="All queries (rows) × keys",
                                         colours=figures.WEIGHTS), width="stretch", key="self.heat")

if upto >= 6:
    st.header(STEPS[5])
    st.latex(rf"z_{{{i}}} = \sum_j \alpha_{{{i}j}} v_j")
    vectors(f"Each value times its weight for “{word}”", trace.weighted_values(i), tokens)
    vectors(f"The output for “{word}”: their sum", trace.output[i:i + 1], [word])

# --- Drag the query --------------------------------------------------------------------------------------
if name.startswith("Cat"):
    st.header("7 · Drag the query and watch")
    st.markdown(f"Change q for “{word}” one number at a time: the scaled scores, the softmax weights and "
                "the output z move while you drag (every step was computed in advance; the browser only looks "
                f"them up). Starting point: q rounded to steps of {QUERY_STEP}.")
    q_keys = [f"self.q{i}.{f}" for f in range(d_k)]
    with st.expander("Exact values (typed, kept in the link)"):
        cols = st.columns(d_k)
        query = [col.number_input(f"q[{f}]", QUERY_VALUES[0], QUERY_VALUES[-1],
                                  QUERY_VALUES[step_of(QUERY_VALUES, trace.q[i, f])], QUERY_STEP, key=linked(key),
                                  bind="query-params", format="%.2f")
                 for f, (col, key) in enumerate(zip(cols, q_keys, strict=True))]
    edited = with_query(data.x, data.w_q, data.w_k, data.w_v, i, query)
    sweeps = query_sweeps(data.x, data.w_q, data.w_k, data.w_v, i, QUERY_VALUES, query=query)
    sliders = [slider(f"q[{f}]", QUERY_VALUES, query[f], key) for f, key in enumerate(q_keys)]
    # a typed coordinate between two steps: the sliders start at the nearest step, the table below is exact
    panels = [Panel("scaled scores q·k/√d_k", "bars", (word,), tokens, sweeps["scaled"][:, :, None, :], signed=True),
              Panel("softmax weights α", "bars", (word,), tokens, sweeps["weights"][:, :, None, :]),
              Panel("output z", "bars", (word,), [str(c) for c in range(data.w_v.shape[1])],
                    sweeps["output"][:, :, None, :], signed=True)]
    live_sliders(sliders, panels, key="self")
    st.caption("Arrow keys, Home and End move a focused slider. The table follows when you let go.")
    st.dataframe(pd.DataFrame({"key": tokens, "scaled": edited.scaled[0], "weight": edited.weights[0]})
                 .style.format(precision=3), hide_index=True, key="self.live_table")

for_developers("The examples are attention.toy.examples.thinking_machines and cat_sentence (from seed 004, "
               "“The Illustrated Transformer”); every step is attention.attention_from_embeddings' trace; the "
               "drag's frames are attention.toy.live.query_sweeps; the questions are attention.toy.questions.")
path_links(PAGE)
