"""What the model pages share: the model picker, cached loading, attention and surveys, progress, errors.

Models are cached once per process with st.cache_resource (LoadedModel serialises its forward passes
with a lock, so sessions can share it). Slow work (a forward pass over thousands of tokens, a survey of
every head) is cached as a Job: st.cache_resource hands every session asking for the same text the
same Job, which computes in its own thread and reports progress that each page draws as a bar. A Job
that failed is not kept (`validate`), so the next rerun tries again.

Results are read-only numpy arrays shared by every session. Memory: a result stores q, k, v and the
hidden states (they grow as n, not n²); long texts get a cache of their own with room for one entry,
so a 4,096-token SmolLM2 result (~0.8 GB) never sits beside three others.
"""

import functools
import gc
import threading
import weakref
from collections.abc import Callable
from urllib.parse import urlencode

import streamlit as st

from attention import plotting
from attention.models import (
    BUNDLED,
    HeadSurvey,
    LoadedModel,
    ModelAttention,
    ModelUnavailable,
    hub_allowlist,
    load_model,
    own_attention,
    survey,
)
from attention.models.aggregations import AGGREGATIONS, MatrixView
from attention.models.export import file_stem, matrix_csv, sentence_npz
from attention.models.head_effects import attribution_patching, head_ablation, head_ablation_cosine
from attention.models.predictions import generate
from attention.models.words import WordGroups, word_groups
from pages._text import md

OTHER = "other (Hugging Face id)…"
DEFAULT_TEXT = "I sat on the river bank and watched the water."
MAX_TEXT_CHARS = 60_000  # the text box's limit: ~12,000 tokens, more than any model here reads
LONG_TEXT_CHARS = 2_000  # above this a text counts as long (~500 tokens): its results share one cache slot
HUGE_TEXT_CHARS = 8_000  # above this (~2,000 tokens, a SmolLM2 result of ~0.4 GB) collect garbage first


class Job:
    """A computation shared by every session that asks for it: it runs in its own thread and reports
    how far it got, so each page can draw a progress bar while it waits."""

    def __init__(self, work: Callable[[Callable[[float, str], None]], object], message: str):
        self.fraction, self.message = 0.0, message
        self.result, self.error = None, None
        self._done = threading.Event()
        threading.Thread(target=self._run, args=(work,), daemon=True, name="attention-explorer-job").start()

    def _run(self, work) -> None:
        try:
            self.result = work(self._progress)
        except Exception as err:  # handed to the page that waits for it
            self.error = err
        finally:
            self._done.set()

    def _progress(self, fraction: float, message: str) -> None:
        self.fraction, self.message = fraction, message

    def wait(self, seconds: float) -> bool:
        return self._done.wait(seconds)

    def usable(self) -> bool:
        """False once it has failed: st.cache_resource then drops it and the next call starts again."""
        return not (self._done.is_set() and self.error is not None)


def follow(job: Job):
    """Wait for a job, drawing a progress bar if it takes more than a moment; its error is raised here."""
    if not job.wait(0.3):
        bar = st.progress(0.0, text=job.message)
        while not job.wait(0.2):
            bar.progress(min(1.0, job.fraction), text=job.message)
        bar.empty()
    if job.error is not None:
        raise job.error
    return job.result


def model_label(name: str) -> str:
    """What the model picker shows, and so what ?model= holds in a URL: "minilm" -> its label."""
    return BUNDLED[name].label if name in BUNDLED else name


@st.cache_resource(max_entries=4, show_spinner=False)
def cached_model(name: str) -> LoadedModel:
    return load_model(name)


def _attention_job(name: str, text: str, target: str | None, loaded: LoadedModel) -> Job:
    return Job(lambda progress: loaded.attend(text, target=target, progress=progress),
               f"Running {model_label(name)}…")


def _long_attention_job(name: str, text: str, target: str | None, loaded: LoadedModel) -> Job:
    def work(progress):
        # The result this one replaces in the cache may still be held by the page run that showed it: a
        # run's namespace is a reference cycle (its functions point back at it), freed only by the cyclic
        # collector, whose oldest generation runs rarely. For huge texts collect now, not after 0.8 GB
        # more is allocated (a full collection costs ~0.3 s with both models loaded: not worth it below).
        if len(text) > HUGE_TEXT_CHARS:
            gc.collect()
        return loaded.attend(text, target=target, progress=progress)
    return Job(work, f"Running {model_label(name)}…")


@st.cache_resource(max_entries=4, show_spinner=False, validate=Job.usable)
def _short_attention(name: str, text: str, target: str | None, _loaded: LoadedModel) -> Job:
    return _attention_job(name, text, target, _loaded)


@st.cache_resource(max_entries=1, show_spinner=False, validate=Job.usable)
def _long_attention(name: str, text: str, target: str | None, _loaded: LoadedModel) -> Job:
    return _long_attention_job(name, text, target, _loaded)


