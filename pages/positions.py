"""Word order and positions: attention alone ignores order; sinusoidal and rotary positions."""

import pandas as pd
import streamlit as st

from attention import attention_from_embeddings, figures
from attention.toy import examples as ex
from attention.toy.positions import (
    order_demo,
    position_similarity,
    rotary_toy,
    shuffled_order,
    sinusoidal_positions,
    with_positions,
)
from attention.toy.questions import questions_for
from attention.toy.rounding import number
from pages._frame import ensure_app_frame
from pages._kept import linked
from pages._labels import token_labels
from pages._lessons import questions_first
from pages._path import intro, path_links
from pages._prose import for_developers

ensure_app_frame()

st.title("Word order and positions")
PAGE = "pages/positions.py"
intro(PAGE, "“Dog bites man” and “man bites dog” use the same words in another order. Does attention notice "
            "the order? A score compares a query with a key; this page asks what happens to the weights when the "
            "words are shuffled, then shows the two ways transformers add positions: to each word's embedding "
            "(sinusoidal positions, or vectors learned by BERT) or to the queries and keys (rotary positions, as "
            "in Llama and SmolLM2).")
questions_first(questions_for("positions"), PAGE)

# --- 1. Shuffle ---------------------------------------------------------------------------------------------
st.header("1 · Attention alone ignores order")
cat = ex.cat_sentence()
tokens = list(cat.tokens)
c1, c2, c3 = st.columns([1, 1, 2])


def _next_shuffle() -> None:
    st.session_state["pos.shuffle"] = (st.session_state.get("pos.shuffle", 1) % 999) + 1


c1.button("Shuffle", icon=":material/shuffle:", on_click=_next_shuffle, key="pos.shuffle_button",
          help="Another order of the words (each press a new one).")
shuffle = c2.number_input("Shuffle number", 1, 999, 1, key=linked("pos.shuffle"), bind="query-params",
                          help="Each number is one fixed shuffle: a link reopens the same one.")
positions_on = c3.toggle("Add positions", value=False, key=linked("pos.add"), bind="query-params",
                         help="Sinusoidal positions, added by place after shuffling: the first word of the shuffled "
                              "sentence gets position 0's vector.")
perm = shuffled_order(len(tokens), shuffle)
demo = order_demo(tokens, cat.x, cat.w_q, cat.w_k, cat.w_v, perm, positions=positions_on)
shuffled = [tokens[i] for i in demo.perm]
st.markdown(f"Written: **{' '.join(tokens)}** → shuffled: **{' '.join(shuffled)}**  \n"
            "“Cat sat on the mat” with the Step by step page's toy vectors (4 numbers a word; queries and keys "
            "of 3).")
st.plotly_chart(figures.heatmap_panels([demo.weights, demo.weights_unshuffled], tokens, tokens,
                                       titles=["Weights as written", "Shuffled, put back"]),
                width="stretch", key="pos.weights")
m1, m2 = st.columns(2)
m1.metric("Largest change of any weight", number(demo.max_weight_change))
m2.metric("Largest change of any output", number(demo.check.max_abs_diff),
          help="|out(x)[perm] − out(x[perm])|: the written sentence's outputs, shuffled, against the shuffled "
               "sentence's outputs.")
if positions_on:
    st.info("With positions added, the same word gets a different vector in a different slot, so its scores "
            "and weights change: the model can now tell “Cat sat” from “sat Cat”.")
else:
    st.success("Without positions the two matrices are the same, to rounding: each word's weights follow the "
               "word, and the outputs are the written outputs, shuffled the same way.")

# --- 2. Sinusoidal ------------------------------------------------------------------------------------------
st.header("2 · Sinusoidal positions (Vaswani et al. 2017)")
st.latex(r"PE_{(pos,\,2i)} = \sin\!\left(\frac{pos}{10000^{2i/d_{model}}}\right)")  # two lines: one ran off 800 px
st.latex(r"PE_{(pos,\,2i+1)} = \cos\!\left(\frac{pos}{10000^{2i/d_{model}}}\right)")
c1, c2 = st.columns(2)
n_pos = c1.slider("positions", 10, 200, 50, 10, key=linked("pos.n"), bind="query-params")
d_model = c2.slider("d_model", 8, 256, 64, 8, key=linked("pos.d"), bind="query-params",
                    help="How many numbers each position's vector has (the model's width).")
