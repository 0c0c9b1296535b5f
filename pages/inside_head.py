"""Inside one head: the math of a real head for one token, rebuilt from the Q, K, V the model computed."""

import pandas as pd
import streamlit as st

from attention import figures
from attention.figures import SIGNED, matrix_canvas, named, qk_attribution_heatmap
from attention.models import (
    file_stem,
    head_name,
    head_words,
    key_choices,
    model_questions_for,
    part_in_words,
    qk_attribution,
    query_row,
    row_contributions,
    shown_tokens,
)
from attention.toy.live import TEMPERATURE_VALUES, Panel, slider, slider_values, temperature_frames, temperature_sweep
from pages._canvas import canvas_heatmap
from pages._examples import example_result
from pages._export import chart_config, export_row
from pages._focus import on_page
from pages._frame import ensure_app_frame
from pages._jobs import attention_or_stop, cached_own_attention, is_saved, model_or_stop, result_of
from pages._kept import linked
from pages._labels import token_labels
from pages._lessons import predict_then_see
from pages._live import live_sliders
from pages._path import intro, path_links, stop_here
from pages._prose import for_developers, prose
from pages._tables import column
from pages._text import md
from pages._widgets import (
    among,
    fit,
    labelled_key,
    layer_and_head,
    measure_switch,
    query_picker,
    reading_switches,
    sentence_and_model,
)

ensure_app_frame()
SHOWN_KEYS = 24  # above this many keys, the steps show the keys with the largest weights
AUTO_CHECK_TOKENS = 512  # up to this length the model's own weights are fetched without asking

def why_this_key(att, name, t, layer: int, head: int, i: int, tokens, label) -> None:
    """Section 6 or 7: the scaled score split into the parts of the model that wrote its query and its key
    (attention.models.qk_attribution). Drawn only while its expander is open: a lazy expander runs nothing
    closed, and its split costs a pass over the model."""
    prose("A token's vector on its way through the model is the residual stream: a sum to which the embedding, "
          "every earlier head and every earlier MLP add what they write. Each layer norm divides that sum by its "
          "size; fix each of those divisors at what it was on this text, and every step from the stream to q and "
          "to k only multiplies and adds. Then q and k are sums with one term per part that wrote them, and the "
          f"scaled score (step 3: q·k × {t.scale:.4f}) is a sum with one term per pair of parts, one that wrote "
          "the query and one that wrote the key, plus constant terms from the biases. Rows: the parts that wrote "
          "the query; columns: the parts that wrote the key.")
    if is_saved(name):
        st.info("Splitting a scaled score needs the model itself; a saved result holds only Q, K and V.")
        return
    visible, strongest = key_choices(t.weights[0])
    key_picker = labelled_key("inside.key", att.tokens)  # page-local: the key this section explains
    if st.session_state.get(among(key_picker, visible)) is None:
        st.session_state[key_picker] = strongest
    c1, c2 = st.columns(2)
    key = c1.selectbox("Key token", visible, format_func=label, key=key_picker)
    versus = c2.radio("Against", ["nothing: the scaled score itself", "the mean over the keys it sees",
                                  "another key"],
                      key="inside.against", help="Why this key and not the others: the same pairs for this key "
                      "minus those of the mean key, or of a second key.")
    per_head = c1.toggle("One part per head", True, key="inside.per_head",
                         help="On: one part per earlier head. Off: each layer's heads summed into one part.")
    against = {"the mean over the keys it sees": "mean"}.get(versus)
    if versus == "another key":
        against = st.selectbox("Second key", visible, format_func=label,
                               key=among(labelled_key("inside.second", att.tokens), visible),
                               index=visible.index(0) if 0 in visible else 0)
    loaded = model_or_stop(name)
    found = result_of(qk_attribution, "Splitting the scaled score into parts…",
                      loaded, att, layer, head, i, key, against=against)
    score_parts(found if per_head else found.by_layer(), loaded, layer, tokens, against)


