"""Ambiguous words: one word in two sentences, side by side, in a real model (seeds 000 and 004).

The sentences and the word are the visit's focus (Focus.pair): the toy page sends its sentences here, and a
question about “it” shows the “it” sentences."""

import dataclasses
import functools

import pandas as pd
import streamlit as st

from attention.figures import named
from attention.models import Focus, WordPair, compare_word, difference_by_token, query_row
from attention.models import questions_for as model_questions
from attention.toy import examples as ex
from attention.toy import plotting
from attention.toy.plotting import WEIGHTS
from pages._export import chart_config, export_row
from pages._focus import on_change, on_page, show
from pages._frame import ensure_app_frame
from pages._jobs import attention_or_stop
from pages._labels import label_of
from pages._lessons import path_links, predict_then_see
from pages._text import md
from pages._widgets import fit, layer_input, model_picker, reading_switches

ensure_app_frame()
MEAN = "mean of heads"  # the Head picker's first choice: the layer's heads averaged (aggregation "mean")
YOURS = "your own sentences"  # the Example picker's value when the sentences are none of its examples
QUOTED = {**{pair: f"“{pair}”" for pair in ex.AMBIGUOUS_PAIRS}, YOURS: YOURS}  # the Example picker's labels


def example_of(pair: WordPair) -> str:
    """The example whose sentences and word these are, else YOURS."""
    return next((name for name, texts in ex.AMBIGUOUS_PAIRS.items() if WordPair(*texts) == pair), YOURS)


def _pick_example(focus: Focus, name: str) -> Focus:
    return focus if name not in ex.AMBIGUOUS_PAIRS else focus.replace(pair=WordPair(*ex.AMBIGUOUS_PAIRS[name]))


def _type(part: str, focus: Focus, typed: str) -> Focus:
    pair = focus.pair or WordPair(*ex.AMBIGUOUS_PAIRS[next(iter(ex.AMBIGUOUS_PAIRS))])
    return focus.replace(pair=dataclasses.replace(pair, **{part: typed}))


def _pick_head(focus: Focus, choice: str) -> Focus:
    return focus.replace(aggregation="mean") if choice == MEAN else focus.replace(head=int(choice) - 1,
                                                                               aggregation="head")


st.title("Ambiguous words")
focus = on_page()
pair = focus.pair or WordPair(*ex.AMBIGUOUS_PAIRS[next(iter(ex.AMBIGUOUS_PAIRS))])
c1, c2 = st.columns([1, 2])
example = example_of(pair)
key = show("amb.example", example)
c1.selectbox("Example", [*ex.AMBIGUOUS_PAIRS] + ([YOURS] if example == YOURS else []), key=key,
             format_func=label_of(QUOTED), on_change=on_change(key, _pick_example))
with c2:
    name = model_picker(st, focus, slot="amb")
c1, c2, c3 = st.columns([2, 2, 1])
for col, part, label, limit in ((c1, "a", "Sentence A", 2000), (c2, "b", "Sentence B", 2000), (c3, "word", "Word", 40)):
    key = show(f"amb.{part}", getattr(pair, part)[:limit])
    col.text_input(label, key=key, max_chars=limit, on_change=on_change(key, functools.partial(_type, part)))
s1, s2, word = pair.a, pair.b, pair.word

a, b = attention_or_stop(name, s1), attention_or_stop(name, s2, say_check=False)
try:
    cmp = compare_word(a, b, word)
except ValueError as err:
    st.warning(md(err))
    st.stop()
focus = fit(a)
L, H = a.n_layers, a.n_heads
predict_then_see(model_questions("ambiguous_words"), {"a": a, "b": b})
reading = reading_switches(focus, a, slot="amb", log_scale=False)

st.subheader(f"Where “{md(a.tokens[cmp.ia])}” looks")
c1, c2 = st.columns(2)
layer = layer_input(c1, focus, L, slot="amb")
choices = [MEAN] + [str(h + 1) for h in range(H)]
if focus.aggregation not in ("head", "mean"):
    st.caption(f"This page shows one head or the mean of a layer's heads: the mean is shown (another page showed "
               f"“{md(focus.aggregation)}”).")
key = show("amb.head", MEAN if focus.aggregation != "head" else str(focus.head + 1))
head_choice = c2.selectbox("Head", choices, key=key, on_change=on_change(key, _pick_head))
head = None if head_choice == MEAN else int(head_choice) - 1
cols = st.columns(2)
for col, att, i, tag in zip(cols, (a, b), (cmp.ia, cmp.ib), "AB", strict=True):
    row = query_row(att, i, layer=layer, head=head, reading=reading)
    col.plotly_chart(named(plotting.weights_bar(row.col_labels, row.matrix[0], title=f"Sentence {tag}: {row.title}"),
                           layer=layer, head=head, token=row.row_labels[0]), width="stretch", key=f"amb.bar{tag}",
                     config=chart_config(name, f"sentence-{tag}", f"layer-{layer + 1}", head_choice))
    with col:
        export_row(att, row, name, f"sentence-{tag}", f"layer-{layer + 1}", head_choice)
if row.reading.words or row.reading.without_sinks:
    st.caption(("Words: the query is the whole word, keys are words (sums over pieces). " if row.reading.words else "")
               + ("Without sinks: each row rescaled to sum to 1 without the first/special tokens and any token "
                  "that holds most rows. " if row.reading.without_sinks else "")
               + "The comparisons below stay on tokens.")

st.subheader("The difference (A − B), per token string")
labels, diff = difference_by_token(cmp, layer, head)
st.plotly_chart(plotting.weights_bar(labels[:20], diff[:20], title="more attention in A (>0) or in B (<0)",
                                     value_name="A − B", y_max=None, highlight=None), width="stretch", key="amb.diff")

st.subheader("Heads that change most")
st.latex(r"\text{shift}^{(\ell,h)} = \tfrac12 \sum_{t} \big|\alpha^{A}_{t} - \alpha^{B}_{t}\big|")
st.caption("t runs over token strings: a word's weights are summed over its occurrences in each sentence.")
c1, c2 = st.columns([3, 2])
c1.plotly_chart(plotting.heatmap(cmp.shift, [str(h + 1) for h in range(H)], [str(l_ + 1) for l_ in range(L)],
                                 x_title="head", y_title="layer", value_name="shift", colours=WEIGHTS,
                                 show_values=False),  # 72 numbers in a narrow column: unreadable; hover has them
                width="stretch", key="amb.shift")
c2.dataframe(pd.DataFrame([{"layer": l_ + 1, "head": h + 1, "shift": s} for l_, h, s in cmp.top_heads(8)])
             .style.format({"shift": "{:.3f}"}), hide_index=True, key="amb.top")

st.subheader(f"How similar are the two “{md(word)}” vectors, layer by layer?")
st.latex(r"\cos(h^{A}_\ell, h^{B}_\ell) = "
         r"\frac{h^{A}_\ell \cdot h^{B}_\ell}{\lVert h^{A}_\ell\rVert\,\lVert h^{B}_\ell\rVert}")
st.plotly_chart(plotting.lines(range(L + 1), {"cosine similarity": cmp.cosine},
                               x_title="layer (0 = embeddings)", y_title="cosine"),
                width="stretch", key="amb.cosine")
st.caption("Layer 0 is the word's embedding plus its position (identical when the word sits at the same "
           "position in both sentences); each layer mixes in context through attention, so the senses drift apart.")

path_links("pages/ambiguous_words.py")
