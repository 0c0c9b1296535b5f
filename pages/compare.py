"""Compare two models: one text read by two models (or one model in two precisions), head by head."""

import streamlit as st

from attention import figures
from attention.focus import VISIBLE_SPACE, with_visible_spaces
from attention.glossary import definition
from attention.models import (
    COMPARISONS,
    DEFAULT_DECODER,
    HEAD_MEASURES,
    MAX_TEXT_CHARS,
    ROLES,
    ModelChoice,
    compare_results,
    contrast,
    direct_logit_attribution,
    head_ablation,
    head_change,
    head_name,
    head_pair,
    head_roles,
    load_comparison,
    model_label,
    next_tokens,
    own_strongest,
)
from pages._clicks import head_opener, picked_head
from pages._examples import token_setter
from pages._export import chart_config, comparison_button
from pages._focus import changing, following, on_change, on_page, setting, show, update
from pages._frame import ensure_app_frame
from pages._jobs import attention_or_stop, model_or_stop, result_of, result_or_none
from pages._labels import label_of
from pages._path import intro, path_links
from pages._text import md
from pages._widgets import DEFAULT_TEXT, fit, layer_and_head, model_picker

OPENED = "cmp.opened"  # session key: a comparison opened from its file (a SavedComparison), shown instead

ensure_app_frame()

st.title("Compare two models")
intro("pages/compare.py", "Fine-tuning, quantization, a new checkpoint or another model: what did it do to the heads? "
      "Two models read the same text, and each head of A is compared with its counterpart in B by the Jensen–Shannon "
      "divergence of their weight rows: 0 bits for the same row, 1 bit for rows with no key in common. One model in "
      "two precisions reads the same tokens, so each head meets the same head. Two models with other tokenizers "
      "are compared on the text's words, and each head of A meets the head of B nearest to it.")


def close_file() -> None:
    """on_click of the opened comparison's Close: the page goes back to running the two models."""
    st.session_state.pop(OPENED, None)


focus = on_page()
opened = st.session_state.get(OPENED)
with st.expander("Open a saved comparison (no model needed)", expanded=opened is not None):
    file = st.file_uploader("Comparison file (.npz)", type=["npz"], key=f"cmp.file.{id(opened)}",
                            help="What “Save this comparison” downloads: both results and every head's distance.")
    if file is not None:
        try:
            opened = st.session_state[OPENED] = load_comparison(file.getvalue())
        except ValueError as err:
            st.error(f"**{md(file.name)} cannot be opened.** {md(err)}")
    if opened is not None:
        st.button("Close it and run the models", key="cmp.close", on_click=close_file)

if opened is not None:
    att_a, att_b, cmp = opened.a, opened.b, opened.comparison
    label_a, label_b = opened.label_a, opened.label_b
    st.caption(f"Opened from a file: A is {md(label_a)}, B is {md(label_b)}, on “{md(att_a.text[:200])}”. The "
               "weights are as they were saved.")
else:
    row = st.container(horizontal=True, wrap=True)
    row.markdown("Try:")
    for preset, (a, b) in COMPARISONS.items():
        row.button(preset, key=f"cmp.preset.{preset}", on_click=changing(model=a, other=b, saved=None))
    text = focus.text if focus.text is not None else DEFAULT_TEXT
    key = show("cmp.text", text[:MAX_TEXT_CHARS])
    st.text_area("Sentence", key=key, max_chars=MAX_TEXT_CHARS, height=80, on_change=on_change(key, setting("text")),
                 help="Both models read it. Two tokenizers are compared on its words, so it needs words both can read.")
    c1, c2 = st.columns(2)
    a = model_picker(c1, focus, slot="cmp.a", default=DEFAULT_DECODER, which=" A")
    c1.caption("A is the visit's model: the one Model heads and the other model pages show.")
    if focus.other is None:  # the page's own B: model A in bfloat16
        focus = update(other=ModelChoice(a.name, "bfloat16"))
    b = model_picker(c2, focus, slot="cmp.b", default=DEFAULT_DECODER, field="other", which=" B")
    c2.caption("B is this page's own.")
    label_a, label_b = model_label(a), model_label(b)
    with c1:
        att_a = attention_or_stop(a, text)
    with c2:
        att_b = attention_or_stop(b, text)
    if a == b:
        st.info("A and B are the same model in the same precision: every distance below is 0. Pick another model "
                "or precision for B, or one of the pairs above.")
    cmp = result_of(compare_results, "Comparing every head…", att_a, att_b)

focus = fit(att_a)
L, H = att_a.n_layers, att_a.n_heads
if cmp.words:
    st.caption(f"Compared on {len(cmp.labels)} words (special tokens left out, each row rescaled to 1): A has "
               f"{L} × {H} heads, B {att_b.n_layers} × {att_b.n_heads}; each head of A is matched to the head of B "
               "nearest to it.")