@st.cache_resource(max_entries=4, show_spinner=False, validate=Job.usable)
def _survey(name: str, text: str, _att: ModelAttention) -> Job:
    return Job(lambda progress: survey(_att, progress=progress), "Surveying every head…")


@st.cache_resource(max_entries=8, show_spinner=False, validate=Job.usable)
def generation_job(name: str, text: str, max_new_tokens: int, greedy: bool, temperature: float, seed: int,
                   _loaded: LoadedModel) -> Job:
    return Job(lambda progress: generate(_loaded, text, max_new_tokens=max_new_tokens, greedy=greedy,
                                         temperature=temperature, seed=seed, progress=progress), "Generating…")


@st.cache_resource(max_entries=8, show_spinner=False, validate=Job.usable)
def ablation_job(name: str, text: str, target: str, foil: str, method: str, _loaded: LoadedModel) -> Job:
    """The exact scan, one per (model, text, target, foil, method), shared by the sessions asking for it."""
    return Job(lambda progress: head_ablation(_loaded, text, target, foil, method=method, progress=progress),
               "Ablating every head…")


@st.cache_resource(max_entries=8, show_spinner=False, validate=Job.usable)
def vector_ablation_job(name: str, text: str, word: str, method: str, _loaded: LoadedModel) -> Job:
    return Job(lambda progress: head_ablation_cosine(_loaded, text, word, method=method, progress=progress),
               "Ablating every head…")


@st.cache_resource(max_entries=8, show_spinner=False, validate=Job.usable)
def patching_job(name: str, text: str, target: str, foil: str, method: str, _loaded: LoadedModel) -> Job:
    return Job(lambda progress: attribution_patching(_loaded, text, target, foil, method=method),
               "Estimating every head's effect…")


@st.cache_resource(max_entries=8, show_spinner=False)
def cached_own_attention(name: str, text: str, layer: int, _loaded: LoadedModel, _att: ModelAttention):
    return own_attention(_loaded, _att, layer)


def carried(key: str, default):
    """The value the widget `key` had on the last model page, else `default`: pass it as the widget's
    default, and remember() what the widget returns.

    Streamlit forgets a widget's state when its page is left, so a sentence typed on Model heads was gone on
    Inside one head, and a 4,000-token text cannot travel in a URL (uvicorn refuses request lines over
    16 KB). A URL's own ?text= still wins: it sets the widget when the page opens.
    """
    return st.session_state.get(f"carried.{key}", default)


def remember(key: str, value) -> None:
    st.session_state[f"carried.{key}"] = value


def pick_model(col=st) -> str:
    """The model selectbox (bundled models, or an allowlisted hub id typed in), kept across pages."""
    options = list(BUNDLED) + [OTHER]
    choice = col.selectbox("Model", options, index=options.index(carried("model", options[0])), key="model",
                           bind="query-params", format_func=model_label)
    remember("model", choice)
    if choice != OTHER:
        return choice
    hub_id = col.text_input("Hugging Face model id", value=carried("hub_id", "bert-base-uncased"), key="hub_id",
                            bind="query-params", max_chars=100, help="Allowed here: " + ", ".join(hub_allowlist()))
    remember("hub_id", hub_id)
    return hub_id


def sentence_and_model(default: str = DEFAULT_TEXT) -> tuple[str, str]:
    """The sentence box and, beside it, the model picker (both kept in the URL and across model pages).
    Returns (model, text)."""
    c1, c2 = st.columns([3, 1])
    text = c1.text_area("Sentence", value=carried("text", default), key="text", bind="query-params",
                        max_chars=MAX_TEXT_CHARS, height=80,
                        help="Up to 512 tokens for MiniLM, 4,096 for SmolLM2 (about 3,000 words).")
    remember("text", text)
    return pick_model(c2), text


def example_filler(examples: dict, picker: str, fields: tuple[str | None, ...]) -> Callable[[], None]:
    """on_change for an example picker: copy the chosen example's values into the widgets keyed `fields`
    (None skips one). Only a change of example fills them: a sentence brought from another page stays."""
    return functools.partial(_fill_from_example, examples, picker, fields)


def _fill_from_example(examples: dict, picker: str, fields: tuple[str | None, ...]) -> None:
    values = examples[st.session_state[picker]]
    _fill({field: value for field, value in zip(fields, values, strict=True) if field})


def model_switcher(name: str) -> Callable[[], None]:
    """on_click for a button that moves this page (and the next ones) to model `name`."""
    return functools.partial(_fill, {"model": name})


def _fill(values: dict) -> None:
    for key, value in values.items():  # in a callback: the widget (and the browser, and the URL) take it
        remember(key, value)
        st.session_state[key] = value