def score_parts(found, loaded, layer: int, tokens, against) -> None:
    """The split's sums, its notes, its heatmap and its largest pairs (why_this_key)."""
    c1, c2, c3 = st.columns(3)
    c1.metric("Sum of the parts", f"{found.total:+.4f}", help="Every (query part, key part) pair and the constant "
              "terms.")
    c2.metric("Model's scaled score" if against is None else "Model's difference", f"{found.score:+.4f}",
              help="The model's own scaled score, before softmax, from the q and k its attention received"
              + ("." if against is None else ", minus the same for the key(s) it is set against."))
    c3.metric("Constant terms", f"{found.biases:+.4f}", help="What the biases of the projections to q and k add, "
              "whatever wrote the stream: " + "; ".join(f"{what}: {value:+.4f}" for what, value in found.rest.items()))
    if layer == 0:
        st.caption("In layer 1 only the embeddings have written to the stream: pick a later layer to see which "
                   "heads and MLPs make the query and the key match.")
    if found.rounding:
        st.caption(f"This model runs in {md(loaded.check.dtype if loaded.check else 'half precision')}: its own q "
                   f"and k are rounded to it, while the parts are added in float64, so the sum equals its scaled "
                   f"score to that rounding, not to the last digit: here {found.apart:.2%} apart (its rounding allows "
                   f"up to {found.rounding:.0%}).")
    if found.softcap:
        st.caption(f"This model soft-caps its scaled scores after the sum: softmax reads {found.softcap:g} · "
                   f"tanh(scaled score / {found.softcap:g}).")
    st.plotly_chart(qk_attribution_heatmap(found, tokens), width="stretch", key="inside.qk")
    st.caption("The parts that count most on each side, the others summed into “other parts”; hover a cell for "
               "its two parts and its value. The pairs that count most, whichever parts they are, are listed below.")
    st.markdown("**The largest pairs**")
    st.markdown("\n".join(f"- the query from {md(part_in_words(a))} × the key from {md(part_in_words(b))}: "
                           f"**{value:+.2f}**" for a, b, value in found.largest(5)))
    prose("To try: in SmolLM2, on a text that repeats itself (random tokens, then the same tokens again), the "
          "induction heads (L19H7, L18H6, L18H5, L18H4) each win on one pair: the query from layer 1's MLP, which "
          "says which token this is, times the key from L17H1, a previous-token head, which wrote into each key "
          "the token before it. The key that matches is the one right after an earlier copy of the query's token: "
          "how a model continues a pattern it has seen.")


st.title("Inside one head")
intro("pages/inside_head.py", "The toy pages' arithmetic, in a real head: one query token's query vector, each "
      "key, their dot products, the scaling, softmax, and the output, with the model's own numbers. Pick the "
      "layer, head and query token; everything below is what that head computed for your sentence.")
focus = on_page()
name, text = sentence_and_model(focus, slot="inside")
att = attention_or_stop(name, text)
focus = fit(att)
L, H, n = att.n_layers, att.n_heads, len(att.tokens)
tokens = shown_tokens(att)  # as every page labels them: " bank" as "␣bank"
predict_then_see(model_questions_for("inside_head"), {"att": att}, shown=name, texts=(att.text,),
                 example=example_result)

reading = reading_switches(focus, att, slot="inside", log_scale=False)
c1, c2, c3 = st.columns(3)
layer, head = layer_and_head(c1, c2, focus, L, H, slot="inside", kinds=att.layer_kind)
if focus.aggregation not in ("head", "head_norm"):
    st.caption(f"This page follows one head: {head_words(layer, head)} (another page showed the layer's "
               "heads together).")
label = token_labels(tokens)
i = query_picker(c3, focus, att, slot="inside", label="Query token", source=name)
lh = head_name(layer, head)  # every chart's title names the head and the token it shows
try:
    t = att.head_trace(layer, head, query=i)  # one query row: q (1, d), weights (1, n)
except ValueError as err:
    st.warning(md(err))
    stop_here()
d = t.d_k
word = tokens[i]
shown = t.strongest_keys(0, SHOWN_KEYS) if n > 2 * SHOWN_KEYS else range(n)
about = f"{head_words(layer, head).capitalize()}: d_k = {d}, scale = {t.scale:.4f}. Recomputed from the"
keys = [label(j) if n > 2 * SHOWN_KEYS else tokens[j] for j in shown]

own = None
if is_saved(name):  # no model to check against: the weights are as they were saved
    st.caption(f"{about} saved Q, K, V.")
elif n <= AUTO_CHECK_TOKENS or st.button(f"Check layer {layer + 1} against the model's own attention weights (runs "
                                       f"the model once more over {n:,} tokens)", key="inside.check"):
    with st.spinner("Running the model with this layer's own eager attention…"):
        checked = model_or_stop(name)
        own = cached_own_attention(name, text, layer, checked, att)  # (H, n, n)
    gap = att.rebuild_gap(layer, head, own)
    st.caption(f"{about} captured Q, K, V; largest difference from the model's own attention weights over the "
               f"whole head, fed the same inputs: {checked.check.stated(gap) if checked.check else f'{gap:.1e}'}.")
else:
    st.caption(f"{about} captured Q, K, V.")
if n > 2 * SHOWN_KEYS:
    st.info(f"{n:,} keys: the steps below show the {SHOWN_KEYS} with the largest weights for “{md(word)}”, in "
            "position order (the labels give each one's position).")