else:
    st.caption(f"Compared on the same {len(cmp.labels):,} tokens, head by head: {L} layers × {H} heads.")

st.subheader("Which heads changed most")
ranked = cmp.largest(10)
table_key = f"cmp.ranked.{focus.layer}.{focus.head}"  # a new table once another head is open: no stale tick
focus = picked_head(table_key, [r[:2] for r in ranked])  # a row picked in the table drawn last run
focus = following(focus, *ranked[0][:2])  # else the head that moved most, outlined and opened below
st.plotly_chart(figures.comparison(cmp, clickable=True, open_head=(focus.layer, focus.head)), width="stretch",
                key="cmp.map", on_select=head_opener("cmp.map", first=1), selection_mode="points",
                config=chart_config("compare", label_a, "vs", label_b))
st.caption("Each cell: a head of A, coloured by its distance from " + ("its nearest head of B on words" if cmp.words
           else "the same head of B") + " (Jensen–Shannon divergence, bits). Click a head to open it below beside "
           "its counterpart; the open head is outlined in red.")
table = [{"head of A": head_name(layer, head), "JSD (bits)": value,
          **({"nearest in B": head_name(*cmp.match[layer, head])} if cmp.words else {})}
         for layer, head, value in ranked]
st.dataframe(table, key=table_key, hide_index=True, on_select="rerun", selection_mode="single-row",
             column_config={"JSD (bits)": st.column_config.NumberColumn(format="%.3g")})
st.caption("The 10 heads that moved most. Tick a row to open it below.")

st.subheader("One head of A beside B's")
c1, c2 = st.columns(2)
top_layer, top_head, _ = ranked[0]
layer, head = layer_and_head(c1, c2, focus, L, H, slot="cmp", kinds=att_a.layer_kind)
if (layer, head) != (top_layer, top_head):
    st.button(f"Open {head_name(top_layer, top_head)}, the head that moved most", key="cmp.top",
              on_click=changing(layer=top_layer, head=top_head, aggregation="head"))
pair = head_pair(att_a, att_b, cmp, layer, head)
counterpart = f"{head_name(pair.b_layer, pair.b_head)}, its nearest head on words" if cmp.words else "the same head"
st.markdown(f"**{head_name(layer, head)}** of A against {counterpart} of B: **{pair.distance:.3g} bits** on average "
            f"over its {len(pair.labels):,} query rows.")
st.plotly_chart(figures.named(figures.pair(pair), layer=layer, head=head), width="stretch", key="cmp.pair",
                config=chart_config("compare", f"layer-{layer + 1}", f"head-{head + 1}"))
st.caption(f"A: {md(label_a)}. B: {md(label_b)}" + (", on words" if cmp.words else "") + ". On the right, B − A: "
           "blue where B gives more weight, red less. Hover a cell for its query, key and value.")
st.plotly_chart(figures.row_distance(pair), width="stretch", key="cmp.rows",
                config=chart_config("compare", f"layer-{layer + 1}", f"head-{head + 1}", "rows"))

comparison_button(att_a, att_b, cmp, label_a, label_b)

st.subheader("What the heads do, in A and B")


values_a = values_b = None
if opened is not None:
    st.info("What heads do is measured by running each model again: close the file (above) to measure it.")
