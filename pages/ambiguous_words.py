"""Ambiguous words: one word in two sentences, side by side, in a real model (seeds 000 and 004).

The sentences and the word are the visit's focus (Focus.pair): the toy page sends its sentences here, and a
question about “it” shows the “it” sentences."""


import pandas as pd
import streamlit as st

from attention import figures
from attention.figures import WEIGHTS, named
from attention.focus import VISIBLE_SPACE
from attention.glossary import definition
from attention.models import (
    ModelChoice,
    TokenAt,
    compare_word,
    difference_by_token,
    embedding_positions,
    head_name,
    model_questions_for,
    query_row,
    shown_tokens,
)
from pages._examples import example_pair, pair_boxes, pair_example
from pages._export import chart_config, export_row
from pages._focus import on_page, switch_to, update
from pages._frame import ensure_app_frame
from pages._jobs import attention_or_stop, model_or_stop, result_of
from pages._lessons import predict_then_see
from pages._path import intro, path_links, stop_here
from pages._text import md
from pages._widgets import fit, head_or_mean, layer_input, measure_switch, model_picker, reading_switches

ensure_app_frame()

st.title("Ambiguous words")
intro("pages/ambiguous_words.py", "The toy ambiguity page, in a real model: the same word in two sentences "
      "(“bank” by a river and at a loan office; “it” that is an animal or a street). Where does the word look "
      "in each layer and head, and how far apart do its two vectors end up? A head that looks at the word "
      "that settles the meaning is doing what the toy model was built to do.")
focus = on_page()
c1, c2 = st.columns([1, 2])
pair = pair_example(c1, focus, slot="amb")
with c2:
    name = model_picker(st, focus, slot="amb")
pair_boxes(pair, slot="amb")
s1, s2, word = pair.a, pair.b, pair.word

a, b = attention_or_stop(name, s1), attention_or_stop(name, s2, say_check=False)
try:
    cmp = compare_word(a, b, word)
except ValueError as err:
    st.warning(md(err))
    stop_here()
focus = fit(n_layers=a.n_layers, n_heads=a.n_heads)  # not its tokens: the token followed is in the visit's text
L, H = a.n_layers, a.n_heads
predict_then_see(model_questions_for("ambiguous_words"), {"a": a, "b": b}, shown=name, texts=(s1, s2),
                 example=example_pair)
reading = reading_switches(focus, a, slot="amb", log_scale=False)

st.subheader(f"Where “{md(shown_tokens(a)[cmp.ia])}” looks")
c1, c2, c3 = st.columns([1, 1, 2])
layer = layer_input(c1, focus, L, slot="amb", kinds=a.layer_kind)
head = head_or_mean(c2, focus, H, slot="amb")
measure = measure_switch(c3, focus, slot="amb")
head_choice = ("mean-of-heads" if head is None else f"head-{head + 1}") + ("-norms" if measure == "norms" else "")
cols = st.columns(2)
for col, att, i, tag in zip(cols, (a, b), (cmp.ia, cmp.ib), "AB", strict=True):
    try:
        row = query_row(att, i, layer=layer, head=head, reading=reading, measure=measure)
    except ValueError as err:  # no known W_O: the norms cannot be measured
        st.warning(md(err))
        stop_here()
    shown = (f"L{layer + 1} " + ("heads together" if measure == "norms" else "mean of heads") if head is None
             else head_name(layer, head))  # short: two charts at 800 px
    col.plotly_chart(named(figures.weights_bar(row.col_labels, row.matrix[0], value_name=row.value_name,
                                                y_max=row.zmax, title=f"{tag}, {shown}: “{row.row_labels[0]}”"),
                           layer=layer, head=head, token=row.row_labels[0]), width="stretch", key=f"amb.bar{tag}",
                     config=chart_config(name, f"sentence-{tag}", f"layer-{layer + 1}", head_choice))
    with col:
        export_row(att, row, name, f"sentence-{tag}", f"layer-{layer + 1}", head_choice)