pe = sinusoidal_positions(n_pos, d_model)
left, right = st.columns(2)
left.plotly_chart(figures.heatmap(pe, [str(i) for i in range(d_model)], [str(p) for p in range(n_pos)],
                                   title=f"PE ({n_pos} × {d_model})", x_title="dimension",
                                   y_title="position", value_name="PE", colours=figures.SIGNED, show_values=False,
                                   height=420, ticks=figures.Ticks(y=10)),
                  width="stretch", key="pos.pe")
similarity = position_similarity(n_pos, d_model)
starts = [0, n_pos // 2]
right.plotly_chart(figures.line_chart(list(range(n_pos - starts[-1])),
                                      {f"from position {p}": similarity[p, p:p + n_pos - starts[-1]] for p in starts},
                                      title="PE[p] · PE[p + Δ]", x_title="distance Δ",
                                      y_title="dot product"), width="stretch", key="pos.similarity")
st.markdown(f"Each pair of dimensions is a clock turning at its own speed, so the dot product of two positions "
            f"depends only on their distance: the curve from position {starts[1]} (dashed) lies exactly on the "
            f"curve from position {starts[0]}. Added to the embeddings, the positions change every score:")
trace_without = attention_from_embeddings(cat.x, cat.w_q, cat.w_k, cat.w_v)
trace_with = with_positions(cat.x, cat.w_q, cat.w_k, cat.w_v)
st.plotly_chart(figures.heatmap_panels([trace_without.scaled, trace_with.scaled], tokens, tokens, value_name="score",
                                       titles=["Scores, embeddings", "Embeddings + PE"],
                                       colours=figures.SIGNED),
                width="stretch", key="pos.scores")

# --- 3. Rotary ---------------------------------------------------------------------------------------------
st.header("3 · Rotary positions (RoPE; Su et al. 2021)")
st.markdown("Llama, SmolLM2 and most recent models add nothing to the embeddings. Inside every attention layer, "
            "after the projections, they **rotate q and k** (not v) by an angle proportional to the position. "
            "The score of a rotated pair depends on the angle between them, so on the **difference** of their "
            "positions only.")
st.latex(r"\tilde q_m = R(m\theta)\, q,\qquad \tilde k_n = R(n\theta)\, k")
st.latex(r"\tilde q_m^\top \tilde k_n = q^\top R\big((n - m)\theta\big)\, k")
st.subheader("In two dimensions")
c1, c2, c3 = st.columns(3)
query_position = c1.slider("query position m", 0, 11, 3, key=linked("pos.rope_q"), bind="query-params")
key_position = c2.slider("key position n", 0, 11, 1, key=linked("pos.rope_k"), bind="query-params")
degrees = c3.slider("θ (degrees per position)", 5, 90, 30, 5, key=linked("pos.rope_theta"), bind="query-params")
q_toy, k_toy = (1.0, 0.2), (0.7, 0.6)
toy = rotary_toy(q_toy, k_toy, query_position, key_position, degrees_per_position=degrees)
shifted = rotary_toy(q_toy, k_toy, query_position + 5, key_position + 5, degrees_per_position=degrees)
left, right = st.columns([1, 1])
left.plotly_chart(figures.vector_plane({"q": toy.q, "k": toy.k, f"q at {query_position}": toy.q_rotated,
                                         f"k at {key_position}": toy.k_rotated}, faded=("q", "k"),
                                        title="q, k and rotated"),
                  width="stretch", key="pos.plane")
right.dataframe(pd.DataFrame({
    "positions": ["none", f"({query_position}, {key_position})",
                  f"({query_position + 5}, {key_position + 5}): both 5 later"],
    "score": [toy.unrotated_score, toy.score, shifted.score],
}).style.format({"score": "{:.4f}"}), hide_index=True, key="pos.toy_scores")
right.caption(f"Distance m − n = {toy.distance} (the formula's n − m is the same distance, the other way round): "
              "moving both positions by the same amount leaves the score unchanged; changing the distance changes "
              "it.")

st.subheader("In SmolLM2")
st.caption("SmolLM2 rotates 32 pairs of each 64-dimensional head, pair i by θ_i = 100000^(−2i/64) per position: "
           "pair 0 turns a radian per token, the last pair barely moves over 4,096 tokens.")
if st.toggle("Show one SmolLM2 head (loads the bundled model)", value=False, key=linked("pos.real"),
             bind="query-params"):
    from attention.models import DEFAULT_DECODER, ModelChoice, rotary_base, rotary_view, shown_tokens
    from pages._jobs import attention_or_stop, model_or_stop
    from pages._widgets import among, fit, labelled_key, layer_and_head

    text = st.text_input("Sentence", "The cat sat on the mat because the cat was tired.", key=linked("pos.text"),
                         bind="query-params", max_chars=400)
    smollm2 = ModelChoice(DEFAULT_DECODER)  # SmolLM2's rotary positions, whatever the visit's model
    loaded = model_or_stop(smollm2)
    att = attention_or_stop(smollm2, text)
    base = rotary_base(loaded)
    n = len(att.tokens)
    c1, c2, c3, c4 = st.columns(4)
    focus = fit(n_layers=att.n_layers, n_heads=att.n_heads)  # the visit's layer and head, in SmolLM2
    layer, head = layer_and_head(c1, c2, focus, att.n_layers, att.n_heads, slot="pos", kinds=att.layer_kind)
    labels = token_labels(shown_tokens(att))  # " cat" as "␣cat", as every page labels tokens
    query = c3.selectbox("Query token", range(n), index=n - 1, format_func=labels,
                         key=among(labelled_key("pos.query", att.tokens), range(n)))
    key_tok = c4.selectbox("Key token", range(query + 1), index=min(1, query), format_func=labels,
                           key=among(labelled_key("pos.key", att.tokens), range(query + 1)),
                           help="A decoder's query sees only itself and earlier tokens.")
    view = rotary_view(att, base, layer, head, query, key_tok)
    m1, m2, m3 = st.columns(3)
    m1.metric("scaled score before rotation", f"{view.projected_score:.3f}",
              help="q·k/√d of the projections, before they are turned (the score q·k divided by √d, as on Step by "
                   "step).")
    m2.metric("after rotation", f"{view.rotated_score:.3f}",
              help="The model's own scaled score: q·k/√d of the rotated q and k.")
    m3.metric("distance m − n", f"{view.distance} token{'' if view.distance == 1 else 's'}")
    pairs = [str(i) for i in range(len(view.frequencies))]
    left, right = st.columns(2)
    left.plotly_chart(figures.line_chart(pairs, {"before rotation": view.pair_terms_projected,
                                             "after rotation": view.pair_terms_rotated},
                                     title="Each pair's part of q·k", x_title="pair (fast → slow)",
                                     y_title="its part of q·k", categorical_x=True,
                                     x_hover=[f"pair {i}: θ = {f:.3g} rad/token" for i, f in
                                              zip(range(len(pairs)), view.frequencies, strict=True)]),
                      width="stretch", key="pos.pairs")
    right.plotly_chart(figures.line_chart(view.distances, {"scaled score": view.scores_by_distance},
                                          marker_x=view.distance, marker_label=f"m − n = {view.distance}",
                                          title="The same q, k at distance Δ",
                                          x_title="distance Δ", y_title="scaled score q·k/√d"),
                       width="stretch", key="pos.distance")
    st.caption(f"Base {base:g} from the model's configuration; the captured q and k are the rotated ones, rotated "
               "back by −position to show the projections. The dotted line marks this pair's real distance.")

for_developers("The shuffle is attention.toy.positions.order_demo; sinusoidal positions sinusoidal_positions and "
               "position_similarity; the 2-D rotation rotary_toy; SmolLM2's head attention.models.rotary_view "
               "(seed 004 for the quotation that order is attention's first problem); the questions "
               "attention.toy.questions.")
path_links(PAGE)
