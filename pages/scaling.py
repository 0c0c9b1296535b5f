"""Why scale by sqrt(d_k): score variance grows with d, and softmax saturates without the scaling."""

import pandas as pd
import streamlit as st

from attention.toy import plotting
from attention.toy.lessons import questions_for
from attention.toy.live import DIM_VALUES, TEMPERATURE_VALUES, Panel, scaling_frames, slider, slider_values
from attention.toy.scaling import scaling_sample, scaling_study
from pages._frame import ensure_app_frame
from pages._lessons import path_links, predict_then_see
from pages._live import live_sliders

ensure_app_frame()

@st.cache_data(max_entries=32)
def study(temperature: float, n_keys: int):
    return scaling_study(n_keys=n_keys, temperature=temperature)


st.title("Why scale by √d_k")
st.markdown("Take a query q and keys k with independent entries of mean 0 and variance 1. Each score "
            "q·k is a sum of d products, so its variance is **d**: in high dimensions the scores spread "
            "far apart and softmax puts almost all weight on one key, leaving tiny gradients for the rest. "
            "Dividing by √d brings the variance back to 1.")
st.latex(r"\operatorname{Var}(q\cdot k) = \sum_{i=1}^{d} \operatorname{Var}(q_i k_i) = d"
         r"\qquad \operatorname{Var}\!\left(\frac{q\cdot k}{\sqrt d}\right) = 1")

predict_then_see(questions_for("scaling"))
c1, c2 = st.columns([2, 1])
n_keys = c2.slider("number of keys", 2, 32, 8, key="scaling.keys", bind="query-params")
with c1.expander("Exact values (typed, kept in the link)"):
    e1, e2 = st.columns(2)
    d = e1.number_input("dimension d", 1, 1024, 64, key="scaling.d", bind="query-params")
    temperature = e2.number_input("softmax temperature T", 0.1, 5.0, 1.0, 0.1, key="scaling.temperature",
                                  bind="query-params", format="%.1f")
st.latex(r"\alpha = \operatorname{softmax}(s / T)")


dims, temperatures = slider_values(DIM_VALUES, d), slider_values(TEMPERATURE_VALUES, temperature)
frames = scaling_frames(d, temperature, n_keys, dims, temperatures)
labels = [f"k{j}" for j in range(n_keys)]
live_sliders([slider("dimension d", dims, d, "scaling.d"),
              slider("temperature T", temperatures, temperature, "scaling.temperature")],
             [Panel("Without scaling: softmax(q·k / T)", "bars", ("q",), labels, frames["unscaled"]),
              Panel("With ÷√d: softmax(q·k / √d / T)", "bars", ("q",), labels, frames["scaled"])], key="scaling")
st.caption("One random query and its keys (seeded). Drag d or T: both charts redraw at every step, from weights "
           "computed in advance; the table and the curves below follow when you let go. The d slider moves on "
           f"{len(dims)} values from 1 to 1,024; type any d above.")
sample = scaling_sample(d, n_keys=n_keys, temperature=temperature)
st.dataframe(pd.DataFrame({"key": labels, "q·k": sample.scores, "q·k/√d": sample.scaled,
                           "weight, unscaled": sample.weights_unscaled, "weight, scaled": sample.weights_scaled})
             .style.format(precision=3), hide_index=True, key="scaling.table")

s = study(temperature, n_keys)
st.subheader(f"Averaged over 200 random draws, {n_keys} keys")
c_var, c_ent = st.columns(2)
c_var.plotly_chart(plotting.lines(s.dims, {"q·k": s.var_scores, "q·k / √d": s.var_scaled}, title="Score variance",
                                  x_title="d", y_title="variance", log_x=True, log_y=True, marker_x=d),
                   width="stretch", key="scaling.var")
c_ent.plotly_chart(plotting.lines(s.dims, {"without scaling": s.entropy_unscaled, "with ÷√d": s.entropy_scaled,
                                           "uniform (max)": s.uniform_entropy},
                                  title="Entropy of the weights (nats)", x_title="d", y_title="entropy (nats)",
                                  log_x=True, marker_x=d),
                   width="stretch", key="scaling.entropy")
st.plotly_chart(plotting.lines(s.dims, {"without scaling": s.max_weight_unscaled, "with ÷√d": s.max_weight_scaled},
                               title="Largest weight (1 = softmax saturated on one key)", x_title="d",
                               y_title="max weight", log_x=True, marker_x=d),
                width="stretch", key="scaling.max")

path_links("pages/scaling.py")