if measure == "norms":
    together = (", for the layer's heads together: the size of the sum of what each head hands over "
                "(‖Σ_h α f_h(x)‖, Model heads' “norm-based”), not the sum of the heads' own bars"
                ) if head is None else ""
    st.caption("Weighted norms: each bar is how much that key hands over to the word (its weight times the size of "
               f"what it passes on, Kobayashi et al. 2020){together}, not a share: the bars do not sum to 1. "
               "The difference and the heads below still read weights."
               + (" “Without sinks” re-reads weights only: the norms are shown as they are." if reading.without_sinks
                  else ""))
if a.architecture == "decoder-only":
    st.caption(f"A decoder reads left to right: “{md(shown_tokens(a)[cmp.ia])}” sees only itself and the tokens "
               "before it, so every token after it gets weight 0 (no bar), in every head. An encoder (MiniLM) sees "
               "both sides.")
if row.reading.words or row.reading.without_sinks:
    st.caption(("Words: the query is the whole word, keys are words (sums over pieces). " if row.reading.words else "")
               + ("Without sinks: each row rescaled to sum to 1 without the first/special tokens and any token "
                  "that holds most rows. " if row.reading.without_sinks else "")
               + "The comparisons below stay on tokens.")
if st.button(f"Follow “{shown_tokens(a)[cmp.ia]}” of sentence A on Model heads", icon=":material/grid_view:",
             key="amb.follow", help="These two sentences are this page's own; the other model pages show the visit's "
                                    "sentence. This makes sentence A that sentence, with the word followed."):
    update(text=s1, query=TokenAt(cmp.ia, a.tokens[cmp.ia]), **({"model": name} if isinstance(name, ModelChoice)
                                                                 else {}))
    switch_to("pages/model_heads.py")

st.subheader("The difference (A − B), per token string")
labels, diff = difference_by_token(cmp, layer, head)
re_read = row.reading.words or row.reading.without_sinks  # the bars above were re-read; this chart is not
st.plotly_chart(figures.weights_bar(labels[:20], diff[:20], title="more attention in A (>0) or in B (<0)"
                                     + (", every token, sinks in" if re_read else ""),
                                     value_name="A − B", y_max=None, highlight=None), width="stretch", key="amb.diff")
if re_read:
    st.caption("This chart and the ones below read the weights as the model gives them, token by token, sinks "
               "included: they can differ from the re-read bars above.")
if any(label.startswith(VISIBLE_SPACE) for label in labels):
    st.caption(f"{VISIBLE_SPACE}: {md(definition(VISIBLE_SPACE))}")

st.subheader("Heads that change most")
st.latex(r"\text{shift}^{(\ell,h)} = \tfrac12 \sum_{t} \big|\alpha^{A}_{t} - \alpha^{B}_{t}\big|")
st.caption("t runs over token strings: a word's weights are summed over its occurrences in each sentence.")
c1, c2 = st.columns([3, 2])
c1.plotly_chart(figures.heatmap(cmp.shift, [str(h + 1) for h in range(H)], [str(l_ + 1) for l_ in range(L)],
                                 x_title="head", y_title="layer", value_name="shift", colours=WEIGHTS,
                                 show_values=False),  # 72 numbers in a narrow column: unreadable; hover has them
                width="stretch", key="amb.shift")
c2.dataframe(pd.DataFrame([{"layer": l_ + 1, "head": h + 1, "shift": s} for l_, h, s in cmp.top_heads(8)])
             .style.format({"shift": "{:.3f}"}), hide_index=True, key="amb.top")

st.subheader(f"How similar are the two “{md(word)}” vectors, layer by layer?")
st.latex(r"\cos(h^{A}_\ell, h^{B}_\ell) = "
         r"\frac{h^{A}_\ell \cdot h^{B}_\ell}{\lVert h^{A}_\ell\rVert\,\lVert h^{B}_\ell\rVert}")
st.plotly_chart(figures.line_chart(range(L + 1), {"cosine similarity": cmp.cosine},
                               x_title="layer (0 = embeddings)", y_title="cosine"),
                width="stretch", key="amb.cosine")
layer_zero = result_of(embedding_positions, "Measuring the embeddings…", model_or_stop(name))  # from the model
st.caption(f"{md(layer_zero.layer_zero())}. Each layer mixes in context through attention, so the senses drift "
           "apart.")

path_links("pages/ambiguous_words.py")