st.header("1 · the query and the keys")
st.latex(rf"q_{{{i}}} = x_{{{i}}} W_Q^{{(h)}} \in \mathbb{{R}}^{{{d}}},\qquad k_j = x_j W_K^{{(h)}}")
dims = [str(j + 1) for j in range(d)]  # from 1, as the formulas count them (c = 1 … d)


def vectors(matrix, rows, title, key, y_title="key token", value_name="value", height=None):
    """Rows of d-dimensional vectors, diverging colours centred on 0; the title names the head and the query."""
    canvas_heatmap(matrix_canvas(matrix, dims, rows, title=f"{lh}, “{word}”: {title}", x_title="dimension",
                                 y_title=y_title, value_name=value_name, colours=SIGNED, height=height,
                                 file_name=file_stem(name, f"layer-{layer + 1}", f"head-{head + 1}", key[7:]),
                                 meta=figures.focus_meta(layer=layer, head=head, token=word)), key=key)


vectors(t.q, [word], "its q", "inside.q", y_title="query token", height=170)
vectors(t.k[shown], keys, "k for every token" if n <= 2 * SHOWN_KEYS else "k for the keys shown", "inside.k")

st.header("2 · q × k, element by element")
st.latex(rf"q_{{{i}}} \cdot k_j = \sum_{{c=1}}^{{{d}}} q_{{{i},c}}\, k_{{j,c}}")
vectors(t.score_terms(0)[shown], keys, "q × k per dimension (a row sums to q·k)", "inside.products",
        value_name="product")

st.header("3 · scores, scaling, softmax")
# A line each: side by side, in three columns, the third ran off an 800 px screen.
st.latex(rf"""\begin{{aligned}} s_j &= q_{{{i}}} \cdot k_j \\ \tilde s_j &= s_j \cdot {t.scale:.4f} \\
         \alpha_j &= \operatorname{{softmax}}(\tilde s)_j \end{{aligned}}""")
if t.mask is not None:
    st.caption("Masked keys (future tokens in a decoder) get −∞ before the softmax, so their weight is exactly 0.")
# the toy pages' names (Lookup, Step by step): the score is q·k, the scaled score q·k × scale, then softmax
columns = {"key": keys, "score q·k": t.scores[0, shown], "scaled score": t.scaled[0, shown],
           "softmax weight": t.weights[0, shown]}
if own is not None:
    columns["model's own weight"] = own[head, i, shown]
st.dataframe(pd.DataFrame(columns), hide_index=True, key="inside.table",
             column_config={"key": column("key", 76), "score q·k": column("q·k", 66, full="score q·k", digits=4),
                            "scaled score": column("scaled", 66, full="scaled score", digits=4),
                            "softmax weight": column("weight", 66, full="softmax weight", digits=4),
                            "model's own weight": column("model's", 66, full="the model's own weight", digits=4)})


def pick_key() -> None:
    """on_select of the weights: the clicked key becomes "why this key"'s key."""
    points = st.session_state["inside.bar"]["selection"]["points"]
    if points:
        st.session_state[labelled_key("inside.key", att.tokens)] = int(shown[points[0]["point_index"]])


st.plotly_chart(named(figures.weights_bar(keys, t.weights[0, shown], title=f"{lh}: what “{word}” attends to"),
                      layer=layer, head=head, token=word),
                width="stretch", key="inside.bar", on_select=pick_key, selection_mode="points")
st.caption("Click a bar: “why this key”, below, splits that key's scaled score into the parts of the model that "
           "made it.")

st.subheader("Softmax temperature, live")
st.latex(r"\alpha_j(T) = \operatorname{softmax}(\tilde s / T)_j")
with st.expander("Exact value (typed, kept in the link)"):
    temperature = st.number_input("temperature T", 0.1, 5.0, 1.0, 0.1, key=linked("inside.temperature"),
                                  bind="query-params", format="%.1f")


temperatures = slider_values(TEMPERATURE_VALUES, temperature)
live_sliders([slider("temperature T", temperatures, temperature, "inside.temperature")],
             [Panel(f"What “{word}” attends to at temperature T", "bars", (word,), keys,
                    temperature_frames(t.scaled[0, shown], temperatures))], key="inside")
at_t = temperature_sweep(t.scaled[0, shown], [temperature])[0]
st.caption(f"T = 1 is the softmax of the model's own scaled scores. Drag T: below 1 the largest takes over, above 1 "
           f"the weights even out (precomputed at every step). At T = {temperature:.1f} the largest weight is "
           f"{at_t.max():.3f}.")

