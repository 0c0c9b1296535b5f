"""The bottleneck problem, and Bahdanau's attention that fixes it: two trained GRUs."""

import pandas as pd
import streamlit as st

from attention import figures
from attention.seq2seq import MAX_LENGTH, load_translators, translate
from attention.toy.questions import questions_for
from attention.toy.rounding import percent
from attention.toy.scoring import FORMULAS
from pages._canvas import canvas_heatmap
from pages._frame import ensure_app_frame
from pages._kept import linked
from pages._lessons import questions_first
from pages._path import intro, path_links, stop_here
from pages._prose import for_developers
from pages._tables import column
from pages._text import md

ensure_app_frame()

NAMES = {"bottleneck": "one context vector (Sutskever et al. 2014)",
         "attentive": "additive attention (Bahdanau et al. 2015)"}
SHORT = {"bottleneck": "one vector", "attentive": "attention"}


@st.cache_resource(show_spinner="Loading the two small models…")
def models():
    """The two trained translators (one context vector, additive attention), loaded once per process."""
    return load_translators()


st.title("The bottleneck, and attention")
PAGE = "pages/bottleneck.py"
intro(PAGE, "Before transformers, translation models read a sentence with an encoder into one summary vector, "
            "the context vector, and wrote the translation from it with a decoder. “The context vector turned "
            "out to be a bottleneck for these types of models. It made it challenging for the models to deal "
            "with long sentences.” Attention was invented to fix that. Here are two small encoder–decoders "
            "built from GRUs, trained to **reverse a sequence of digits** (3 1 4 → 4 1 3), the same except for "
            "one thing: what the decoder reads at each step.")
c1, c2 = st.columns(2)
c1.markdown("**One context vector.** The encoder's final states, squeezed into one vector, are all the decoder "
            "ever sees of the input, at every step.")
c2.markdown("**Additive attention.** At each step the decoder scores every encoder state (one per input digit) "
            "against its own state, and reads their weighted blend: the formulas below, step $t$ and digit $j$.")
st.latex(FORMULAS["additive"].replace("q_i", "s_{t-1}").replace("k_j", "h_j").replace("e_{ij}", "e_{tj}"))
st.latex(r"\alpha_{tj} = \operatorname{softmax}_j(e_{tj}),\qquad c_t = \sum_j \alpha_{tj} h_j")
st.caption("$s_{t-1}$: the decoder's state before step $t$; $h_j$: the encoder's state at input digit $j$; $e_{tj}$: "
           "their score; $\\alpha_{tj}$: its weight after softmax; $c_t$: the blend the decoder reads at step $t$; "
           "$v_a$, $W_1$, $W_2$: weights learned in training.")

try:
    translators = models()
except (FileNotFoundError, KeyError) as err:  # no weights, or weights saved without their training lengths
    st.error(md(err.args[0]))
    stop_here()
shortest, longest = translators.train_lengths  # as training recorded them (attention.seq2seq_record)

questions_first(questions_for("bottleneck"), PAGE)

# --- 1. Accuracy against length ----------------------------------------------------------------------------
st.header("1 · The bottleneck, measured")
accuracy = translators.trained_accuracy
lengths = accuracy["attentive"].lengths
measure = st.segmented_control("Count", ["whole sequences reversed", "digits in the right place"],
                               default="whole sequences reversed", key=linked("bn.measure"), bind="query-params") \
    or "whole sequences reversed"
field = "sequences" if measure.startswith("whole") else "digits"
st.plotly_chart(figures.line_chart(lengths, {NAMES[k]: getattr(accuracy[k], field) * 100 for k in NAMES},
                               title="Accuracy against sequence length", x_title="digits in the sequence",
                               y_title=f"% {measure}", marker_x=longest,
                               marker_label=f"longest trained: {longest}"),
                width="stretch", key="bn.accuracy")
at = {k: dict(zip(lengths.tolist(), accuracy[k].sequences.tolist(), strict=True)) for k in NAMES}
st.caption(f"{accuracy['attentive'].samples} random sequences per length. Both trained on "
           f"{translators.record.lengths_in_words()} (left of the dotted line), same data, same steps, same seed; "
           f"training took {translators.train_seconds['bottleneck']:.0f} s and "
           f"{translators.train_seconds['attentive']:.0f} s on one CPU thread. Sequences reversed exactly, single "
           f"vector vs attention: {percent(at['bottleneck'][10])} vs {percent(at['attentive'][10])} at 10 digits, "
           f"{percent(at['bottleneck'][15])} vs {percent(at['attentive'][15])} at 15, "
           f"{percent(at['bottleneck'][longest])} vs {percent(at['attentive'][longest])} at {longest}, the longest "
           f"seen in training, and {percent(at['bottleneck'][MAX_LENGTH])} vs {percent(at['attentive'][MAX_LENGTH])} "
           f"at {MAX_LENGTH}, longer than any.")

