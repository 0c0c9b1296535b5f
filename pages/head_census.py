"""What each head is: every head of a model scored by the papers' own metrics on the papers' own probes (issue 73),
and the three detect_head patterns on your text."""

import pandas as pd
import streamlit as st

from attention.figures import census_canvas
from attention.models import CENSUS_METRICS, census_report, detect_head, file_stem, head_census, head_name
from attention.models.analyses.census import BY_KEY
from pages._canvas import canvas_heatmap
from pages._clicks import head_opener, open_head_buttons
from pages._focus import on_page
from pages._frame import ensure_app_frame
from pages._jobs import is_saved, model_or_stop, result_of
from pages._kept import linked
from pages._path import intro, path_links
from pages._text import md
from pages._widgets import layer_and_head, sentence_and_model

ensure_app_frame()

st.title("What each head is")
intro("pages/head_census.py", "Papers name kinds of heads: induction heads copy what followed a token last time, "
      "name movers copy a name into the answer, sink heads park their weight on the first token. Each paper "
      "scores heads its own way, on a probe of its own. This page scores every head of the model by each paper's "
      "metric, on that paper's probe, and boxes the heads above the paper's threshold.")
focus = on_page()
name, text = sentence_and_model(focus, slot="census")
if is_saved(name):
    st.info("The census runs the model on the papers' probes: open the model itself to see it.")
    st.stop()
loaded = model_or_stop(name)
census = result_of(head_census, "Scoring every head on the papers' probes…", loaded)
L, H = next(iter(census.scores.values())).shape

scored = [m for m in CENSUS_METRICS if m.key in census.scores]
st.subheader("The paper's probe: every head by each metric")
counts = census.counts()
st.markdown(f"**Sink rate** (Gu et al. 2024: the share of heads whose mean weight on the first token exceeds 0.3): "
            f"**{census.sink_rate:.1%}** of {L * H} heads. Heads above each metric's threshold: "
            + ", ".join(f"{md(m.kind)} ({md(m.key)}) {counts[m.key]}" for m in scored) + ".")
key = st.segmented_control("Metric", [m.key for m in scored], default="prefix_matching" if "prefix_matching" in
                           census.scores else scored[0].key, key=linked("census.metric"), bind="query-params",
                           format_func=lambda k: BY_KEY[k].key.replace("_", " ")) or scored[0].key
metric = BY_KEY[key]
st.caption(f"**{md(metric.paper)}.** {md(metric.definition)}. Probe: {md(metric.probe)}. Threshold "
           f"{metric.threshold:g} ({md(metric.threshold_from)})." + (f" Choice: {md(metric.choices)}." if
                                                                      metric.choices else ""))
canvas_heatmap(census_canvas(census.scores[key], label=key.replace("_", " "), threshold=metric.threshold,
                             signed=key == "copying", click_text="click to open this head below",
                             file_name=file_stem(name, "census", key)),
               key="census.map", on_click=head_opener("census.map"))

st.subheader("Every head, sortable")
rows = [{"head": head_name(layer, head), **{m.key: float(census.scores[m.key][layer, head]) for m in scored},
         "kinds": ", ".join(census.kinds(layer, head))} for layer in range(L) for head in range(H)]
st.dataframe(pd.DataFrame(rows).style.format(precision=3, subset=[m.key for m in scored]), hide_index=True,
             key="census.table", height=min(420, 40 + 35 * len(rows)))
st.caption("Click a column's name to sort by it. Heads are named from 1 (L19H7 is layer 19, head 7); a head may be "
           "several kinds.")

st.subheader("Open a head")
c1, c2, c3 = st.columns([1, 1, 2])
layer, head = layer_and_head(c1, c2, focus, L, H, slot="census")
kinds = census.kinds(layer, head)
c3.markdown(f"**{head_name(layer, head)}** on the papers' probes: " + (f"**{', '.join(kinds)}**" if kinds else
            "no kind above its threshold") + "; " + ", ".join(f"{m.key.replace('_', ' ')} "
                                                               f"{census.scores[m.key][layer, head]:.2f}"
                                                               for m in scored) + ".")
open_head_buttons(layer, head, key="census.open", source=name, text=text)

st.subheader("Your text: TransformerLens's detect_head")
st.markdown("The same three patterns TransformerLens's `detect_head` knows, on **your text** rather than the "
            "paper's probe: the share of each head's weight on the token before, on earlier copies of the same "
            "token, and on the token after an earlier copy. On a text with few repeated tokens the last two stay "
            "low for every head.")
try:
    on_text = {kind: result_of(detect_head, "Scoring your text…", loaded, text, kind, prepend_bos=False)
               for kind in ("previous_token_head", "duplicate_token_head", "induction_head")}
except ValueError as err:
    st.warning(md(err))
else:
    best = pd.DataFrame([{"pattern": kind.replace("_", " "), "top heads on your text": ", ".join(
        f"{head_name(i // H, i % H)} {s.flat[i]:.2f}" for i in s.argsort(axis=None)[::-1][:5])}
        for kind, s in on_text.items()])
    st.dataframe(best, hide_index=True, key="census.text")

with st.expander("The probes, as the scores read them"):
    for probe, shown in census.probes.items():
        st.markdown(f"**{md(probe)}**")
        st.text(shown)
    st.markdown(f"Names kept as one token: {census.counted.get('names', 0)}; ordinal tokens: "
                f"{census.counted.get('ordinal tokens', 0)}.")
for metric_key, why in census.missing.items():
    st.caption(f"Not scored: {md(metric_key.replace('_', ' '))}: {md(why)}")
st.download_button("Download this census as a report (Markdown)", "\n".join(census_report(census)) + "\n",
                   file_name=f"{file_stem(name, 'census')}.md", mime="text/markdown", icon=":material/download:",
                   key="census.report")

path_links("pages/head_census.py")
