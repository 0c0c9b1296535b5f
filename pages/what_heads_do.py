"""What heads do: which parts write the prediction directly, how it forms layer by layer, where the
information enters (activation patching), and which earlier heads a head reads (composition)."""

import pandas as pd
import streamlit as st

from attention import figures
from attention.focus import with_visible_spaces
from attention.models import (
    DEFAULT_DECODER,
    KINDS,
    ROLES,
    SITES,
    ModelChoice,
    activation_patching,
    composition,
    direct_logit_attribution,
    head_ablation,
    head_roles,
    head_words,
    logit_lens,
    model_label,
    model_questions_for,
    why_not,
)
from attention.toy.rounding import number
from pages._examples import example_shares, pick_setter, prediction_start, target_and_foil
from pages._focus import changing, following, on_change, show
from pages._frame import ensure_app_frame
from pages._jobs import (
    attention_or_stop,
    result_of,
    result_or_none,
)
from pages._labels import label_of
from pages._lessons import predict_then_see
from pages._path import intro, path_links, stop_here
from pages._text import md
from pages._widgets import layer_and_head

ensure_app_frame()

def patching_chart(patched, site: str) -> None:
    """Section 3's result: the share of the clean prediction each patched site restores."""
    if site == "residual":
        rows = ["embeddings"] + [f"after layer {i}" for i in range(1, patched.effect.shape[0])]
        fig = figures.heatmap(patched.effect, list(patched.tokens), rows, title="Share of the clean prediction "
                              "restored", x_title="position (clean token)", y_title="residual stream",
                              value_name="effect", colours=figures.SIGNED, show_values=False,
                              height=min(1000, 140 + 20 * len(rows)))
    else:
        fig = figures.layer_head_heatmap(patched.effect, title="Share restored by each head", value_name="effect")
    st.plotly_chart(fig, width="stretch", key="circ.patched")
    st.caption(f"m is {number(patched.clean)} on the clean prompt and {number(patched.corrupt)} on the corrupted one. "
               "1 = this one activation brings the clean prediction back, 0 = it changes nothing.")


st.title("What heads do")
intro("pages/what_heads_do.py", "The last step: a prediction, read part by part. Which heads (and the small networks "
      "between them, the MLPs) **write** it directly into the output; how it **forms** layer by layer (the logit "
      "lens); where the information **enters** (patching a clean run into a corrupted one); and which earlier "
      "heads a head **reads** from, as an induction head does.")
focus, name, text, att, loaded, words = prediction_start(page="pages/what_heads_do.py", slot="circ",
                                                         model=DEFAULT_DECODER)
if att.next_logits is None:  # an encoder: nothing predicted, nothing to read part by part
    st.info(f"{md(model_label(name))} predicts no next token: this page reads a prediction. Its heads' roles are "
            "on the Head atlas.")
    st.button(f"Switch to {model_label(DEFAULT_DECODER)}", icon=":material/swap_horiz:", key="circ.decoder",
              on_click=changing(model=ModelChoice(DEFAULT_DECODER), query=None))
    path_links("pages/what_heads_do.py")
    stop_here()
contrast = target_and_foil(att, loaded.tokenizer, words, slot="circ")
st.caption("When m is above 0 the model prefers the target; below 0, the foil.")
# a family whose heads' writes are normalised (Gemma 3) has no direct shares: said, and the page goes on
no_shares = why_not(loaded, "direct attribution")
shares = None if no_shares else result_of(direct_logit_attribution, "Reading each part's share…", loaded, att, contrast)
if shares is not None:  # asked before the shares are shown
    predict_then_see(model_questions_for("what_heads_do"), {"shares": shares}, shown=name, texts=(text,),
                     example=example_shares)

# --- 1. Who writes the prediction ---------------------------------------------------------------------------
st.header("1 · Who writes it: direct logit attribution")
if shares is None:
    st.info(f":material/block: {md(no_shares)}")
