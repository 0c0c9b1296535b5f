"""Why scale by sqrt(d_k): score variance grows with d, and softmax saturates without the scaling."""

import pandas as pd
import streamlit as st

from attention import figures
from attention.toy.live import DIM_VALUES, TEMPERATURE_VALUES, Panel, scaling_frames, slider, slider_values
from attention.toy.questions import questions_for
from attention.toy.scaling import scaling_sample, scaling_study
from pages._frame import ensure_app_frame
from pages._kept import linked
from pages._lessons import questions_first
from pages._live import live_sliders
from pages._path import intro, path_links
from pages._prose import for_developers, prose
from pages._tables import column

ensure_app_frame()

@st.cache_data(max_entries=32)
def study(temperature: float, n_keys: int):
    """Why scale's sample over every d, for a temperature and a number of keys (cached: sliders revisit them)."""
    return scaling_study(n_keys=n_keys, temperature=temperature)


st.title("Why scale by √d_k")
PAGE = "pages/scaling.py"
intro(PAGE, "Before softmax, attention divides every score by √d_k. Why? A score is a dot product: a sum of "
            "d products, one per dimension, so the more dimensions, the further apart the scores spread. This "
            "page asks what softmax makes of scores spread that far, and shows how dividing by √d brings the "
            "spread back to what it was with one dimension.")
# Two lines, one under the other: on one line the second was cut on a phone; in two columns, at 800 px.
st.latex(r"\operatorname{Var}(q\cdot k) = \sum_{i=1}^{d} \operatorname{Var}(q_i k_i) = d")
st.latex(r"\operatorname{Var}\!\left(\frac{q\cdot k}{\sqrt d}\right) = 1")
st.caption("d is d_k, the number of dimensions of each query and key (this page writes d for short). Var is the "
           "variance, how widely a number spreads: here for a query and keys whose entries are random, with mean 0 "
           "and variance 1.")
questions_first(questions_for("scaling"), PAGE)
c1, c2 = st.columns([2, 1])
n_keys = c2.slider("number of keys", 2, 32, 8, key=linked("scaling.keys"), bind="query-params")
with c1.expander("Exact values (typed, kept in the link)"):
    e1, e2 = st.columns(2)
    d = e1.number_input("dimension d", 1, 1024, 64, key=linked("scaling.d"), bind="query-params")
    temperature = e2.number_input("softmax temperature T", 0.1, 5.0, 1.0, 0.1, key=linked("scaling.temperature"),
                                  bind="query-params", format="%.1f")
st.latex(r"\alpha = \operatorname{softmax}(s / T)")
prose("T is the softmax's temperature: every score s is divided by it before softmax, so T above 1 flattens the "
      "weights and T below 1 sharpens them. Attention uses T = 1. ÷√d is a division too, but by a number that "
      "grows with d: it undoes the spread that d adds, at every d, where one fixed T cannot.")


dims, temperatures = slider_values(DIM_VALUES, d), slider_values(TEMPERATURE_VALUES, temperature)
frames = scaling_frames(d, temperature, n_keys, dims, temperatures)
labels = [f"k{j}" for j in range(n_keys)]
live_sliders([slider("dimension d", dims, d, "scaling.d"),
              slider("temperature T", temperatures, temperature, "scaling.temperature")],
             [Panel("Without scaling: softmax(q·k / T)", "bars", ("q",), labels, frames["unscaled"]),
              Panel("With ÷√d: softmax(q·k / √d / T)", "bars", ("q",), labels, frames["scaled"])], key="scaling")
st.caption("One random query and its keys (the same draw every time): one draw's weights, not an average; the "
           "curves below average many. Drag d or T: both charts redraw at every step, from weights computed in "
           "advance; the table and the curves below follow when you let go. The d slider moves on "
           f"{len(dims)} values from 1 to 1,024; type any d above.")
sample = scaling_sample(d, n_keys=n_keys, temperature=temperature)
st.dataframe(pd.DataFrame({"key": labels, "q·k": sample.scores, "q·k/√d": sample.scaled,
                           "weight, unscaled": sample.weights_unscaled, "weight, scaled": sample.weights_scaled}),
             hide_index=True, key="scaling.table",
             column_config={"key": column("key", 44), "q·k": column("q·k", 66, digits=3),
                            "q·k/√d": column("q·k/√d", 66, digits=3),
                            "weight, unscaled": column("weight", 70, full="weight, unscaled", digits=3),
                            "weight, scaled": column("with ÷√d", 74, full="weight, scaled by ÷√d", digits=3)})

s = study(temperature, n_keys)
st.subheader(f"Averaged over {s.draws} random draws, {n_keys} keys")
prose("Entropy says how spread the weights are: 0 when one key takes all the weight, largest when every key "
      f"gets the same share. It is measured in nats (natural-log units): with {n_keys} keys its largest [[value]] is "
      f"{s.uniform_entropy[0]:.2f}, the “uniform” line.")
c_var, c_ent = st.columns(2)
c_var.plotly_chart(figures.line_chart(s.dims, {"q·k": s.var_scores, "q·k / √d": s.var_scaled}, title="Score variance",
                                  x_title="d", y_title="variance", log_x=True, log_y=True, marker_x=d,
                                  marker_label=f"your d = {d}"),
                   width="stretch", key="scaling.var")
c_ent.plotly_chart(figures.line_chart(s.dims, {"without scaling": s.entropy_unscaled, "with ÷√d": s.entropy_scaled,
                                           "uniform (max)": s.uniform_entropy},
                                  title="Entropy of the weights (nats)", x_title="d", y_title="entropy (nats)",
                                  log_x=True, marker_x=d, marker_label=f"your d = {d}"),
                   width="stretch", key="scaling.entropy")
st.plotly_chart(figures.line_chart(s.dims, {"without scaling": s.max_weight_unscaled, "with ÷√d": s.max_weight_scaled},
                               title="Largest weight (1 = softmax saturated on one key)", x_title="d",
                               y_title="max weight", log_x=True, marker_x=d,
                               marker_label=f"your d = {d}"),
                width="stretch", key="scaling.max")

for_developers("The sample and the study are attention.toy.scaling.scaling_sample and scaling_study; the "
               "drag's frames attention.toy.live.scaling_frames; the questions attention.toy.questions.")
path_links(PAGE)
