"""Model heads: every layer x head of a real model on your sentence, one head zoomed, one token followed."""

import streamlit as st

from attention import figures
from attention.figures import CLICKABLE_CELLS, grid_canvas, view_canvas
from attention.models import (
    AGGREGATIONS,
    LINE_VIEW_MAX_UNITS,
    LINE_VIEW_TOKENS,
    SINKS_NOTE,
    ModelAttention,
    alti,
    alti_view,
    file_stem,
    head_name,
    line_view,
    model_questions_for,
    parked_weight,
    shown_tokens,
    survey,
    token_focus,
    zoom,
)
from pages._canvas import canvas_heatmap
from pages._clicks import cell_query, head_opener, row_head_opener
from pages._examples import example_result
from pages._export import chart_config, export_row
from pages._focus import current, on_change, on_page, setting, show, update
from pages._frame import ensure_app_frame
from pages._jobs import attention_again, attention_or_stop, is_saved, model_or_stop, result_of, result_or_said
from pages._kept import linked
from pages._labels import label_of, label_or_every
from pages._lessons import holds_back, predict_then_see
from pages._partial import own_rerun, part, whole_page
from pages._path import intro, path_links
from pages._text import md
from pages._widgets import (
    among,
    fit,
    labelled_key,
    layer_and_head,
    query_picker,
    reading_switches,
    sentence_and_model,
    sentence_now,
)

ensure_app_frame()

st.title("Model heads")
intro("pages/model_heads.py", "Now a real model reads your sentence. MiniLM, a small encoder trained on real text, "
      "has 6 layers of 12 heads; every head of every layer gives each token its own weights over the others. "
      "Below, all of them at once as small squares; click one to zoom into it, pick a token to see what it "
      "looks at in every head, and switch to SmolLM2, a decoder that writes text, to compare.")
RESULT = "heads.result"  # the part of the page a new sentence reruns alone (pages/_partial.py)
QUESTIONS = model_questions_for("model_heads")

focus = on_page()
name, text = sentence_and_model(focus, slot="heads", rerun=RESULT)
att = attention_or_stop(name, text)
focus = fit(att)
predict_then_see(QUESTIONS, {"att": att}, shown=name, texts=(att.text,), example=example_result)
reading = reading_switches(focus, att, slot="heads")


@part(RESULT)
def result(name, text: str, reading) -> None:
    """Everything a new sentence changes: its shape, the grid of every head, then the zoom and the token followed.
    A new sentence reruns this part alone; it then reads the sentence afresh (the arguments are the last whole
    run's), and asks for the whole page where the page above would change too. The parts are given the text, not
    its result (the shared cache's, found again at once): a part keeps its arguments until the next whole run, and
    a kept result of 4,096 tokens (~1 GB) stayed alive beside the next one (benchmarks/NOTES.md)."""
    own = own_rerun()
    att = attention_or_stop(name, sentence_now(current()), say_check=False) if own else attention_again(name, text)
    if own:
        if att.truncated or holds_back(QUESTIONS, shown=name, texts=(att.text,)):
            whole_page()  # the page above says the text was cut short, or holds the rest back for a question
        fit(att)
    L, H, n = att.n_layers, att.n_heads, len(att.tokens)
    on_gpu = f", {att.device_nbytes / 1e6:.1f} MB of it on the GPU" if att.device_nbytes else ""
    st.caption(f"{n:,} tokens · {L} layers × {H} heads · {att.architecture} · {att.nbytes / 1e6:.1f} MB stored (q, "
               f"k, v and hidden states{on_gpu}; weights are recomputed from q and k for each view)")
    if att.windows_note():
        st.caption(att.windows_note())

    st.subheader("All heads at once")
    head_survey = result_of(survey, "Surveying every head…", att)
    canvas_heatmap(grid_canvas(head_survey.tiles, hover_extra=head_survey.sink_mass, hover_label="sink mass",
                               layer_kinds=tuple(att.layer_kind(i) for i in range(L)), block=head_survey.block,
                               tokens=att.tokens,
                               file_name=file_stem(name, "all-heads"),
                               export_title=f"Every head: {L} layers × {H} heads of {att.model_name}"),
                   key="heads.grid", on_click=head_opener("heads.grid"))
    st.caption("Each tile is one head: rows are queries, columns keys, in token order"
               + (f", each cell the largest weight in a block of {head_survey.block}×{head_survey.block} tokens, so "
                  "thin patterns (diagonals, a column on one sink token) stay visible" if head_survey.block > 1 else "")
               + ". Click a tile to open that head in the zoom; hover for its sink mass.")
    with st.expander("Attention sinks: why most heads stare at one token"):
        st.markdown(SINKS_NOTE)
    zoom_and_token(name, att.text, reading)