else:
    # Two formulas, one under the other: side by side (in columns too) the first was cut at 800 px.
    st.latex(r"\text{share}(p) = N_{\text{frozen}}(p)\cdot\big(W_U[\text{target}] - W_U[\text{foil}]\big)")
    st.latex(r"\sum_p \text{share}(p) = m")
    st.plotly_chart(figures.layer_head_heatmap(shares.heads, title="Direct share of each head", value_name="share"),
                    width="stretch", key="circ.direct")
if st.button("Compare with each head's total effect (remove every head)" if shares is not None else
             "Measure each head's total effect (remove every head)", icon=":material/science:",
             key="circ.scan") or st.session_state.get(f"circ.scanned.{name}.{text}.{contrast.typed}"):
    st.session_state[f"circ.scanned.{name}.{text}.{contrast.typed}"] = True
    exact = result_of(head_ablation, "Ablating every head…", loaded, att,
                      contrast, ablation="zero")
    st.plotly_chart(figures.layer_head_heatmap(exact.drop, title="Total effect: how much m falls without each head",
                                               value_name="m falls by"), width="stretch", key="circ.total")
elif shares is not None:
    st.info("A head's direct share is what it writes straight into the output. Removing it also removes what "
            "later heads did with it: run the scan to see the total effect below the direct one.")
else:
    st.info("Removing a head measures its total effect: how much m falls without it, through everything later "
            "heads did with what it wrote. Run the scan to see it for every head.")
if shares is not None:
    st.caption(f"The parts add up to {number(shares.total)}; the model's own m is {number(shares.model)}. "
               f"Embeddings {number(shares.embeddings, signed=True)}, all MLPs {number(shares.mlps.sum(), signed=True)}"
               f", all heads {number(shares.heads.sum(), signed=True)}, biases {number(shares.biases, signed=True)}. "
               "Both charts read alike: positive (blue) helps the target. A total effect of the other sign than a "
               "head's direct share means later heads undo what it writes.")
    st.plotly_chart(figures.weights_bar([str(i + 1) for i in range(len(shares.mlps))], shares.mlps,
                                         title="Direct share of each layer's MLP", value_name="share", y_max=None,
                                         highlight=None), width="stretch", key="circ.mlps")

# --- 2. How it forms ---------------------------------------------------------------------------------------
st.header("2 · How it forms: the logit lens")
st.latex(r"\text{lens}_\ell(i) = \operatorname{softmax}\big(W_U\, \mathrm{norm}(x^{(\ell)}_i)\big)")
lens = result_of(logit_lens, "Reading every layer…", loaded, att, target=contrast.target)
show_target = st.toggle(f"Colour by the target's probability (“{md(with_visible_spaces(contrast.target.token))}”)",
                        key="circ.lens_target")  # full width: in half of an 800-px page its label was cut
read = len(lens.tokens)
every = read > figures.LENS_SHOWN and st.toggle(f"Every position ({read})", key="circ.lens_every",
                                                help=f"The last {figures.LENS_SHOWN} positions are shown, each cell "
                                                     "wide enough to name its token; every position names them on "
                                                     "hover only.")
st.plotly_chart(figures.lens_heatmap(lens, target=show_target, last=None if every else figures.LENS_SHOWN),
                width="stretch", key="circ.lens")
last = lens.target_probability[:, -1]
first_layer = next((i for i, p in enumerate(last) if p == last.max()), 0)
shown_positions = read if every or read <= figures.LENS_SHOWN else figures.LENS_SHOWN
st.caption("Each row reads the residual stream after a layer through the final norm and the unembedding; each "
           "cell is the token the model would predict there (named in the cell where it fits, always on hover; ␣ "
           "marks a token's leading space)"
           + ("" if shown_positions == len(att.tokens) else f", at the last {shown_positions} of the text's "
              f"{len(att.tokens)} positions")
           + f". At the last position the target reaches its highest probability, {last.max():.2f}, after layer "
             f"{first_layer}.")

# --- 3. Where the information enters ----------------------------------------------------------------------
st.header("3 · Where it enters: activation patching")
st.latex(r"\text{effect} = \frac{m_{\text{patched}} - m_{\text{corrupt}}}{m_{\text{clean}} - m_{\text{corrupt}}}")
key = show("circ.corrupt", (words.corrupt or text)[:2000])  # the box shows the clean prompt when none is derived
corrupt_text = st.text_input("Corrupted prompt (the same number of tokens)", key=key, max_chars=2000,
                             on_change=on_change(key, pick_setter("corrupt", words)),
                             help="By default the target and the foil swapped, when both are names in the prompt: "
                                  "the model should now prefer the foil.")
