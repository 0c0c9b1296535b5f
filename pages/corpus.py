"""A head across a corpus: every head on one map, a head's top examples over many texts, and its queries and
keys in one picture (HeadVis, AttentionViz), from one pass of the model over the corpus."""

import functools

import streamlit as st

from attention import figures
from attention.models import (
    DEFAULT_ENCODER,
    METRICS,
    TokenAt,
    listed_corpora,
    model_label,
    survey,
    survey_bytes,
)
from pages._clicks import head_opener
from pages._corpora import corpus_or_stop, saved_survey_or_stop
from pages._focus import on_page, switch_to, update
from pages._frame import ensure_app_frame
from pages._jobs import attention_or_stop, corpus_survey_job, follow_or_stop, model_or_stop, result_of
from pages._kept import linked
from pages._labels import label_of
from pages._path import path_links
from pages._prose import explained, for_developers
from pages._text import md
from pages._widgets import DEFAULT_TEXT, fit, layer_and_head, model_picker

ensure_app_frame()
SOURCES = {"default": "the default corpus", "file": "a file of yours", "listed": "the server's corpora",
           "saved": "a saved survey"}
STATISTICS = {name: METRICS[name] for name in ("entropy", "mean_distance", "previous", "sink_mass")}


st.title("A head across a corpus")
st.markdown("What does a head do, over many texts rather than one sentence? The model reads every text of a "
            "corpus once; each head gets a point on the **map** (the median of two statistics over the texts), its "
            "**top examples** (the largest weights anywhere in the corpus) and its **queries and keys** in one "
            "picture, where heads that match by position, by token or by content look different.")
offered = [s for s in SOURCES if s != "listed" or listed_corpora()]  # an operator's folders, if any
source = st.segmented_control("Texts", offered, format_func=label_of(SOURCES), default="default",
                              key="corpus.source") or "default"
focus = on_page()
yours = None  # the visit's sentence through the same model, for "your sentence" on the distributions
if source == "saved":
    found = saved_survey_or_stop()
    st.caption(f"{md(model_label(found.model_name))} over {len(found.texts):,} texts, opened from a file: no model "
               "needed.")
else:
    c1, c2 = st.columns([2, 1])  # at 800 px 2/7 of the row cut the model's name ("SmolLM2-13!")
    corpus, corpus_key = corpus_or_stop(source, c1)
    name = model_picker(c2, focus, slot="corpus", default=DEFAULT_ENCODER)
    include = st.toggle("Top examples may land on sinks", key="corpus.sinks",
                        help="By default keys that are special tokens or the first token are skipped: most heads park "
                             "weight there, and the top examples would all be [CLS] or the first word.")
    loaded = model_or_stop(name)
    found = follow_or_stop(corpus_survey_job(name, corpus_key, include, loaded, corpus))
    st.caption(f"{md(model_label(name))} read {len(found.texts):,} texts of {md(corpus.name)}, each up to "
               f"{found.max_tokens} tokens: {found.truncated:,} were cut there"
               + (f", {corpus.cut:,} were cut to their first characters when read" if corpus.cut else "") + ".")
    st.download_button("Save this survey (.safetensors)", data=functools.partial(survey_bytes, found),
                       file_name=f"corpus-survey-{name.name.replace('/', '_')}.safetensors", on_click="ignore",
                       icon=":material/download:", key="corpus.save",
                       help="Arrays any numpy or torch reads with the safetensors package, and a JSON header (texts, "
                            "tokens, model) in its metadata. Open it here without the model, or in a notebook (For "
                            "developers, at the end of the page).")
    text = focus.text if focus.text is not None else DEFAULT_TEXT
    yours = result_of(survey, "Surveying every head…", attention_or_stop(name, text, say_check=False))
    st.caption(f"Heads are named L3H7, counting from 1. “Your sentence” below is the sentence of the model pages: "
               f"“{md(text[:80])}”.")

# --- Every head on one map ---------------------------------------------------------------------------------
st.header("Every head on one map")
c1, c2 = st.columns(2)
x = c1.selectbox("Across", list(STATISTICS), index=1, format_func=label_of(STATISTICS), key=linked("corpus.x"),
                 bind="query-params")
y = c2.selectbox("Up", list(STATISTICS), index=0, format_func=label_of(STATISTICS), key=linked("corpus.y"),
                 bind="query-params")