@st.fragment
def zoom_and_token(name, text: str, reading) -> None:
    """The zoom, the token followed, the lines and cross-attention: a partial rerun (st.fragment). A change of
    view, layer, head or token, or a click in these charts, runs this part again, not the page above it (the
    grid's payload is not sent again). A click on the grid or a new sentence runs the whole page."""
    att = attention_again(name, text)  # the part above made it
    shown = zoom_section(att, name, reading)
    if shown is None:
        return
    focus, layer, head, how, grouping = shown
    alti_section(att, name, layer)
    units = token_section(att, focus, name, reading, grouping)
    lines_section(att, name, layer, head, units, grouping, reading)
    if att.architecture == "encoder-decoder":
        cross_section(name, text, layer, head, how, reading)


def zoom_section(att: ModelAttention, name, reading):
    """The zoom: one head or an aggregation of a layer; (focus, layer, head, how, word grouping), or None when
    the view cannot be drawn (said on the page)."""
    L, H = att.n_layers, att.n_heads
    focus = fit(att)  # the focus as it is now: a partial rerun does not run the page above
    st.subheader("Zoom")
    c1, c2, c3 = st.columns(3)
    how = focus.aggregation if focus.aggregation in AGGREGATIONS else "head"
    if how != focus.aggregation:  # from a link: a view this page does not have
        st.caption(f"“{md(focus.aggregation)}” is not a way to show a layer's heads here: one head is shown.")
        focus = update(aggregation="head")
    key = show("heads.agg", how)
    c1.selectbox("Show", list(AGGREGATIONS), format_func=label_of(AGGREGATIONS, "label"), key=key,
                 on_change=on_change(key, setting("aggregation")))
    one = AGGREGATIONS[how].per_head
    layer, head = layer_and_head(c2, c3, focus, L, H, slot="heads", head_disabled=not one, kinds=att.layer_kind)
    hide = st.toggle("Hide special tokens", value=False, key=linked("heads.hide_special"), bind="query-params",
                     help="[CLS], [SEP], BOS: their rows and columns are dropped and each row rescaled to add up to 1. "
                          "(On a row of its own: in a fourth column its label was cut at 800 px.)")
    st.latex(AGGREGATIONS[how].formula)
    st.caption(AGGREGATIONS[how].plain)
    try:
        view = zoom(att, how, layer=layer, head=head, hide_special=hide, reading=reading)
    except ValueError as err:
        st.warning(md(err))
        return None
    small = view.block == 1 and view.matrix.size <= CLICKABLE_CELLS  # a click on a cell names its query
    grouping = reading.groups(att)
    name_parts = (name, f"layer-{layer + 1}", *((f"head-{head + 1}",) if one else ()), *(() if how == "head" else
                                                                                        (how,)))
    canvas_heatmap(view_canvas(view, clickable=small, click_text="click to follow this query below",
                               file_name=file_stem(*name_parts),
                               meta=figures.focus_meta(layer=layer, head=head if one else None)),
                   key="heads.zoom",
                   on_click=cell_query("heads.zoom", att, view.row_ids, grouping if view.reading.words else None)
                   if small else None)
    if notes := zoom_notes(view, small):
        st.caption(notes)
    export_row(att, view, *name_parts)
    if one and (said := weight_not_norm(att, layer, head, how)):
        st.caption(said)
    if one:  # the layer, head and token are the visit's focus: the next page shows them
        st.page_link("pages/inside_head.py", label=f"Why does {head_name(layer, head)} look there? Inside one head",
                     icon=":material/call_split:", help="Its math step by step, and a score split into the parts of "
                     "the model that wrote its query and its key (section 6).")
    return focus, layer, head, how, grouping