if not words.corrupt_picked and words.corrupt is not None:
    st.caption(f"The target and the foil swapped: “{md(contrast.target.token.strip())}” and "
               f"“{md(contrast.foil.token.strip())}” trade places.")
site = st.radio("Patch", list(SITES), format_func=label_of(SITES), horizontal=True, key="circ.site")
if corrupt_text.strip() == text.strip():  # e.g. a prompt without both words to swap: nothing to restore, and
    st.info("The corrupted prompt is the clean one"
            + ("" if words.corrupt_picked else ": the target and the foil are not two names in this prompt to swap")
            + ". Change a word that matters for the prediction above (a name, a country) to see where it "
              "enters.")  # the rest of the page (and the path's end) goes on
elif st.button("Patch every site", icon=":material/healing:", key="circ.patch") or \
        st.session_state.get(f"circ.patched.{name}.{text}.{corrupt_text}.{contrast.typed}.{site}"):
    st.session_state[f"circ.patched.{name}.{text}.{corrupt_text}.{contrast.typed}.{site}"] = True
    corrupt = attention_or_stop(name, corrupt_text, say_check=False)
    # a corrupted prompt of another length: said, and the rest of the page (composition, the path) goes on
    patched = result_or_none(activation_patching, "Patching…", loaded, att, corrupt, contrast, site=site,
                             needs=("head effects", "hook points"))
    if patched is not None:
        patching_chart(patched, site)

# --- 4. Which heads a head reads ---------------------------------------------------------------------------
st.header("4 · Which heads it reads: composition")
roles = result_of(head_roles, "Running the induction probe…", loaded)
*best, best_score = roles.strongest("induction")
st.markdown(f"The strongest induction head here is **{head_words(best[0], best[1])}** (score "
            f"{best_score:.2f} on the probe: random tokens, then the same ones again, where an induction head looks "
            "from each repeated token to the one that followed its first copy). An induction head finds the earlier "
            "occurrence of the current "
            "token through its **keys**: a previous-token head has written into each token's vector which token came "
            "before it, and the induction head's keys read that (“K-composition”, in Elhage et al. 2021's words). "
            "The table below lists the earlier heads each of its queries, keys and values reads most.")
st.button("Read that head", icon=":material/arrow_downward:", key="circ.induction",
          on_click=changing(layer=best[0], head=best[1], aggregation="head"))
c1, c2 = st.columns(2)  # the strongest induction head opens here, until the visitor picks another
layer, head = layer_and_head(c1, c2, following(focus, *best), att.n_layers, att.n_heads, slot="circ",
                             kinds=att.layer_kind)
no_composition = why_not(loaded, "composition")  # q, k and v in one fused projection (GPT-2): said
comp = None if no_composition else composition(loaded, layer, head)
if no_composition:
    st.info(f":material/block: {md(no_composition)}")
if comp is not None and layer == 0:
    st.info("Layer 1 reads no earlier head: choose a later one, or read the induction head above.")
elif comp is not None:
    rows = [{"composition": kind, "layer": lw + 1, "head": hw + 1, "score": score,
             "its role": roles.labels()[lw, hw] or "–"} for kind in KINDS for lw, hw, score in comp.strongest(kind, 3)]
    st.dataframe(pd.DataFrame(rows).style.format({"score": "{:.3f}"}), hide_index=True, key="circ.composition")
    top = comp.strongest("K", 1)[0]
    st.caption(f"{head_words(layer, head).capitalize()} reads {head_words(top[0], top[1])} most through its "
               f"keys ({top[2]:.2f}); that head is {roles.labels()[top[0], top[1]] or 'not labelled'} "
               f"({ROLES['previous_token'][0]} score {roles.previous_token[top[0], top[1]]:.2f}). Scores are from "
               "the weights alone, 0 to 1.")

path_links("pages/what_heads_do.py")
