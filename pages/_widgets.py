"""The widgets the model pages share: the model and sentence, layer and head, the reading switches, and
what a click on a chart opens. Each is kept in the URL and carried across pages (pages/_carried.py)."""

import functools
from collections.abc import Callable

import streamlit as st

from attention.models import (
    BUNDLED,
    DEFAULT_DECODER,
    DEFAULT_ENCODER,
    DTYPES,
    LOCAL_PREFIX,
    MAX_TEXT_CHARS,
    NPZ_MAX_BYTES,
    SMALL_MODEL_BYTES,
    Contrast,
    LoadedModel,
    ModelAttention,
    Reading,
    contrast,
    hub_allowlist,
    local_models,
    model_key,
    model_label,
    word_groups,
)
from attention.toy import examples as ex
from pages._carried import carried, example_filler, fill, remember, switch_to
from pages._jobs import attention_or_stop, model_or_stop, open_saved
from pages._text import md

OTHER = "other (Hugging Face id)…"
PRECISION_HELP = (
    f"The dtype the model runs in. auto: float32 for a model whose float32 weights take at most "
    f"{SMALL_MODEL_BYTES / 1e9:g} GB on the CPU, else the checkpoint's own (bfloat16 when it names none). Half "
    "precision halves the weights' memory. Our weights are computed in float32 from the model's own q and k in any "
    "precision, and the check under the page holds them to the model's own attention in that precision.")
DEFAULT_TEXT = "I sat on the river bank and watched the water."


def pick_model(col=st, default: str = DEFAULT_ENCODER) -> str:
    """The model selectbox (bundled models, or an allowlisted hub id typed in) and its precision, kept across
    pages; `default` when no model page has chosen one yet. Returns the model_key (name, and precision when
    not "auto")."""
    name = _model_name(col, default)
    precision = col.selectbox("Precision", DTYPES, index=DTYPES.index(carried("precision", "auto")), key="precision",
                              bind="query-params", help=PRECISION_HELP)
    remember("precision", precision)
    return model_key(name, precision)


def _model_name(col, default: str) -> str:
    listed = list(local_models())  # an operator's folders: ATTENTION_EXPLORER_MODEL_DIRS, read at every run
    carried_model = carried("model", default)
    # A folder this session chose that the operator has since removed stays in the list, so the page says
    # so when it is loaded (or goes on from memory when it already was) instead of showing another model.
    chosen = (st.session_state.get("model"), st.query_params.get("model"), carried_model)
    gone = [x for x in dict.fromkeys(chosen) if isinstance(x, str) and x.startswith(LOCAL_PREFIX) and x not in listed]
    options = list(BUNDLED) + listed + gone + [OTHER]
    index = options.index(carried_model if carried_model in options else default)
    bundled = "; ".join(f"{spec.label}: {spec.about}" for spec in BUNDLED.values())
    choice = col.selectbox("Model", options, index=index, key="model", bind="query-params", format_func=model_label,
                           help=f"{bundled}. A local folder is one an operator listed; a Hugging Face id must be on "
                                "the server's allowlist.")
    remember("model", choice)
    if choice != OTHER:
        return choice
    hub_id = col.text_input("Hugging Face model id", value=carried("hub_id", "bert-base-uncased"), key="hub_id",
                            bind="query-params", max_chars=100, help="Allowed here: " + ", ".join(hub_allowlist()))
    remember("hub_id", hub_id)
    return hub_id


def prediction_example(prefix: str) -> tuple[str, str, str]:
    """The example picker of the pages that read a prediction: the chosen example's (prompt, target, foil);
    choosing one fills the sentence box and the `<prefix>.target` and `<prefix>.foil` inputs."""
    example = st.selectbox("Example", list(ex.PREDICTION_EXAMPLES), key=f"{prefix}.example",
                           on_change=example_filler(ex.PREDICTION_EXAMPLES, f"{prefix}.example",
                                                    ("text", f"{prefix}.target", f"{prefix}.foil")))
    return ex.PREDICTION_EXAMPLES[example]


def prediction_start(prefix: str) -> tuple[str, str, ModelAttention, LoadedModel, tuple[str, str]]:
    """What both pages that read a prediction start with: the example picker, the sentence and model (the
    bundled decoder by default), the model's result on it. Returns (model name, text, result, model, the
    example's (target, foil))."""
    prompt, target, foil = prediction_example(prefix)
    name, text = sentence_and_model(prompt, model=DEFAULT_DECODER)
    return name, text, attention_or_stop(name, text), model_or_stop(name), (target, foil)


def target_and_foil(prefix: str, att: ModelAttention, tokenizer, defaults: tuple[str, str]) -> Contrast:
    """The target and foil inputs side by side, read once into a Contrast (attention.models.contrast: its
    target.text and foil.text are the words as typed), what each word became, and m in a formula; words that
    cannot be read end the page with their message."""
    c1, c2 = st.columns(2)
    target = c1.text_input("expected next token (target)", value=defaults[0], key=f"{prefix}.target", max_chars=40)
    foil = c2.text_input("an alternative (foil)", value=defaults[1], key=f"{prefix}.foil", max_chars=40)
    try:
        made = contrast(att, tokenizer, target, foil)  # tokenized here, once, for everything the page reads
    except ValueError as err:
        st.warning(md(err))
        st.stop()
    for choice, col in ((made.target, c1), (made.foil, c2)):
        col.caption(f"“{md(choice.text)}” is one token." if choice.pieces == 1 else
                    f"“{md(choice.text)}” is {choice.pieces} tokens; the first, “{md(choice.token)}”, is used. A "
                    "leading space matters: “ Mary” and “Mary” are different tokens.")
    st.latex(rf"m = \text{{logit}}(\text{{target}}) - \text{{logit}}(\text{{foil}}) = {made.target_logit:.2f} - "
             rf"{made.foil_logit:.2f} = {made.baseline:.2f}")
    return made


