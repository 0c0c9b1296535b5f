"""Predictions and head effects: what the model predicts, how it generates, and which heads matter for it."""

import pandas as pd
import streamlit as st

from attention import figures
from attention.figures import WEIGHTS, Ticks, named
from attention.focus import with_visible_spaces
from attention.models import (
    ABLATIONS,
    DEFAULT_DECODER,
    MAX_NEW_TOKENS,
    ModelChoice,
    agreement,
    attribution_patching,
    default_focus,
    drop_in_words,
    generate,
    head_ablation,
    head_ablation_cosine,
    head_name,
    head_words,
    model_label,
    model_questions_for,
    next_tokens,
    query_row,
    said,
    shown_tokens,
)
from attention.toy import examples as ex
from attention.toy.rounding import number
from pages._clicks import open_head_buttons
from pages._examples import example_prediction, prediction_start, target_and_foil
from pages._export import chart_config, export_row
from pages._focus import changing, following, put, update
from pages._frame import ensure_app_frame
from pages._jobs import result_of
from pages._kept import linked
from pages._labels import label_of, token_labels
from pages._lessons import predict_then_see
from pages._path import intro, path_links, stop_here
from pages._text import md, md_token
from pages._widgets import layer_and_head, query_picker, reading_switches

ensure_app_frame()
LAYER_HEADS = "layer · head"
EXAMPLE_WORD = "pred.example_word"  # session key: an encoder example's word, followed once its sentence is read


def vector_example() -> None:
    """on_change of the encoder's example picker: its sentence becomes the visit's, and its word the token
    followed once the page has read the sentence's tokens."""
    chosen = st.session_state["pred.vector_example"]
    if chosen is not None:
        sentence, word = ex.VECTOR_EXAMPLES[chosen]
        update(text=sentence, query=None)
        st.session_state[EXAMPLE_WORD] = word


def effects_heatmap(values, title: str, key: str, value_name: str = "m falls by", zmax: float | None = None):
    """One number per head (a decoder's: how much m falls without it, exact or estimated; an encoder's: how far its
    removal moves a word), layers down and heads across; `zmax`: a colour scale shared with the chart beside it."""
    st.plotly_chart(figures.layer_head_heatmap(values, title=title, value_name=value_name, zmax=zmax),
                    width="stretch", key=key)


st.title("Predictions and head effects")
intro("pages/predictions.py", "Attention weights say where a head looks, not whether it matters. Here a model "
      "that writes text **predicts** the next token (it gives every possible token a score, its logit, and "
      "softmax turns the scores into probabilities), and then each head is **removed** in turn (an ablation) "
      "to see how much the prediction changes: a head that looks at “Mary” may or may not be the one that makes "
      "the model say “ Mary”.")
focus, name, text, att, loaded, words = prediction_start(page="pages/predictions.py", slot="pred",
                                                         model=DEFAULT_DECODER)
predict_then_see(model_questions_for("predictions"), {"att": att, "tokenizer": loaded.tokenizer}, shown=name,
                 texts=(att.text,), example=example_prediction)
reading = reading_switches(focus, att, slot="pred")
ablation = st.radio("Remove a head by", list(ABLATIONS), format_func=label_of(ABLATIONS), horizontal=True,
                    key="pred.method", help="Its output z_h (its slice of the output projection's input), at every "
                                            "position.")

if att.next_logits is None:  # an encoder: follow one word's vector instead of a next token
    st.info(f"{md(loaded.spec.label)} is an encoder: it has no language-model head and predicts no next token. "
            "Its heads are measured by how far removing each one moves a word's final vector.")
    st.button(f"Switch to {model_label(DEFAULT_DECODER)}, which predicts next tokens", icon=":material/swap_horiz:",
              key="pred.decoder", on_click=changing(model=ModelChoice(DEFAULT_DECODER), query=None))
    st.selectbox("Example for an encoder", list(ex.VECTOR_EXAMPLES), index=None, key="pred.vector_example",
                 placeholder="choose one to fill the sentence and the word", on_change=vector_example)
    if (word := st.session_state.pop(EXAMPLE_WORD, None)) is not None:
        focus = put(focus.with_query(default_focus(att.tokens, word, special=att.special), att.tokens))
    followed = query_picker(st, focus, att, slot="pred", source=name, label="Token to follow")  # the visit's
    st.latex(r"\text{effect}^{(\ell,h)} = 1 - \cos\big(x^{\text{final}}_{w},\ x^{\text{final}}_{w}\,"
             r"\text{without head }(\ell,h)\big)")
    effects = result_of(head_ablation_cosine, "Ablating every head…", loaded, att,
                        followed, ablation=ablation)
    effects_heatmap(effects.effect, f"How far each head's removal moves “{shown_tokens(att)[effects.token]}”",
                    "pred.vector", value_name="1 − cos")
    st.caption("Attribution patching is not shown for this metric: 1 − cos is smallest (0) at the unablated "
               "vector, so its gradient there is zero and a first-order estimate would say 0 for every head. It "
               "needs a metric with a slope, such as a decoder's logit difference.")
    st.dataframe(pd.DataFrame([{"layer": i + 1, "head": h + 1, "1 − cos": e} for i, h, e in effects.ranked(10)])
                 .style.format({"1 − cos": "{:.4f}"}), hide_index=True, key="pred.vector_top")
    path_links("pages/predictions.py")
    stop_here()