else:
    beside = ("each model's own strongest heads side by side" if cmp.words
              else "each head of A beside the same head of B")
    measure = st.segmented_control("Measure in both", list(HEAD_MEASURES), format_func=label_of(HEAD_MEASURES),
                                   key="cmp.measure", help=f"Each measure runs both models again: {beside}.")
    if measure is None:
        st.caption(f"Pick a measure above: {beside}.")
    else:
        st.caption(HEAD_MEASURES[measure][1])
        loaded_a, loaded_b = model_or_stop(a), model_or_stop(b)
        if measure == "roles":
            roles_a = result_or_none(head_roles, f"Running the induction probe on {label_a}…", loaded_a,
                                     needs=("roles",))
            roles_b = result_or_none(head_roles, f"Running the induction probe on {label_b}…", loaded_b,
                                     needs=("roles",))
            role = st.segmented_control("Role", list(ROLES), default="induction", format_func=label_of(ROLES),
                                        key="cmp.role") or "induction"
            if roles_a is not None and roles_b is not None:
                st.caption(f"{ROLES[role][1]} R is the number of random tokens the probe repeats ({roles_a.repeat}).")
                values_a, values_b = getattr(roles_a, role), getattr(roles_b, role)
                what = f"{ROLES[role][0]} score"
        elif att_a.next_logits is None or att_b.next_logits is None:
            st.info("This measure reads the next token's logits: both models must predict the next token (decoders "
                    "such as SmolLM2 and Gemma 3; MiniLM does not).")
        else:
            top = next_tokens(att_a.next_logits, loaded_a.tokenizer, k=2).tokens  # A's own two likeliest
            c1, c2 = st.columns(2)
            held = focus.picks_hold()  # a target or foil picked for another text (on Predictions) is not this one's
            target = focus.target if held and focus.target is not None else top[0]
            foil = focus.foil if held and focus.foil is not None else top[1]
            key = show("cmp.target", with_visible_spaces(target))
            c1.text_input("Target (next token)", key=key, max_chars=40,
                          on_change=on_change(key, token_setter("target", att_a.text, target, foil)),
                          help=f"By default A's likeliest next token. {VISIBLE_SPACE}: {definition(VISIBLE_SPACE)}")
            key = show("cmp.foil", with_visible_spaces(foil))
            c2.text_input("Foil", key=key, max_chars=40,
                          on_change=on_change(key, token_setter("foil", att_a.text, target, foil)),
                          help=f"By default A's second likeliest next token. {VISIBLE_SPACE}: "
                          f"{definition(VISIBLE_SPACE)}")
            try:
                ca = contrast(att_a, loaded_a.tokenizer, target, foil)
                cb = contrast(att_b, loaded_b.tokenizer, target, foil)
            except ValueError as err:
                st.warning(md(err))
                ca = cb = None
            if ca is not None:
                st.caption(f"logit(“{md(with_visible_spaces(ca.target.token))}”) − "
                           f"logit(“{md(with_visible_spaces(ca.foil.token))}”) after the text: "
                           f"{ca.baseline:.3f} in A, {cb.baseline:.3f} in B.")
                both = ((label_a, loaded_a, att_a, ca), (label_b, loaded_b, att_b, cb))
                if measure == "direct":
                    found = [result_or_none(direct_logit_attribution, f"Reading {lab}'s direct shares…", loaded, att, c,
                                            needs=("direct attribution",)) for lab, loaded, att, c in both]
                    what = "direct share"
                else:
                    found = [result_or_none(head_ablation, f"Removing each head of {lab}…", loaded, att, c,
                                            ablation="zero", needs=("head effects",)) for lab, loaded, att, c in both]
                    what = "effect of removing it"
                if all(f is not None for f in found):
                    values_a, values_b = (f.heads if measure == "direct" else f.effect for f in found)
if values_a is not None and cmp.words:  # no head of A is a head of B: each model's own strongest, side by side
    signed = measure != "roles"
    own = own_strongest(values_a, values_b, 5, signed=signed)
    st.markdown(f"**Each model's own strongest heads: {what}**")
    st.dataframe(own.rows(), hide_index=True, column_config={
        "A's value": st.column_config.NumberColumn(f"A's {what}", format="%.3g"),
        "B's value": st.column_config.NumberColumn(f"B's {what}", format="%.3g")})
    st.caption(f"A ({md(label_a)}) has {L} × {H} heads and B ({md(label_b)}) {att_b.n_layers} × {att_b.n_heads}, "
               "reading other tokens: no head of A is a head of B, so each model's strongest heads are its own, "
               + ("from its own run of the probe" if measure == "roles" else "on its own reading of the text")
               + (", by size either way." if signed else ".") + " The whole map of each is below.")
    c1, c2 = st.columns(2)
    unit = {"roles": "score", "direct": "share"}.get(measure, "effect")
    for col, side, values, tag in ((c1, "A", values_a, "a"), (c2, "B", values_b, "b")):
        col.plotly_chart(figures.layer_head_heatmap(values, title=f"{side}: {what}", value_name=unit,
                                                    signed=signed, zmax=None if signed else 1.0),
                         width="stretch", key=f"cmp.own_{tag}", config=chart_config("compare", measure, side))
elif values_a is not None:  # the same heads in both (one model in two precisions): head by head
    change = head_change(values_a, values_b)
    st.plotly_chart(figures.layer_head_heatmap(change.change, title=f"{what}: B − A", value_name="B − A",
                                               clickable=True, open_head=(layer, head)),
                    width="stretch", key="cmp.measure_map", on_select=head_opener("cmp.measure_map"),
                    selection_mode="points", config=chart_config("compare", measure))
    st.caption(f"Each cell: a head of A, the same head's {what} in B minus its own. Blue: more in B, red: less. "
               "The open head is outlined; click a head to open it above.")
    st.dataframe([{"model": "A", "head": head_name(layer, head), what: change.a[layer, head]},
                  {"model": "B", "head": head_name(pair.b_layer, pair.b_head), what: change.b[layer, head]},
                  {"model": "B − A", "head": "", what: change.change[layer, head]}], hide_index=True,
                 column_config={what: st.column_config.NumberColumn(format="%.3g")})

path_links("pages/compare.py")
