"""Head atlas: what each head of a model does on your sentence (Clark et al. 2019, "What does BERT look at?")."""

import pandas as pd
import streamlit as st

from attention import figures
from attention.figures import Colours, layer_head_canvas, view_canvas
from attention.models import (
    BROAD_FRACTION,
    METRICS,
    ROLE_THRESHOLD,
    ROLES,
    TYPE_THRESHOLD,
    file_stem,
    first_token_shares,
    head_name,
    head_roles,
    head_words,
    most_parked,
    survey,
    zoom,
)
from pages._canvas import canvas_heatmap
from pages._clicks import head_opener, open_head_buttons
from pages._focus import following, on_page
from pages._frame import ensure_app_frame
from pages._jobs import attention_or_stop, is_saved, model_or_stop, result_of, result_or_said
from pages._kept import linked
from pages._labels import label_of
from pages._path import intro, path_links
from pages._text import md
from pages._widgets import fit, layer_and_head, measure_switch, sentence_and_model

ensure_app_frame()

st.title("Head atlas")
intro("pages/head_atlas.py", "Heads fall into a few kinds: some look at the token just before, some spread their "
      "weight evenly, and many park it on a sink such as [CLS] or the first token. This page measures each head "
      "of the model on one text and sorts them into those kinds (Clark et al. 2019).")
focus = on_page()
name, text = sentence_and_model(focus, slot="atlas", default_text="The animal didn't cross the street because it was "
                                                                  "too tired. It lay down.")
att = attention_or_stop(name, text)
focus = fit(att)
head_survey = result_of(survey, "Surveying every head…", att)
L, H = att.n_layers, att.n_heads

metric = st.segmented_control("Statistic", list(METRICS), default="entropy", format_func=label_of(METRICS),
                              key=linked("metric"), bind="query-params") or "entropy"
title, help_text = METRICS[metric]
values = getattr(head_survey, metric)
uniform = head_survey.uniform_entropy  # per layer: a layer with a sliding window sees fewer keys
uniform_text = (f"{uniform.max():.2f} nats" if uniform.min() == uniform.max() else
                f"{uniform.min():.2f} to {uniform.max():.2f} nats (layers with a sliding window see fewer keys)")
st.caption(help_text + (f" Uniform attention would give {uniform_text}." if metric == "entropy" else ""))
canvas_heatmap(layer_head_canvas(values, title=title, value_name=title,
                                 colours=Colours(0.0, head_survey.upper_bound(metric)), show_values=H <= 12 and L <= 12,
                                 height=min(1400, 140 + 32 * L), click_text="click to open this head below",
                                 file_name=file_stem(name, metric)),
               key="atlas.metric", on_click=head_opener("atlas.metric"))  # a click on a cell opens that head below

st.subheader("The first token: the weight it gets, and what it hands over")
c1, c2 = st.columns([2, 1])
measure = measure_switch(c1, focus, slot="atlas")
shares_of = result_or_said(first_token_shares, "Measuring what every head's values hand over…", att)
if shares_of is not None:  # else a saved result without W_O, or a family whose W_O is unknown: said why
    weight, norm = shares_of
    norms = measure == "norms"
    shares = norm if norms else weight
    what = "weighted norms (what it hands over)" if norms else "weight"
    canvas_heatmap(layer_head_canvas(shares, title=f"First token's share of each head's {what}",
                                     value_name="share", colours=Colours(0.0, 1.0), show_values=H <= 12 and L <= 12,
                                     height=min(1400, 140 + 32 * L), click_text="click to open this head below",
                                     file_name=file_stem(name, "first-token", measure)),
                   key="atlas.first", on_click=head_opener("atlas.first"))
    at_l, at_h = most_parked(weight, norm)
    st.caption(f"Averaged over the text's tokens. Where the two readings part most: {head_name(at_l, at_h)} gives "
               f"the first token “{md(att.tokens[0])}” {weight[at_l, at_h]:.0%} of its weight, and it makes "
               f"{norm[at_l, at_h]:.0%} of what the head hands over (Kobayashi et al. 2020): weight parked there, "
               f"not read. Switch “Read by” to see the map both ways; the switch holds on the other pages.")

st.subheader("Head types")
st.markdown(f"A head is **previous-token**, **next-token**, **self** or **sink** when more than "
            f"{TYPE_THRESHOLD:.0%} of its attention (averaged over tokens) goes there, as in Clark et al. 2019; "
            f"**broad** when its mean entropy exceeds {BROAD_FRACTION:.0%} of uniform (our threshold).")
rows = [{"layer": l_ + 1, "head": h + 1, "type": head_survey.head_types[l_, h], "entropy": head_survey.entropy[l_, h],
         "special": head_survey.special_mass[l_, h], "sink mass": head_survey.sink_mass[l_, h],
         "previous": head_survey.previous[l_, h], "next": head_survey.next[l_, h],
         "mean distance": head_survey.mean_distance[l_, h]} for l_ in range(L) for h in range(H)]
table = pd.DataFrame(rows)
counts = table["type"].replace("", "unlabelled").value_counts()
st.write(", ".join(f"{k}: {v}" for k, v in counts.items()))
st.dataframe(table[table["type"] != ""].style.format(precision=3), hide_index=True, key="atlas.types",
             height=min(400, 40 + 35 * int((table["type"] != "").sum())))

