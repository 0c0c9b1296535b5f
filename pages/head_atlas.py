"""Head atlas: what each head of a model does on your sentence (Clark et al. 2019, "What does BERT look at?")."""

import pandas as pd
import streamlit as st

from attention import plotting
from attention.models.head_survey import BROAD_FRACTION, METRICS, TYPE_THRESHOLD
from attention.plotting import Colours
from pages._frame import ensure_app_frame
from pages._jobs import attention_or_stop, survey_or_stop
from pages._labels import label_of
from pages._widgets import layer_and_head, open_head_buttons, sentence_and_model

ensure_app_frame()

st.title("Head atlas")
name, text = sentence_and_model("The animal didn't cross the street because it was too tired. It lay down.")
att = attention_or_stop(name, text)
stats = survey_or_stop(name, text, att)
L, H = att.n_layers, att.n_heads

metric = st.segmented_control("Statistic", list(METRICS), default="entropy", format_func=label_of(METRICS),
                              key="metric", bind="query-params") or "entropy"
title, help_text = METRICS[metric]
values = getattr(stats, metric)
uniform = stats.uniform_entropy  # per layer: a layer with a sliding window sees fewer keys
uniform_text = (f"{uniform.max():.2f} nats" if uniform.min() == uniform.max() else
                f"{uniform.min():.2f} to {uniform.max():.2f} nats (layers with a sliding window see fewer keys)")
st.caption(help_text + (f" Uniform attention would give {uniform_text}." if metric == "entropy" else ""))
fig = plotting.heatmap(values, [str(h + 1) for h in range(H)], [str(l_ + 1) for l_ in range(L)], title=title,
                       x_title="head", y_title="layer", value_name=title,
                       colours=Colours(0.0, stats.upper_bound(metric)),
                       show_values=H <= 12 and L <= 12, height=min(1400, 140 + 32 * L), clickable=True)
picked = st.plotly_chart(fig, width="stretch", key="atlas.metric", on_select="rerun", selection_mode="points")
if picked and picked.selection.points:  # a click on a cell opens that head below
    point = picked.selection.points[0]
    st.session_state["layer"], st.session_state["head"] = int(point["y"]) + 1, int(point["x"]) + 1

st.subheader("Head types")
st.markdown(f"A head is **previous-token**, **next-token**, **self** or **sink** when more than "
            f"{TYPE_THRESHOLD:.0%} of its attention (averaged over tokens) goes there, as in Clark et al. 2019; "
            f"**broad** when its mean entropy exceeds {BROAD_FRACTION:.0%} of uniform (our threshold).")
rows = [{"layer": l_ + 1, "head": h + 1, "type": stats.head_types[l_, h], "entropy": stats.entropy[l_, h],
         "special": stats.special_mass[l_, h], "sink mass": stats.sink_mass[l_, h],
         "previous": stats.previous[l_, h], "next": stats.next[l_, h],
         "mean distance": stats.mean_distance[l_, h]} for l_ in range(L) for h in range(H)]
table = pd.DataFrame(rows)
counts = table["type"].replace("", "unlabelled").value_counts()
st.write(", ".join(f"{k}: {v}" for k, v in counts.items()))
st.dataframe(table[table["type"] != ""].style.format(precision=3), hide_index=True, key="atlas.types",
             height=min(400, 40 + 35 * int((table["type"] != "").sum())))

st.subheader("Open a head (or click a cell above)")
c1, c2, c3 = st.columns([1, 1, 2])
layer, head = layer_and_head(c1, c2, L, H)
head_type = stats.head_types[layer, head] or "no clear type"
c3.markdown(f"Layer {layer + 1}, head {head + 1}: **{head_type}**, entropy {stats.entropy[layer, head]:.2f} nats, "
            f"mean distance {stats.mean_distance[layer, head]:.1f} tokens.")
open_head_buttons(layer, head, key="atlas.open")

st.subheader("Attention by distance")
st.markdown("How much weight one (query, key) pair gets, on average, by how far apart they are (query position "
            "minus key position: 1 is the previous token, negative keys come after the query). A local head falls "
            "off fast; a head that looks far keeps weight at long range. Ranges widen with distance so long texts "
            "read as a curve.")
profile = stats.distance_profile()
curves = {f"layer {layer + 1}, head {head + 1}": profile.of(layer, head),
          f"layer {layer + 1}, mean of its {H} heads": profile.of(layer)}
st.plotly_chart(plotting.lines(profile.labels, curves,
                               title="Mean weight of a (query, key) pair by distance", x_title="query − key (tokens)",
                               y_title="mean weight", log_y=True, categorical_x=True, x_hover=profile.spans),
                width="stretch", key="atlas.distance")