def sentence_and_model(default: str = DEFAULT_TEXT, model: str = DEFAULT_ENCODER) -> tuple[str, str]:
    """The sentence box and, beside it, the model picker (both kept in the URL and across model pages).
    Returns (model, text)."""
    c1, c2 = st.columns([2, 1])  # at 800 px a quarter of the row cut "SmolLM2-135M" to "SmolLM2-", 3/10 to "…-135"
    limits = ", ".join(f"{spec.max_tokens:,} for {spec.label}" for spec in BUNDLED.values())
    text = c1.text_area("Sentence", value=carried("text", default), key="text", bind="query-params",
                        max_chars=MAX_TEXT_CHARS, height=80, help=f"Tokens read at most: {limits}.")
    remember("text", text)
    picked = pick_model(c2, model)
    opened = saved_result()
    return (opened, text) if opened else (picked, text)


def saved_result() -> str | None:
    """An expander to open a result saved as .npz (the .npz button, or attention's export_npz in a notebook:
    a model too big for this machine, run where it fits). Returns its key (RESULT_PREFIX + its digest),
    kept across pages until closed, or None: the page then runs the model picked above."""
    key = carried("saved_result", None)
    with st.expander("Open a result saved as .npz (no model needed)", expanded=key is not None):
        file = st.file_uploader(".npz file", type=["npz"], key=f"npz_file.{carried('saved_round', 0)}",
                                max_upload_size=NPZ_MAX_BYTES // 1_000_000,
                                help="What the .npz button downloads, or attention.models.export_npz(att) writes. "
                                     "Only plain arrays are read (never pickled objects).")
        if file is not None:
            key = open_saved(file.name, file.getvalue())
            remember("saved_result", key)
        if key is not None:
            st.button("Close it and run the model again", key="npz_close", on_click=close_saved)
    return key


def close_saved() -> None:
    """on_click: forget the opened file, and give the next visit a fresh, empty uploader."""
    remember("saved_result", None)
    remember("saved_round", carried("saved_round", 0) + 1)


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


def reading_switches(att, *, log_scale: bool = True) -> Reading:
    """The row of switches every model page offers, kept in the URL and across pages: words instead of
    pieces, attention sinks removed, a log colour scale (where the page draws weights as colours). The
    views apply the Reading themselves (attention.models.recorded.views)."""
    c1, c2, c3 = st.columns(3)
    try:
        word_groups(att)
    except ValueError as err:
        why = str(err)
    else:
        why = None
    words = c1.toggle("Words", value=carried("words", False), key="words", bind="query-params",
                      disabled=why is not None,
                      help=why or "Words, not pieces: merge sub-word pieces into the words the tokenizer split the "
                                  "text into. Attention to a word is the sum over its pieces, attention from a word "
                                  "the mean of its pieces' rows (rows still sum to 1).")
    without_sinks = c2.toggle("Without sinks", value=carried("no_sinks", False), key="no_sinks",
                              bind="query-params",
                              help="Remove each head's sink tokens (the first token, [CLS]/[SEP]/BOS, and any token "
                                   "holding over half the weight of most rows) and renormalise every row to sum to 1.")
    log = log_scale and c3.toggle("Log colours", value=carried("log", False), key="log", bind="query-params",
                                  help="Colour by log10(weight) from 0.0001 to 1: small weights stay visible beside "
                                       "a sink.")
    for key, value in (("words", words), ("no_sinks", without_sinks)) + ((("log", log),) if log_scale else ()):
        remember(key, value)
    image_format()
    return Reading(words=words and why is None, without_sinks=without_sinks, log=log)


def image_format() -> str:
    """The sidebar's choice of format for the charts' camera button (PNG or SVG), kept across pages; once
    per page run (reading_switches calls it)."""
    fmt = st.sidebar.segmented_control("Chart images", ["png", "svg"], default=carried("image_format", "png"),
                                       key="image_format", bind="query-params",
                                       help="The camera button of every chart saves this format at 2× size.")
    fmt = fmt or "png"
    remember("image_format", fmt)
    return fmt


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
            switch_to(page)


def tile_opener(chart_key: str) -> Callable[[], None]:
    """on_select for the all-heads grid (a partial, not a page lambda: pages/_labels.py says why)."""
    return functools.partial(_open_tile, chart_key)


def query_picker(chart_key: str, row_ids) -> Callable[[], None]:
    """on_select for the zoom: a click on a cell follows its query below."""
    return functools.partial(_pick_query, chart_key, row_ids)


def _open_tile(chart_key: str) -> None:
    """The clicked tile's layer and head go to the zoom (one head)."""
    points = st.session_state[chart_key]["selection"]["points"]
    if points:
        fill({"layer": int(round(points[0]["y"])), "head": int(round(points[0]["x"])), "agg": "head"})


def _pick_query(chart_key: str, row_ids) -> None:
    """The clicked cell's row becomes the token followed below."""
    points = st.session_state[chart_key]["selection"]["points"]
    if points:
        y = points[0]["y"]  # a row number, or in a large heatmap its category "12·bank"
        row = int(y.split("·")[0]) if isinstance(y, str) else int(round(y))
        fill({"focus": row_ids[row] if row_ids is not None else row})