# --- 1. The next token ------------------------------------------------------------------------------------
st.header("1 · The next token")
temperature = st.slider("temperature T", 0.1, 3.0, 1.0, 0.1, key=linked("pred.temperature"), bind="query-params")
st.latex(r"p(\text{token}) = \operatorname{softmax}(z / T)_{\text{token}}")
top = next_tokens(att.next_logits, loaded.tokenizer, k=10, temperature=temperature)
shown = [f"“{with_visible_spaces(t)}”" for t in top.tokens]  # a token's space shown: “␣Mary”
st.plotly_chart(figures.weights_bar(shown, top.probabilities, title=f"The 10 most likely next tokens at T = "
                                     f"{temperature:g}", value_name="probability"), width="stretch", key="pred.next")
st.caption(f"The model predicts {shown[0]} with p = {number(top.probabilities[0])}; the tokens outside these "
           f"{len(top.tokens)} together have {top.rest:.2f}. Entropy {top.entropy:.2f} nats (natural-log units: 0 when "
           "one token takes it all). Low T sharpens the distribution, high T flattens it. ␣ marks the space a token "
           "starts with: “␣Paris” and “Paris” are two tokens.")

# --- 2. Generate ------------------------------------------------------------------------------------------
st.header("2 · Generate, one token at a time")
with st.form("pred.generate"):
    g1, g2, g3, g4 = st.columns(4)
    n_new = g1.slider("new tokens", 1, MAX_NEW_TOKENS, 16, key="pred.n_new")
    greedy = g2.radio("choose", ["most likely", "sample"], key="pred.mode") == "most likely"
    g_temp = g3.slider("sampling T", 0.1, 2.0, 0.8, 0.1, key="pred.g_temp", disabled=False)
    seed = g4.number_input("seed", 0, 10_000, 0, key="pred.seed")
    asked = st.form_submit_button("Generate", icon=":material/play_arrow:")
if asked or st.session_state.get("pred.generated"):
    st.session_state["pred.generated"] = True
    gen = result_of(generate, "Generating…", loaded, text,
                    max_new_tokens=n_new, greedy=greedy, temperature=g_temp, seed=seed)
    if gen.truncated:
        st.warning("The prompt was cut to leave room for the new tokens.")
    step = st.slider("step", 1, len(gen.steps), len(gen.steps), key="pred.step") - 1
    s = gen.steps[step]
    done = "".join(f":blue-background[{md_token(x.token)}]" if i == step else md_token(x.token)
                   for i, x in enumerate(gen.steps[:step + 1]))
    st.markdown(f"{md(text)}{done}")
    st.caption(f"Step {step + 1}: reading every token so far (the last one at position {s.position}), the model "
               f"picked “{md(with_visible_spaces(s.token))}” (p = {number(s.probability)}) as the next token"
               + (": its end-of-text token, so it stopped." if gen.stopped == "end of text" and
                  step == len(gen.steps) - 1 else "."))
    c1, c2 = st.columns([1, 2])
    c1.plotly_chart(figures.weights_bar([f"“{with_visible_spaces(t)}”" for t in s.choices.tokens],
                                         s.choices.probabilities,
                                         title="What it chose from", value_name="probability",
                                         highlight=list(s.choices.token_ids).index(s.token_id)
                                         if s.token_id in s.choices.token_ids else None),
                    width="stretch", key="pred.choices")
    keys = list(gen.prompt_tokens) + [x.token for x in gen.steps[:step]]
    L, H = s.rows.shape[:2]
    c2.plotly_chart(figures.heatmap(s.rows.reshape(L * H, -1), keys, [head_name(i, h, spaced=True) for i in range(L)
                                     for h in range(H)], title=f"Where it looked: {len(keys)} keys, one more each "
                                     "step (the KV cache)", x_title="key token", y_title=LAYER_HEADS,
                                     colours=WEIGHTS.logged(reading.log), show_values=False,
                                     height=min(900, 120 + 3 * L * H), ticks=Ticks(x=48, row_groups=H)),
                    width="stretch", key="pred.rows", config=chart_config(name, "generation-step", step + 1))

# --- 3. Target and foil -----------------------------------------------------------------------------------
st.header("3 · Target and foil")
contrast = target_and_foil(att, loaded.tokenizer, words, slot="pred")
st.caption("When m is above 0 the model prefers the target; below 0, the foil. Below, each head is removed in "
           "turn: how much m falls "
           "without it says what the head did. Positive (blue): it supported the target; negative (red): it worked "
           "for the foil.")