def layer_and_head(col_layer, col_head, n_layers: int, n_heads: int, *, head_disabled: bool = False) -> tuple[int, int]:
    """The Layer and Head inputs (1-based on screen), kept in the URL and across model pages. Returns
    0-based (layer, head)."""
    layer = col_layer.number_input("Layer", 1, n_layers, min(carried("layer", 1), n_layers), key="layer",
                                   bind="query-params")
    head = col_head.number_input("Head", 1, n_heads, min(carried("head", 1), n_heads), key="head",
                                 bind="query-params", disabled=head_disabled)
    layer, head = min(layer, n_layers), min(head, n_heads)
    remember("layer", layer)
    remember("head", head)
    return layer - 1, head - 1


def open_head_buttons(layer: int, head: int, *, key: str) -> None:
    """Buttons that open Model heads and Inside one head on this model, text, layer and head (0-based)
    in this tab: the text may be far too long for a link, and every model page reads what is carried."""
    c1, c2 = st.columns(2)
    for col, page, label, icon in ((c1, "pages/model_heads.py", "Zoom into it in Model heads", ":material/zoom_in:"),
                                   (c2, "pages/inside_head.py", "See its math in Inside one head",
                                    ":material/calculate:")):
        if col.button(label, icon=icon, key=f"{key}.{page}"):
            remember("layer", layer + 1)
            remember("head", head + 1)
            remember("agg", "head")
            st.switch_page(page)


def model_or_stop(name: str) -> LoadedModel:
    """The loaded model, with a spinner that says what is happening; an unavailable model ends the page."""
    first = "" if name != "smollm2" else " (the very first time converts the bundled file: ~20 s)"
    try:
        with st.spinner(f"Loading {model_label(name)}{first}…"):
            return cached_model(name)
    except ModelUnavailable as err:
        st.error(f"**Model unavailable.** {md(err)}")
        st.stop()


def attention_or_stop(name: str, text: str, target: str | None = None) -> ModelAttention:
    """Load the model and run it (a progress bar per layer on long texts); errors end the page cleanly."""
    loaded = model_or_stop(name)
    cache = _long_attention if len(text) > LONG_TEXT_CHARS else _short_attention
    try:
        att = follow(cache(name, text, target, loaded))
    except ValueError as err:
        st.warning(md(err))
        st.stop()
    if att.truncated:
        st.warning(f"The text has {att.n_input_tokens:,} tokens; {model_label(name)} reads at most "
                   f"{len(att.tokens):,} here, so only the beginning is shown.")
    return att


def survey_or_stop(name: str, text: str, att: ModelAttention) -> HeadSurvey:
    """Every head's summaries, computed once per text (a progress bar per layer on long texts)."""
    return follow(_survey(name, text, att))


# --- Reading options, clicks and export, shared by the model pages (issue: words, sinks, lines, export) ---------

def reading_options(att: ModelAttention, *, log_scale: bool = True) -> tuple[WordGroups | None, bool, bool]:
    """The row of toggles every model page offers, kept in the URL and across pages: words instead of
    pieces, attention sinks removed, a log colour scale (where the page draws weights as colours).
    Returns (word groups or None, without sinks, log)."""
    c1, c2, c3 = st.columns(3)
    try:
        groups = word_groups(att)
    except ValueError as err:
        groups, why = None, str(err)
    else:
        why = None
    words = c1.toggle("Words", value=carried("words", False), key="words", bind="query-params",
                      disabled=groups is None,
                      help=why or "Words, not pieces: merge sub-word pieces into the words the tokenizer split the "
                                  "text into. Attention to a word is the sum over its pieces, attention from a word "
                                  "the mean of its pieces' rows (rows still sum to 1).")
    no_sinks = c2.toggle("Without sinks", value=carried("no_sinks", False), key="no_sinks", bind="query-params",
                         help="Remove each head's sink tokens (the first token, [CLS]/[SEP]/BOS, and any token holding "
                              "over half the weight of most rows) and renormalise every row to sum to 1.")
    log = log_scale and c3.toggle("Log colours", value=carried("log", False), key="log", bind="query-params",
                                  help="Colour by log10(weight) from 0.0001 to 1: small weights stay visible beside "
                                       "a sink.")
    for key, value in (("words", words), ("no_sinks", no_sinks)) + ((("log", log),) if log_scale else ()):
        remember(key, value)
    image_format()
    return (groups if words else None), no_sinks, log


SINKS_NOTE = ("**Why sinks?** Softmax must put each row's weight somewhere. Heads with nothing useful to read park "
              "it on a token every query can see, usually the first token or [SEP]/[CLS] (Clark et al. 2019, "
              "“What does BERT look at?”). Xiao et al. (2023, “Efficient streaming language models with attention "
              "sinks”) found that models keep the first tokens as such sinks even when they carry no meaning: "
              "removing them from the cache breaks generation. The weight is large but the value vectors there are "
              "small, so the head adds little; the norm-based view (“Show: norm”, ‖α v W_O‖, Kobayashi et al. 2020) "
              "shrinks sinks for that reason. “Without sinks” shows what the rest of each row looks like.")


