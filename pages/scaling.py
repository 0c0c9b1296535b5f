"""Why scale by sqrt(d_k): score variance grows with d, and softmax saturates without the scaling."""

import pandas as pd
import streamlit as st

from attention import plotting
from attention.scaling import scaling_sample, scaling_study
from pages._frame import ensure_app_frame

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

c1, c2, c3 = st.columns(3)
d = c1.slider("dimension d", 1, 1024, 64, key="scaling.d", bind="query-params")
temperature = c2.slider("softmax temperature T", 0.1, 5.0, 1.0, 0.1, key="scaling.temperature",
                        bind="query-params")
n_keys = c3.slider("number of keys", 2, 32, 8, key="scaling.keys", bind="query-params")
st.latex(r"\alpha = \operatorname{softmax}(s / T)")

sample = scaling_sample(d, n_keys=n_keys, temperature=temperature)
labels = [f"k{j}" for j in range(n_keys)]
cb1, cb2 = st.columns(2)
cb1.plotly_chart(plotting.weights_bar(labels, sample.weights_unscaled, title=f"Without scaling (d = {d})"),
                 width="stretch", key="scaling.bar_unscaled")
cb2.plotly_chart(plotting.weights_bar(labels, sample.weights_scaled, title=f"With ÷√d (d = {d})"),
                 width="stretch", key="scaling.bar_scaled")
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