def alti_section(att: ModelAttention, name, layer: int) -> None:
    """ALTI (Ferrando et al. 2022) for the zoom's layer, computed only while its expander is open (a pass over
    every layer's values: attention.models.alti)."""
    box = st.expander("Beyond weights: how much each token makes each token's output (ALTI)",
                      icon=":material/call_merge:", key=linked("heads.alti"), on_change="rerun",
                      bind="query-params")
    if not box.open:
        return
    with box:
        st.caption("A weight says where a head looks; ALTI (Ferrando et al. 2022) measures how much each input "
                   "token makes a token's output, through every head's value vectors, the residual stream and the "
                   "layer norm. Each row sums to 1. Through every layer up to this one, the layers' contributions "
                   "are composed as attention rollout composes weights.")
        if is_saved(name):
            st.info("ALTI needs the model's own layer norms: open the model itself to see it.")
            return
        found = result_or_said(alti, "Measuring ALTI, layer by layer…", model_or_stop(name), att)
        if found is None:
            return
        rolled = st.toggle("Through every layer up to this one", value=True, key="heads.alti_rolled",
                           help="Off: this layer's own contributions, from its input tokens to its output.")
        view = alti_view(found, att, layer, rolled=rolled)
        canvas_heatmap(view_canvas(view, file_name=file_stem(name, f"layer-{layer + 1}", "alti"),
                                   meta=figures.focus_meta(layer=layer)), key="heads.alti_map")
        st.caption("Row i: how much each token (column) makes token i's output; a token keeps much of itself "
                   "through the residual stream, which weights alone do not show.")
    export_row(att, view, name, f"layer-{layer + 1}", "alti")  # outside the box: inside, its last row was cut


def weight_not_norm(att: ModelAttention, layer: int, head: int, how: str) -> str:
    """Where this head parks weight it does not use (attention.models.parked_weight), a sentence; "" otherwise.
    `how`: the zoom's view, to point at the norms only where they are not on screen."""
    parked = parked_weight(att, layer, head)
    if parked is None:
        return ""
    tokens, weight, norm = parked
    named = ", ".join(f"“{md(token)}”" for token in tokens[:3])
    they = "they make" if len(tokens) > 1 else "it makes"
    return (f"This head puts {weight:.0%} of its weight on {named}, yet {they} only {norm:.0%} of what the head "
            "hands over (its weighted norms, Kobayashi et al. 2020): weight it parks there, not what it reads."
            + (" Show “one head, weighted norms” to see the rest." if how == "head" else ""))


def zoom_notes(view, clickable: bool) -> str:
    """What the zoom's reading did to its rows, and what a click does, in a sentence or three ("" for none)."""
    notes = []
    if view.reading.words:
        notes.append("Words: attention *to* a word is the sum over its pieces, *from* a word the mean of its pieces' "
                     "rows, so rows still sum to 1.")
    if view.reading.without_sinks:
        gone = ", ".join(f"“{md(token)}”" for token in view.sinks)
        notes.append(f"Without sinks: {gone} removed (grey), each row renormalised to sum to 1.")
    if clickable:
        notes.append("Click a cell to follow its query token below.")
    return " ".join(notes)