def image_format() -> str:
    """The sidebar's choice of format for the charts' camera button (PNG or SVG), kept across pages; once
    per page run (reading_options calls it)."""
    fmt = st.sidebar.segmented_control("Chart images", ["png", "svg"], default=carried("image_format", "png"),
                                       key="image_format", bind="query-params",
                                       help="The camera button of every chart saves this format at 2× size.")
    fmt = fmt or "png"
    remember("image_format", fmt)
    return fmt


def chart_config(*name_parts) -> dict:
    """st.plotly_chart's config: the camera saves `model_layer-3_head-5.png` (or .svg, as image_format() in
    the sidebar says) at 2×."""
    return plotting.image_config(file_stem(*name_parts), carried("image_format", "png"))


def tile_opener(chart_key: str) -> Callable[[], None]:
    """on_select for the all-heads grid (a partial, not a page lambda: pages/_labels.py says why)."""
    return functools.partial(open_tile, chart_key)


def query_picker(chart_key: str, row_ids) -> Callable[[], None]:
    """on_select for the zoom: a click on a cell follows its query below."""
    return functools.partial(pick_query, chart_key, row_ids)


def open_tile(chart_key: str) -> None:
    """on_select of the all-heads grid: the clicked tile's layer and head go to the zoom (one head)."""
    points = st.session_state[chart_key]["selection"]["points"]
    if points:
        _fill({"layer": int(round(points[0]["y"])), "head": int(round(points[0]["x"])), "agg": "head"})


def pick_query(chart_key: str, row_ids) -> None:
    """on_select of the zoom: the clicked cell's row becomes the token followed below."""
    points = st.session_state[chart_key]["selection"]["points"]
    if points:
        y = points[0]["y"]  # a row number, or in a large heatmap its category "12·bank"
        row = int(y.split("·")[0]) if isinstance(y, str) else int(round(y))
        _fill({"focus": row_ids[row] if row_ids is not None else row})


VIEW_KEYS = {  # widget key -> how its value is written in a URL (selectboxes by the label they show)
    "model": model_label, "hub_id": str, "text": str, "layer": str, "head": str,
    "agg": lambda key: AGGREGATIONS[key].label, "hide_special": str, "words": str, "no_sinks": str, "log": str,
}


def view_link(url: str) -> str:
    """`url` with the query parameters that reopen this view. The URL alone misses some: a bound widget whose
    value equals its default is left out of it, and defaults here are what was carried from the last page."""
    params = st.query_params.to_dict()
    for key, written in VIEW_KEYS.items():
        value = st.session_state.get(key)
        if key not in params and value is not None:
            params[key] = str(value).lower() if isinstance(value, bool) else written(value)
    return f"{url}?{urlencode(params)}"


def _npz_of(result: weakref.ref) -> bytes:
    """The .npz download, built when clicked. The button keeps this callable until it is drawn again, so it
    holds the result weakly: a strong reference kept a 4,096-token result (0.8 GB) alive beside the next."""
    att = result()
    if att is None:  # the result left the cache since the page was drawn (another text was read)
        raise RuntimeError("this sentence's result is no longer cached: run the page again and download")
    return sentence_npz(att)


def export_row(att: ModelAttention, view: MatrixView, *name_parts) -> None:
    """Downloads of the matrix on screen (CSV) and of everything for the sentence (.npz), and a link that
    reopens this view."""
    stem = file_stem(*name_parts)
    c1, c2, c3 = st.columns(3)
    c1.download_button("CSV", functools.partial(matrix_csv, view), file_name=f"{stem}.csv", mime="text/csv",
                       icon=":material/table:", on_click="ignore", key=f"csv.{stem}",
                       help="The matrix on screen, one row per query, with its labels.")
    c2.download_button(".npz", functools.partial(_npz_of, weakref.ref(att)),
                       file_name=f"{file_stem(att.model_name, 'sentence')}.npz", mime="application/octet-stream",
                       icon=":material/download:", on_click="ignore", key=f"npz.{stem}",
                       help="Tokens, ids, every layer's weights (or q, k, v for long inputs), model name and text; "
                            "np.load(path) reads it back with numpy alone.")
    with c3.popover("Link", icon=":material/link:", help="A link that reopens this view"):
        url = st.context.url
        if url:
            st.code(view_link(url), language=None, wrap_lines=True)
            if len(att.text) > 2000:
                st.caption("This text is too long for a link: the link keeps the view, the text must be pasted.")
        else:
            st.caption("The link is known once the page is open in a browser.")