st.subheader("Roles on an induction probe")
labels = probe = None
if is_saved(name):
    st.info("Roles are measured by running the model on a probe: open the model itself to see them.")
else:
    roles = result_of(head_roles, "Running the induction probe…", model_or_stop(name))
    probe = roles.probe
    # the role's buttons on a line of their own: in three quarters of an 800-px page "previous-token" was cut
    role = st.segmented_control("Role", list(ROLES), default="induction", format_func=label_of(ROLES),
                                key=linked("atlas.role"), bind="query-params") or "induction"
    threshold = st.columns([1, 2])[0].slider("labelled above", 0.1, 0.9, ROLE_THRESHOLD, 0.05,
                                             key="atlas.role_threshold")
    st.caption(f"{ROLES[role][1]} The probe: a beginning-of-text token, then {roles.repeat} random tokens, then the "
               f"same {roles.repeat} again (seed {roles.seed}; Olsson et al. 2022). Scores are mean attention weights, "
               "0 to 1; click a cell to see that head's pattern on the probe below. These are this page's quick "
               "roles on one short probe, not TransformerLens's detect_head nor the papers' own scores: the page "
               "*What each head is* scores every head by those, on their own probes.")
    canvas_heatmap(layer_head_canvas(getattr(roles, role), title=f"{ROLES[role][0]} score", value_name="score",
                                     colours=Colours(0.0, 1.0), click_text="click to open this head below",
                                     file_name=file_stem(name, role)),
                   key="atlas.roles", on_click=head_opener("atlas.roles"))
    labels = roles.labels(threshold)
    labelled = [{"layer": l_ + 1, "head": h + 1, "role": labels[l_, h],
                 **{ROLES[f][0]: getattr(roles, f)[l_, h] for f in ROLES}} for l_ in range(L) for h in range(H)
                if labels[l_, h]]
    st.write(", ".join(f"{ROLES[f][0]}: {int((labels == ROLES[f][0]).sum())}" for f in ROLES)
             + f" (of {L * H} heads, above {threshold:.2f})")
    if labelled:
        st.dataframe(pd.DataFrame(labelled).style.format(precision=2), hide_index=True, key="atlas.labelled",
                     height=min(400, 40 + 35 * len(labelled)))

st.subheader("Open a head (or click a cell above)")
top = None if labels is None else roles.strongest(role)  # the ranked result above: its top head opens here,
shown = focus if top is None else following(focus, top[0], top[1])  # until the visitor picks another
c1, c2, c3 = st.columns([1, 1, 2])
layer, head = layer_and_head(c1, c2, shown, L, H, slot="atlas", kinds=att.layer_kind)
head_type = head_survey.head_types[layer, head] or "no clear type"
role_md = "**not measured**" if labels is None else f"**{labels[layer, head] or 'no role'}**"
if labels is not None:  # a head labelled by its strongest role may pass the threshold in others too: say so
    also = [f"{name} {score:.2f}" for name, score in roles.passed(layer, head, threshold)[1:]]
    role_md += f" (its strongest role; also above {threshold:.2f}: {', '.join(also)})" if also else ""
c3.markdown(f"{head_words(layer, head).capitalize()}: **{head_type}** on your text, {role_md} "
            f"on the probe; entropy {head_survey.entropy[layer, head]:.2f} nats, mean distance "
            f"{head_survey.mean_distance[layer, head]:.1f} tokens.")
if top is not None and not focus.head_picked:
    score = getattr(roles, role)[top[0], top[1]]
    st.caption(f"Opened: the highest {ROLES[role][0]} score on the probe ({score:.2f})"
               + ("" if score >= threshold else f", below the {threshold:.2f} a role is labelled at: no head of this "
                  "model is labelled so") + ". Pick another, or click a cell above.")
open_head_buttons(layer, head, key="atlas.open", source=name, text=text)
if probe is not None:
    canvas_heatmap(view_canvas(zoom(probe, "head", layer=layer, head=head),
                               file_name=file_stem(name, "probe", f"layer-{layer + 1}", f"head-{head + 1}"),
                               meta=figures.focus_meta(layer=layer, head=head)), key="atlas.probe_pattern")
    st.caption("The head on the probe: an induction head lights up the diagonal R − 1 positions below the main "
               "one (each token of the second repeat looks at what followed it the first time); a previous-token "
               "head the diagonal right under it.")

st.subheader("Attention by distance")
st.markdown("How much weight one (query, key) pair gets, on average, by how far apart they are (query position "
            "minus key position: 1 is the previous token, negative keys come after the query). A local head falls "
            "off fast; a head that looks far keeps weight at long range. Ranges widen with distance so long texts "
            "read as a curve.")
profile = head_survey.distance_profile()
curves = {head_words(layer, head): profile.of(layer, head),
          f"layer {layer + 1}, mean of its {H} heads": profile.of(layer)}
st.plotly_chart(figures.line_chart(profile.labels, curves, title="Mean weight of a (query, key) pair by distance",
                                   x_title="query − key (tokens)", y_title="mean weight (log scale)", log_y=True,
                                   categorical_x=True, x_hover=profile.spans),
                width="stretch", key="atlas.distance")

path_links("pages/head_atlas.py")