c1, c2, c3 = st.columns(3)
colour = c1.segmented_control("Colour by", ["layer", "type"], default="layer", key=linked("corpus.colour"),
                              bind="query-params") or "layer"
focus = fit(n_layers=found.n_layers, n_heads=found.n_heads)
layer, head = layer_and_head(c2, c3, focus, found.n_layers, found.n_heads, slot="corpus")
st.plotly_chart(figures.corpus_map(found, x=x, y=y, colour=colour, selected=(layer, head)), width="stretch",
                key="corpus.map",
                on_select=head_opener("corpus.map", from_customdata=True), selection_mode="points")
st.caption(f"{md(STATISTICS[x][1])} {md(STATISTICS[y][1])} Each point is one head's median over the texts; click "
           "one to open it below. Type: previous-token or sink when the median share there is over one half.")

# --- One head ---------------------------------------------------------------------------------------------
shown = figures.head_name(layer, head)
st.header(f"{shown}: its top examples")
rows = figures.example_rows(found, layer, head)
if not rows:
    st.info("No weight of this head lands outside the skipped keys: switch on “may land on sinks” above.")
else:
    picked = st.dataframe(rows, hide_index=True, key="corpus.examples", on_select="rerun",
                          selection_mode="single-row", column_config={
                              "weight": st.column_config.NumberColumn(format="%.3f"),
                              # tokens whole: at the default width "grandmother" read "grandmothe"
                              "query": st.column_config.TextColumn(width="medium"),
                              "key": st.column_config.TextColumn(width="medium"),
                              # wide enough for a context of 3 tokens a side (at "large" its end was cut at 1280 px)
                              figures.CONTEXT_COLUMN: st.column_config.TextColumn(width=460)})
    st.caption(explained("The largest weights of this head anywhere in the corpus, in their text as the tokenizer "
                         "decodes it: the query token in «», the key it attends to in [ ]. A token that begins with "
                         "a space shows it as ␣. Select a row to open that text in Model heads at this head, its "
                         "query followed.", set()), unsafe_allow_html=True)  # this page's own terms: all new
    chosen = picked.selection.rows if picked else []
    if chosen and source != "saved":  # that text, this model and head, its query followed: on Model heads
        example = found.top_examples(layer, head)[chosen[0]]
        tokens = found.tokens[example.text_index]
        update(model=name, saved=None, text=found.texts[example.text_index],
               query=TokenAt(example.query, tokens[example.query]), layer=layer, head=head, aggregation="head")
        switch_to("pages/model_heads.py")
    elif chosen:
        st.info("This survey was opened from a file: open its model on Model heads to see the text there.")

st.header(f"{shown}: its queries and keys together")
paint = st.segmented_control("Colour", ["kind", "position"], default="kind", key="corpus.qk_colour",
                             format_func={"kind": "queries / keys", "position": "token position"}.get) or "kind"
try:
    st.plotly_chart(figures.qk_scatter(found, layer, head, colour=paint), width="stretch", key="corpus.qk")
    st.caption("Keys are moved so that their mean is the queries' mean, and both are scaled to the same mean length: "
               "neither changes a single attention weight (softmax ignores a constant per row; q·k is unchanged when "
               "q is scaled by a and k by 1/a), and afterwards a query lies near the keys it attends to. One PCA of "
               "both (AttentionViz, Yeh et al. 2023). Hover a point for its token in context.")
except ValueError as err:
    st.info(md(err))

st.header(f"{shown}: over the texts")
name_of = st.selectbox("Statistic", list(STATISTICS), format_func=label_of(STATISTICS), key=linked("corpus.stat"),
                       bind="query-params")
value = None if yours is None else float(getattr(yours, name_of)[layer, head])
st.plotly_chart(figures.corpus_statistic(found, layer, head, name_of, current=value), width="stretch",
                key="corpus.distribution")
st.caption(f"{md(STATISTICS[name_of][1])} One point per text (hover: the text)"
           + (", the dashed line on the model pages' sentence." if value is not None else "."))

for_developers("The survey is attention.models.corpus_survey; a saved one opens in Python with "
               "attention.models.load_corpus_survey(path); the map, the top examples and the queries-and-keys "
               "picture are in attention.figures (corpus_map, example_rows, qk_scatter).")
path_links("pages/corpus.py")
