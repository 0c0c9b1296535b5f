"""What each head is: every head of a model scored by the papers' own metrics on the papers' own probes (issue 73),
and the three detect_head patterns on your text."""

import pandas as pd
import streamlit as st

from attention import figures
from attention.figures import census_canvas, view_canvas
from attention.models import (
    CENSUS_METRICS,
    census_document,
    detect_head,
    file_stem,
    head_census,
    head_name,
    probe_result,
    top_heads,
    zoom,
)
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
BY_KEY = {m.key: m for m in CENSUS_METRICS}
st.subheader("The paper's probe: every head by each metric")
counts = census.counts()
st.markdown(f"**Sink rate** (Gu et al. 2024: the share of heads whose mean weight on the first token exceeds 0.3): "
            f"**{census.sink_rate:.1%}** of {L * H} heads. Heads above each metric's threshold: "
            + ", ".join(f"{md(m.kind)} ({md(m.key)}) {counts[m.key]}" for m in scored) + ".")
if census.published:  # GPT-2 small by its hub id: the papers' own heads, each beside our score for its kind
    st.markdown("**The heads the papers name in this model**, counted from 0 as the papers write them (5.1 is "
                f"{head_name(5, 1)} here), each with this page's score for its kind on the paper's probe:")
    st.dataframe(pd.DataFrame([{"kind": p.kind, "paper": p.paper, "as written": f"{p.layer}.{p.head}",
                                "here": head_name(p.layer, p.head), "metric": p.key.replace("_", " "),
                                "score": p.score, "above its threshold": p.passed} for p in census.published])
                 .style.format(precision=3, subset=["score"]), hide_index=True, key="census.published")
key = st.segmented_control("Metric", [m.key for m in scored], default="prefix_matching" if "prefix_matching" in
                           census.scores else scored[0].key, key=linked("census.metric"), bind="query-params",
                           format_func=lambda k: BY_KEY[k].key.replace("_", " ")) or scored[0].key
metric = BY_KEY[key]
st.caption(f"**{md(metric.paper)}.** {md(metric.definition)}. Probe: {md(metric.probe)}. Threshold "
           f"{metric.threshold:g} ({md(metric.threshold_from)})." + (f" Choice: {md(metric.choices)}." if
                                                                      metric.choices else ""))
canvas_heatmap(census_canvas(census.scores[key], label=key.replace("_", " "), threshold=metric.threshold,
                             signed=key == "copying", click_text="click to open this head below",
                             file_name=file_stem(name, "census", key), opened=(focus.layer, focus.head)),
               key="census.map", on_click=head_opener("census.map"))
st.caption("Red boxes: the heads above the threshold. The black box: the head open below (click a cell to open "
           "another).")

st.subheader("Every head, sortable")
rows = [{"head": head_name(layer, head), "passes": ", ".join(census.passes(layer, head)),
         **{m.key: float(census.scores[m.key][layer, head]) for m in scored}}
        for layer in range(L) for head in range(H)]
st.dataframe(pd.DataFrame(rows).style.format(precision=3, subset=[m.key for m in scored]), hide_index=True,
             key="census.table", height=min(420, 40 + 35 * len(rows)))
st.caption("Click a column's name to sort by it. Heads are named from 1 (L19H7 is layer 19, head 7); “passes” lists "
           "the metrics whose threshold a head is above (a head may pass several).")

st.subheader("Open a head")
c1, c2, c3 = st.columns([1, 1, 2])
layer, head = layer_and_head(c1, c2, focus, L, H, slot="census")
kinds = census.kinds(layer, head)
passes = census.passes(layer, head)
c3.markdown(f"**{head_name(layer, head)}** on the papers' probes: " + (f"**{', '.join(kinds)}** (passes "
            f"{', '.join(p.replace('_', ' ') for p in passes)})" if kinds else "above no metric's threshold")
            + "; " + ", ".join(f"{m.key.replace('_', ' ')} {census.scores[m.key][layer, head]:.2f}" for m in scored)
            + ".")
open_head_buttons(layer, head, key="census.open", source=name, text=text)
probe = result_of(probe_result, "Running the probe…", loaded)
canvas_heatmap(view_canvas(zoom(probe, "head", layer=layer, head=head),
                           file_name=file_stem(name, "census-probe", f"layer-{layer + 1}", f"head-{head + 1}"),
                           meta=figures.focus_meta(layer=layer, head=head)), key="census.probe_pattern")
st.caption("The head on row 1 of the repeated-token probe, where its detect_head and prefix-matching scores come "
           "from: an induction head lights the diagonal R − 1 below the main one (each token of the second repeat "
           "looks at what followed it the first time), a previous-token head the diagonal right under it. The "
           "buttons above open it on your sentence instead.")

st.subheader("Your text: TransformerLens's detect_head")
st.markdown("The same three patterns TransformerLens's `detect_head` knows, on **your text** rather than the "
            "paper's probe: the share of each head's weight on the token before, on earlier copies of the same "
            "token, and on the token after an earlier copy. On a text with few repeated tokens the last two stay "
            "low for every head. Your text is read as the other pages read it, with the tokenizer's own special "
            "tokens (`detect_head(m, text, pattern, prepend_bos=False)`; exclude_bos and exclude_current_token off, "
            "error_measure \"mul\").")
try:
    on_text = {kind: result_of(detect_head, "Scoring your text…", loaded, text, kind, prepend_bos=False)
               for kind in ("previous_token_head", "duplicate_token_head", "induction_head")}
except ValueError as err:
    st.warning(md(err))
else:
    st.markdown("\n".join(f"- **{kind.replace('_', ' ')}**, top heads on your text: " + ", ".join(
        f"{head_name(layer, head)} {score:.2f}" for layer, head, score in top_heads(s, 5)) for kind, s in
        on_text.items()))

with st.expander("The probes, as the scores read them"):
    for probe, shown in census.probes.items():
        st.markdown(f"**{md(probe)}**")
        st.text(shown)
    st.markdown(f"Names kept as one token: {census.counted.get('names', 0)}; ordinal tokens: "
                f"{census.counted.get('ordinal tokens', 0)}.")
for metric_key, why in census.missing.items():
    st.caption(f"Not scored: {md(metric_key.replace('_', ' '))}: {md(why)}")
st.download_button("Download this census as a report (Markdown)", census_document(census),
                   file_name=f"{file_stem(name, 'census')}.md", mime="text/markdown", icon=":material/download:",
                   key="census.report")

path_links("pages/head_census.py")