def token_section(att: ModelAttention, focus, name, reading, grouping):
    """Where the token followed looks in every layer and head; returns the units shown (tokens or words)."""
    L, H = att.n_layers, att.n_heads
    st.subheader("Where does one token look, in every head?")
    units = shown_tokens(att) if grouping is None else grouping.words  # " bank" as "␣bank"
    followed = query_picker(st, focus, att, slot="heads", grouping=grouping, source=name)
    focus_view = token_focus(att, followed, reading=reading)
    if focus_view.empty:  # an empty frame 1,300 px tall said nothing: say why instead
        st.info(f"“{md(units[followed])}” keeps no weight to draw"
                + (": without sinks, every key it sees is a sink (a decoder's first token sees only itself). Pick a "
                   "later token, or switch “Without sinks” off." if reading.without_sinks else "."))
    else:
        canvas_heatmap(view_canvas(focus_view, x_title="key word" if grouping else "key token", y_title="layer · head",
                                   height=min(1600, max(320, 130 + (15 if L * H <= 96 else 12) * L * H)),
                                   row_groups=H if L * H > 96 else None,  # 15 px a row: every head named
                                   clickable=True, click_text="click to open this head in the zoom",
                                   file_name=file_stem(name, "token", followed),
                                   meta=figures.focus_meta(token=units[followed])),
                       key="heads.focus", on_click=row_head_opener("heads.focus", H))
    return units


def lines_section(att: ModelAttention, name, layer: int, head: int, units, grouping, reading) -> None:
    """BertViz's line view of one layer's heads, on request (up to LINE_VIEW_MAX_UNITS tokens or words)."""
    H = att.n_heads
    st.subheader("Lines: one layer's heads, query to key")
    if st.toggle("Show the line view", value=False, key=linked("heads.show_lines"), bind="query-params",
                 help=f"BertViz's picture: queries left, keys right, a line per pair whose opacity is the weight. "
                      f"Up to {LINE_VIEW_MAX_UNITS} tokens (or words)."):
        if len(units) > LINE_VIEW_MAX_UNITS:
            st.info(f"The line view draws up to {LINE_VIEW_MAX_UNITS} {'words' if grouping else 'tokens'}; this text "
                    f"has {len(units):,}. The zoom and the token focus above show every one.")
        else:
            c1, c2 = st.columns([2, 1])
            heads_shown, queries = [h + 1 for h in range(H)], [None, *range(len(units))]
            picked = c1.multiselect("Heads of this layer", heads_shown, default=[head + 1],
                                    key=among("heads.line_heads", heads_shown), max_selections=8,
                                    help="One colour per head; up to 8.")
            only = c2.selectbox("Lines of", queries, key=among(labelled_key("heads.line_query", units), queries),
                                format_func=label_or_every(units))
            if picked:
                lines = line_view(att, layer, [h - 1 for h in picked], query=only, reading=reading)
                st.plotly_chart(figures.attention_lines(lines, title=f"Layer {layer + 1}: line opacity = weight"),
                                width="stretch", key="heads.lines",
                                config=chart_config(name, f"layer-{layer + 1}", "lines"))
                unit = "words" if grouping else "tokens"
                st.caption((f"Over {LINE_VIEW_TOKENS} {unit}: each query keeps its {lines.top} strongest lines. "
                            if lines.top else "") + "Hover a line's middle for its weight.")


def cross_section(name, text: str, layer: int, head: int, how: str, reading) -> None:
    """An encoder-decoder model's cross-attention: each target token reading the source."""
    st.subheader("Cross-attention: each target token reads the source")
    decoder_text = st.text_input("Target sentence (empty: the model's own greedy translation)",
                                 key=linked("heads.decoder_text"), bind="query-params", max_chars=2000)
    translation = attention_or_stop(name, text, decoder_text.strip() or None, say_check=False)
    cross_how = how if "cross" in AGGREGATIONS[how].stacks else "mean"
    if cross_how != how:
        st.caption(f"{AGGREGATIONS[how].label} is defined for self-attention; cross-attention shows the mean over "
                   "heads.")
    cross = zoom(translation, cross_how, layer=layer, head=head, stack="cross", reading=reading)  # (t, n)
    st.plotly_chart(figures.view_heatmap(cross, x_title="source token (key)", y_title="target token (query)"),
                    width="stretch", key="heads.cross")


result(name, text, reading)
path_links("pages/model_heads.py")