st.header("4 · weighted values and the output")
st.latex(rf"z_{{{i}}} = \sum_j \alpha_j v_j")
vectors(t.weighted_values(0)[shown], keys, "each value × its weight", "inside.weighted", y_title="value token")
vectors(t.output, [word], "z, this head's output", "inside.output", y_title="", height=170)
if n > 2 * SHOWN_KEYS:
    st.caption(f"z sums each value times its weight over all {n:,} keys, not only the {SHOWN_KEYS} shown.")

st.header("5 · what each key hands over")
st.latex(r"\lVert \alpha_j\, v_j W_O^{(h)} \rVert = \alpha_j\, \lVert v_j W_O^{(h)} \rVert")
prose(f"A weight says how much of its attention “{md(word)}” gives each key. What reaches the head's output from a "
      "key is its value vector times the head's output matrix W_O, scaled by the weight: a key can get much weight "
      "and hand over little when its vector is short (Kobayashi et al. 2020, “Attention is Not Only a Weight”). "
      "Multiply the α column by the ‖v W_O‖ column: you get the α·‖v W_O‖ column (up to the rounding of the digits "
      "shown). ‖v W_O‖ is the length of that vector.")
try:
    given = row_contributions(att, layer, head, i)
except ValueError as err:  # a saved result without W_O, or a family whose W_O is unknown
    st.info(md(err))
else:
    c1, c2 = st.columns([2, 1])
    measure = measure_switch(c1, focus, slot="inside")
    st.dataframe(pd.DataFrame({"key": keys, "weight α": given.weights[shown], "‖v W_O‖": given.value_norms[shown],
                               "α·‖v W_O‖": given.weighted[shown], "share": given.shares[shown]}),
                 hide_index=True, key="inside.norms",
                 column_config={"key": column("key", 76), "weight α": column("α", 60, full="softmax weight α",
                                                                              digits=4),
                                "‖v W_O‖": column("‖v W_O‖", 66, full="length of what the key hands over with all "
                                                  "of the weight", digits=3),
                                "α·‖v W_O‖": column("α·‖v W_O‖", 70, full="weight × length: what it hands over",
                                                    digits=4),
                                "share": column("share", 60, full="share of the sum of α·‖v W_O‖", digits=3)})
    norms = measure == "norms"
    values = given.weighted if norms else given.weights
    st.plotly_chart(named(figures.weights_bar(keys, values[shown], value_name="α·‖v W_O‖" if norms else "weight",
                                              y_max=None if norms else 1.0,
                                              title=f"{lh}: what “{word}” takes from each key" if norms else
                                              f"{lh}: what “{word}” attends to"), layer=layer, head=head, token=word),
                    width="stretch", key="inside.norm_bar")
    top = given.strongest
    st.caption(f"The key with the most weight, “{md(tokens[top])}”, gets {given.weights[top]:.0%} of the weight and "
               f"makes {given.shares[top]:.0%} of what the head hands over (the share column)."
               + (" Read by weighted norms, as the switch says: it holds on the other pages that read a row."
                  if norms else ""))

row = query_row(att, i, layer=layer, head=head, reading=reading)
if row.reading.words or row.reading.without_sinks:
    st.header("6 · the same row, re-read")
    notes = []
    if row.reading.without_sinks:
        gone = ", ".join(f"“{md(token)}”" for token in row.sinks)
        notes.append(f"Without this head's sinks ({gone}): their weight removed, the rest rescaled to sum to 1.")
    if row.reading.words:
        notes.append("In words: the query is the whole word (the mean of its pieces' rows); each key word gets the "
                     "sum over its pieces.")
    st.caption(" ".join(notes))
    st.plotly_chart(named(figures.weights_bar(row.col_labels, row.matrix[0], title=row.title), layer=layer, head=head),
                    width="stretch", key="inside.reread",
                    config=chart_config(name, f"layer-{layer + 1}", f"head-{head + 1}", "row"))
export_row(att, row, name, f"layer-{layer + 1}", f"head-{head + 1}", "row")

section = 7 if row.reading.words or row.reading.without_sinks else 6
st.header(f"{section} · For researchers: why this key")
st.caption("Where this score's query and key come from, part by part of the model: the residual stream, layer norms "
           "and MLPs, ideas the path meets later (What heads do). Open it when you want the whole story.")
why = st.expander("Why this key: where q and k come from", icon=":material/science:", key=linked("inside.why"),
                  on_change="rerun", bind="query-params")
if why.open:
    with why:
        why_this_key(att, name, t, layer, head, i, tokens, label)

for_developers("The two-head circuit above is the induction circuit Olsson and colleagues described in 2022. "
               "The steps are attention.models.query_row and the head's q, k and v as captured "
               "(attention.models.recorded.views); why this key is attention.models.qk_attribution, and "
               "tests/test_qk_attribution.py checks the induction heads' pair above.")
path_links("pages/inside_head.py")