# --- 4. Which heads matter --------------------------------------------------------------------------------
st.header("4 · Which heads matter")
estimate = result_of(attribution_patching, "Estimating every head's effect…",
                     loaded, att, contrast, ablation=ablation)
exact_asked = st.button("Remove every head in turn (the exact scan)", icon=":material/science:", key="pred.scan",
                        help="One forward pass per head, batched; a few seconds for SmolLM2's 270 heads.")
exact = None
if exact_asked or st.session_state.get(f"pred.scanned.{name}.{text}.{contrast.typed}.{ablation}"):
    st.session_state[f"pred.scanned.{name}.{text}.{contrast.typed}.{ablation}"] = True
    exact = result_of(head_ablation, "Ablating every head…", loaded, att,
                      contrast, ablation=ablation)
agrees = None if exact is None else agreement(estimate, exact)
c1, c2 = st.columns(2)
with c1:  # its cost beside it
    effects_heatmap(estimate.drop, "Estimate (attribution patching)", "pred.estimate", zmax=agrees and agrees.largest)
with c2:
    if exact is None:
        st.info("The estimate on the left is quick: one run of the model, and one pass back through it that says how "
                "fast m changes with each head's output (a straight-line guess). Run the exact scan to see the true "
                "effect of removing each head, and how well the estimate ranks them.")
    else:
        effects_heatmap(exact.drop, f"Exact: {exact.effect.size} heads, one at a time", "pred.exact",
                        zmax=agrees.largest)
st.latex(r"\widehat{\text{drop}}^{(\ell,h)} = \sum_{\text{pos}} \big(z^{(\ell,h)} - "
         r"z^{(\ell,h)}_{\text{removed}}\big) \cdot \frac{\partial m}{\partial z^{(\ell,h)}}")
ranked = (exact or estimate).ranked(15)
rows = [{"layer": i + 1, "head": h + 1, **({"m falls by (exact)": exact.drop[i, h]} if exact else {}),
         "estimate": estimate.drop[i, h],
         **({"estimate's sign": "wrong" if agrees.opposite[i, h] else "right"} if agrees else {})}
        for i, h, _ in ranked]  # no exact column before the scan ran
if agrees is not None:
    wrong = agrees.opposite_heads()
    shown_wrong = [f"{head_name(i, h)} ({agrees.pair(i, h, flag=False, drop=True)})" for i, h, _, _ in wrong[:3]]
    st.caption(f"How alike the estimate and the exact scan order the heads (Spearman's rank correlation ρ: 1 when "
               f"they rank every head the same, 0 when their orders are unrelated): ρ = {agrees.spearman:.2f}. "
               + (f"The estimate has the wrong sign for {len(wrong)} of {agrees.opposite.size} heads, the largest: "
                  f"{'; '.join(shown_wrong)}." if wrong else "The estimate has the right sign for every head."))
st.dataframe(pd.DataFrame(rows).style.format(precision=3),
             hide_index=True, key="pred.ranked")

# --- 5. A head's pattern ----------------------------------------------------------------------------------
st.header("5 · What a head looks at")
c1, c2 = st.columns(2)
top = ranked[0]  # the head that matters most opens here, until the visitor picks another
focus = following(focus, top[0], top[1])
layer, head = layer_and_head(c1, c2, focus, att.n_layers, att.n_heads, slot="pred", kinds=att.layer_kind)
if (layer, head) != top[:2]:  # a head picked here or on another page: the one that matters most, a click away
    st.button(f"Open {head_name(top[0], top[1])}, the largest {'effect' if exact else 'estimate'}",
              key="pred.top", icon=":material/arrow_upward:",
              on_click=changing(layer=top[0], head=top[1], aggregation="head"))
pattern = query_row(att, len(att.tokens) - 1, layer=layer, head=head, reading=reading)
by_word = pattern.reading.words
last = pattern.row_labels[0] if by_word else token_labels(shown_tokens(att))(len(att.tokens) - 1)
st.plotly_chart(named(figures.weights_bar(pattern.col_labels, pattern.matrix[0],
                                           title=f"{head_words(layer, head).capitalize()}: where the last "
                                           f"{'word' if by_word else 'token'} ({last}) looks"
                                           + (", without sinks" if pattern.reading.without_sinks else "")),
                      layer=layer, head=head), width="stretch", key="pred.pattern",
                config=chart_config(name, f"layer-{layer + 1}", f"head-{head + 1}"))
export_row(att, pattern, name, f"layer-{layer + 1}", f"head-{head + 1}", "last-token")
effect = (f"Without it, {said(agrees, layer, head)}" if agrees else
          f"Without it, {drop_in_words(estimate.drop[layer, head])}, as estimated")
st.caption(f"{effect}. " + (f"The largest {'effect' if exact else 'estimate'} is at "
                            f"{head_words(top[0], top[1])}" + ("" if focus.head_picked else ", opened here") + "."))
open_head_buttons(layer, head, key="pred.open", source=name, text=text)

path_links("pages/predictions.py")