# --- 2. Your sequence ---------------------------------------------------------------------------------------
st.header("2 · Your sequence")
digits = st.text_input(f"Digits (1 to {MAX_LENGTH}; spaces and commas are ignored)",
                       "3 1 4 1 5 9 2 6 5 3 5 8 9 7 9 3 2 3 8 4", key=linked("bn.digits"), bind="query-params",
                       max_chars=200)
try:
    results = {kind: translate(getattr(translators, kind), digits) for kind in NAMES}
except ValueError as err:
    st.warning(md(err))
    stop_here()
source = results["attentive"].source
if not translators.record.trained_on(len(source)):
    st.info(f"{len(source)} digits: outside the lengths seen in training ({translators.record.lengths_in_words()}).")
# The verdict first and the digits last: at 800 px a wide output column pushed "reversed exactly" out of sight.
st.dataframe(pd.DataFrame({
    "model": [SHORT[k] for k in NAMES],
    "reversed exactly": ["yes" if results[k].correct else "no" for k in NAMES],
    "digits right": [f"{results[k].digits_correct} / {len(source)}" for k in NAMES],
    "output": [results[k].output for k in NAMES],  # digits unspaced: spaced, 20 of them ran past 800 px
}), hide_index=True, key="bn.outputs",
    column_config={"model": column("model", 84), "reversed exactly": column("reversed", 70, full="reversed exactly"),
                   "digits right": column("digits right", 84), "output": None})  # the outputs: lines below
st.markdown("  \n".join(f"{SHORT[k].capitalize()} wrote `{results[k].output}`" for k in NAMES)
            + f"  \nExpected: `{results['attentive'].expected}`")

# --- 3. Alignment -------------------------------------------------------------------------------------------
st.header("3 · What the attention model looks at")
t = results["attentive"]
# Labels are the digits alone (a repeated digit keeps its own column): "3: 3", a position before a digit, read
# as one thing said twice.
canvas_heatmap(figures.matrix_canvas(t.alignment, list(t.source), list(t.output), colours=figures.WEIGHTS,
                                     title="Alignment: how much each output step reads each input digit",
                                     x_title="input, in reading order", y_title="output, in writing order",
                                     show_values=len(t.source) <= 10, file_name="alignment",
                                     height=min(760, 120 + 26 * len(t.output))),
               key="bn.alignment")
m1, m2, m3 = st.columns(3)
m1.metric("On the ideal position", f"{t.antidiagonal_mass:.1%}",
          help="Reversal's ideal alignment is the anti-diagonal: step t reads position S − 1 − t, the digit it "
               "writes. The mean over steps of the alignment weight there.")
m2.metric("Within ±1 position", f"{t.near_antidiagonal_mass:.1%}")
m3.metric("Usual offset", f"{t.typical_offset:+d}",
          help="Of the strongest weight, in positions: the most common (position of the largest weight) − "
               "(ideal position) over the steps.")
if t.typical_offset == 0:
    st.caption("The model learned the anti-diagonal from the task alone: at each step it reads the digit it writes.")
else:
    offset, side = abs(t.typical_offset), "right" if t.typical_offset > 0 else "left"
    st.caption(f"The model learned a diagonal from the task alone, but not the ideal one: its strongest weight usually "
               f"sits {offset} position{'' if offset == 1 else 's'} {side} of the digit "
               "it writes. Its encoder states are not single digits: the state of digit $j$ joins a forward GRU that "
               "has read digits 0…$j$ and a backward one that has read $j$…the last, so a neighbour of the digit "
               "carries it too, and training found that state first. The score is the additive one in the formula "
               "above.")

for_developers("The two models are attention.seq2seq (load_translators, translate), trained by "
               "attention.seq2seq_training into attention/seq2seq_weights.npz; the additive score is "
               "attention.toy.scoring's “additive”; the quotation is from seed 004; the questions "
               "attention.toy.questions.")
path_links(PAGE)
