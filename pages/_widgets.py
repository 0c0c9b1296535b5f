"""The widgets the model pages share. Each shows a part of the visit's focus and sets it (pages/_focus.py):
the model and its precision, the sentence, a result opened from a file, the layer and head, the token
followed, the reading switches, a prediction's example, target and foil (what a click on a chart opens:
pages/_clicks.py).

Every widget's key starts with the `slot` it is drawn for (the page, or one of two pickers on a page):
"heads.layer" on Model heads, "inside.layer" on Inside one head. Setters are module functions bound with
functools.partial, never lambdas in a page (pages/_labels.py says why).
"""

import functools
import zlib
from collections.abc import Callable

import streamlit as st

from attention.focus import VISIBLE_SPACE
from attention.glossary import definition
from attention.models import (
    AGGREGATIONS,
    BUNDLED,
    CONTRIBUTION_MEASURES,
    DEFAULT_ENCODER,
    DTYPES,
    LOCAL_PREFIX,
    MAX_TEXT_CHARS,
    NPZ_MAX_BYTES,
    SMALL_MODEL_BYTES,
    Focus,
    ModelAttention,
    ModelChoice,
    Reading,
    TokenAt,
    default_focus,
    hub_allowlist,
    local_models,
    measure_of,
    model_label,
    model_name,
    shown_tokens,
    with_measure,
    word_groups,
)
from pages._focus import current, on_change, put, setting, show, shown, update
from pages._jobs import SavedResult, Source, open_saved
from pages._labels import token_labels
from pages._partial import rerun_part
from pages._text import md

OTHER = "other (Hugging Face id)…"
HUB_EXAMPLE = "bert-base-uncased"  # what the id box holds when "other" is first picked
PRECISION_HELP = (
    f"The dtype the model runs in. auto: float32 for a model whose float32 weights take at most "
    f"{SMALL_MODEL_BYTES / 1e9:g} GB on the CPU, else the checkpoint's own (bfloat16 when it names none). Half "
    "precision halves the weights' memory. Our weights are computed in float32 from the model's own q and k in any "
    "precision: when the model loads, each layer's are checked against its own attention, and the line under the "
    "pickers says how close they are in that precision.")
DEFAULT_TEXT = "I sat on the river bank and watched the water."


# --- the model ---------------------------------------------------------------------------------------------
def chosen_model(focus: Focus, default: str, field: str = "model") -> ModelChoice:
    """The model the focus names in `field` ("model", or "other": a comparison's second model; a bundled
    model's label from an older link read as its key), else `default`, the page's own."""
    model = getattr(focus, field)
    if model is None:
        return ModelChoice(default)
    return ModelChoice(model_name(model.name), model.dtype)


def model_picker(col, focus: Focus, *, slot: str, default: str = DEFAULT_ENCODER, field: str = "model",
                 which: str = "") -> ModelChoice:
    """The model selectbox (bundled models, an operator's folders, or an allowlisted hub id typed in) and its
    precision, for the focus's `field` ("model"; "other", a comparison's second model), labelled "Model" and
    "Precision" and then `which` (" A", " B"). Returns the model chosen (the page's `default` until the
    visit chooses one)."""
    chosen = chosen_model(focus, default, field)
    listed = list(local_models())  # an operator's folders: ATTENTION_EXPLORER_MODEL_DIRS, read at every run
    # A folder this visit chose that the operator has since removed stays in the list, so the page says so
    # when it is loaded (or goes on from memory when it already was) instead of showing another model.
    gone = [chosen.name] if chosen.name.startswith(LOCAL_PREFIX) and chosen.name not in listed else []
    options = [*BUNDLED, *listed, *gone, OTHER]
    key = show(f"{slot}.model", chosen.name if chosen.name in options else OTHER)
    bundled = "; ".join(f"{spec.label}: {spec.about}" for spec in BUNDLED.values())
    col.selectbox(f"Model{which}", options, key=key, format_func=model_label,
                  on_change=on_change(key, functools.partial(_pick_model, default, field)),
                  help=f"{bundled}. A local folder is one an operator listed; a Hugging Face id must be on the "
                       "server's allowlist.")
    if st.session_state[key] == OTHER:
        key = show(f"{slot}.hub_id", chosen.name)
        col.text_input("Hugging Face model id", key=key, max_chars=100,
                       on_change=on_change(key, functools.partial(_pick_hub_id, default, field)),
                       help="Allowed here: " + ", ".join(hub_allowlist()))
    key = show(f"{slot}.precision", chosen.dtype)
    col.selectbox(f"Precision{which}", DTYPES, key=key, help=PRECISION_HELP,
                  on_change=on_change(key, functools.partial(_pick_dtype, default, field)))
    return chosen


def _with(focus: Focus, field: str, model: ModelChoice) -> Focus:
    return focus.with_model(model) if field == "model" else focus.replace(**{field: model})


def _pick_model(default: str, field: str, focus: Focus, option: str) -> Focus:
    name = HUB_EXAMPLE if option == OTHER else option
    return _with(focus, field, ModelChoice(name, chosen_model(focus, default, field).dtype))


def _pick_hub_id(default: str, field: str, focus: Focus, typed: str) -> Focus:
    if not typed or not typed.strip():
        return focus  # an empty box keeps the model it had
    return _with(focus, field, ModelChoice(typed.strip(), chosen_model(focus, default, field).dtype))


def _pick_dtype(default: str, field: str, focus: Focus, dtype: str) -> Focus:
    return _with(focus, field, ModelChoice(chosen_model(focus, default, field).name, dtype))


# --- the sentence ------------------------------------------------------------------------------------------
def sentence_and_model(focus: Focus, *, slot: str, default_text: str = DEFAULT_TEXT,
                       default_model: str = DEFAULT_ENCODER, rerun: str | None = None) -> tuple[Source, str]:
    """The sentence box and, beside it, the model picker, then a result saved as .npz to open instead.
    Returns (what the page reads: the model, or the opened file; the sentence). `rerun`: the part of the page
    (pages/_partial.py) a new sentence reruns alone; it reads the sentence with `sentence_now`."""
    c1, c2 = st.columns([2, 1])  # at 800 px a quarter of the row cut "SmolLM2-135M" to "SmolLM2-", 3/10 to "…-135"
    limits = ", ".join(f"{spec.max_tokens:,} for {spec.label}" for spec in BUNDLED.values())
    text = sentence_now(focus, default_text)
    key = show(f"{slot}.text", text[:MAX_TEXT_CHARS])
    c1.text_area("Sentence", key=key, max_chars=MAX_TEXT_CHARS, height=80, help=f"Tokens read at most: {limits}.",
                 on_change=functools.partial(_typed, key, rerun))
    picked = model_picker(c2, focus, slot=slot, default=default_model)
    opened = saved_result(focus, slot=slot)
    return (opened or picked), text


def sentence_now(focus: Focus, default_text: str = DEFAULT_TEXT) -> str:
    """The sentence the focus holds (the page's default where it holds none)."""
    return focus.text if focus.text is not None else default_text


def _typed(key: str, rerun: str | None) -> None:
    on_change(key, _type_text)()
    rerun_part(rerun)


def _type_text(focus: Focus, text: str) -> Focus:
    return focus.with_text(text)


def saved_result(focus: Focus, *, slot: str) -> SavedResult | None:
    """An expander to open a result saved as .npz (the .npz button, or attention's export_npz in a notebook:
    a model too big for this machine, run where it fits). Returns it, kept in the focus across pages until
    closed, or None: the page then runs the model picked above."""
    opened = None if focus.saved is None else SavedResult(focus.saved)
    with st.expander("Open a result saved as .npz (no model needed)", expanded=opened is not None):
        # a new key once a file is opened or closed: the next visit to the box finds it empty
        file = st.file_uploader(".npz file", type=["npz"], key=f"{slot}.npz.{focus.saved or 'none'}",
                                max_upload_size=NPZ_MAX_BYTES // 1_000_000,
                                help="What the .npz button downloads, or attention.models.export_npz(att) writes. "
                                     "Only plain arrays are read (never pickled objects).")
        if file is not None:
            opened = open_saved(file.name, file.getvalue()) or opened
            if opened is not None and opened.digest != focus.saved:
                update(saved=opened.digest, query=None)
        if opened is not None:
            st.button("Close it and run the model again", key=f"{slot}.npz_close",
                      on_click=functools.partial(update, saved=None, query=None))
    return opened


# --- fitting the focus to what the page reads --------------------------------------------------------------
def fit(att: ModelAttention | None = None, *, n_layers: int | None = None, n_heads: int | None = None,
        tokens=None) -> Focus:
    """The focus made valid for the result the page shows (its layers, heads and tokens; or the counts
    given), kept, written into the URL, and what had to change said in a line each. Every model page calls
    it once, after reading its result and before drawing the layer, head and token pickers; it reads the
    focus afresh, with whatever this run changed in it (a file opened above)."""
    if att is not None:
        n_layers, n_heads, tokens = att.n_layers, att.n_heads, att.tokens
    focus = put(*current().fitted(n_layers=n_layers, n_heads=n_heads, tokens=tokens))
    shown(focus)
    return focus


# --- layer, head, token ------------------------------------------------------------------------------------
def layer_and_head(col_layer, col_head, focus: Focus, n_layers: int, n_heads: int, *, slot: str,
                   head_disabled: bool = False, kinds: Callable[[int], str] | None = None) -> tuple[int, int]:
    """The Layer and Head inputs (from 1 on screen) of a fitted focus (or of Focus.following: a ranked result's
    top head). Changing either picks the head the two show. Returns 0-based (layer, head).
    `kinds`: each layer's kind (ModelAttention.layer_kind), said under the Layer input."""
    head = min(focus.head, n_heads - 1)
    layer = layer_input(col_layer, focus, n_layers, slot=slot, kinds=kinds, head=head)
    key = show(f"{slot}.head", head + 1)
    col_head.number_input("Head", 1, n_heads, key=key, disabled=head_disabled,
                          on_change=on_change(key, functools.partial(_set_head, layer)))
    return layer, head


def layer_input(col, focus: Focus, n_layers: int, *, slot: str, kinds: Callable[[int], str] | None = None,
                head: int | None = None) -> int:
    """The Layer input alone (from 1 on screen). Returns the 0-based layer. `kinds`: each layer's kind
    (ModelAttention.layer_kind: "global", "local, window 512"), said under the input where layers differ.
    `head`: the head shown beside it, picked with the new layer."""
    layer = min(focus.layer, n_layers - 1)
    key = show(f"{slot}.layer", layer + 1)
    said = [kinds(i) for i in range(n_layers)] if kinds else []
    globals_ = [str(i + 1) for i, kind in enumerate(said) if kind == "global"]
    col.number_input("Layer", 1, n_layers, key=key, on_change=on_change(key, functools.partial(_set_layer, head)),
                     help=f"Global layers (every earlier token): {', '.join(globals_)}. The others are local: a "
                          "sliding window of recent tokens." if any(said) and globals_ else None)
    if any(said):
        col.caption(f"Layer {layer + 1}: {said[layer]}")
    return layer


def _set_layer(head: int | None, focus: Focus, shown_layer: int | None) -> Focus:
    if shown_layer is None:
        return focus
    return focus.replace(layer=int(shown_layer) - 1, **({} if head is None else {"head": head}))


def _set_head(layer: int, focus: Focus, shown_head: int | None) -> Focus:
    return focus if shown_head is None else focus.replace(layer=layer, head=int(shown_head) - 1, aggregation="head")


def query_picker(col, focus: Focus, att: ModelAttention, *, slot: str, default: int | None = None,
                 grouping=None, label: str | None = None, source: Source | None = None) -> int:
    """The token (or, reading words, the word) followed: the focus's, else `default` (the page's; the
    seeds' "bank" when the text has it, else its last word). Returns its index among the tokens, or among the words."""
    position = focus.query_or(default_focus(att.tokens, special=att.special) if default is None else default)
    units = shown_tokens(att) if grouping is None else grouping.words
    index = position if grouping is None else grouping.word_of(position)
    firsts = None if grouping is None else tuple(pieces[0] for pieces in grouping.pieces)
    key = show(labelled_key(f"{slot}.query", units), index)
    pin = source if isinstance(source, ModelChoice) else None
    spaced = grouping is None and any(str(unit).startswith(VISIBLE_SPACE) for unit in units)
    col.selectbox(label or ("Word" if grouping is not None else "Token"), range(len(units)),
                  format_func=token_labels(units), key=key, help=definition(VISIBLE_SPACE) if spaced else None,
                  on_change=on_change(key, functools.partial(_pick_query, tuple(att.tokens), firsts, att.text, pin)))
    if spaced:  # said where the mark first shows, not only on hover (the glossary's "␣")
        col.caption(f"{VISIBLE_SPACE}: {md(definition(VISIBLE_SPACE))}")
    if any(str(unit).startswith("⟨") for unit in units):
        col.caption("⟨f0 9f⟩: a token that is only part of a character (an emoji, say), by its bytes in hex: the "
                    "tokenizer split the character's bytes over several tokens.")
    return index


def _pick_query(tokens, firsts, text: str, model: ModelChoice | None, focus: Focus, index: int) -> Focus:
    """A token picked: followed in this text with this model (a page's example sentence and default model become
    the visit's choice, since the position means nothing without them)."""
    position = index if firsts is None else firsts[index]
    pinned = focus.replace(text=focus.text if focus.text is not None else text,
                           model=focus.model if focus.model is not None or model is None else model)
    return pinned.replace(query=TokenAt(position, tokens[position]))


# --- reading switches --------------------------------------------------------------------------------------
def reading_switches(focus: Focus, att, *, slot: str, log_scale: bool = True) -> Reading:
    """The row of switches every model page offers: words instead of pieces, attention sinks removed, a log
    colour scale (where the page draws weights as colours). The views apply the Reading themselves
    (attention.models.recorded.views)."""
    c1, c2, c3 = st.columns(3)
    try:
        word_groups(att)
    except ValueError as err:
        why = str(err)
    else:
        why = None
    key = show(f"{slot}.words", focus.words)
    c1.toggle("Words", key=key, disabled=why is not None, on_change=on_change(key, setting("words")),
              help=why or "Words, not pieces: merge sub-word pieces into the words the tokenizer split the text "
                          "into. Attention to a word is the sum over its pieces, attention from a word the mean of "
                          "its pieces' rows (rows still sum to 1).")
    key = show(f"{slot}.no_sinks", focus.without_sinks)
    c2.toggle("Without sinks", key=key, on_change=on_change(key, setting("without_sinks")),
              help="Remove each head's sink tokens (the first token, [CLS]/[SEP]/BOS, and any token holding over "
                   "half the weight of most rows) and renormalise every row to sum to 1.")
    if log_scale:
        key = show(f"{slot}.log", focus.log)
        c3.toggle("Log colours", key=key, on_change=on_change(key, setting("log")),
                  help="Colour by log10(weight) from 0.0001 to 1: small weights stay visible beside a sink.")
    image_format(focus)
    return Reading(words=focus.words and why is None, without_sinks=focus.without_sinks,
                   log=focus.log and log_scale)


def image_format(focus: Focus) -> str:
    """The sidebar's choice of format for the charts' camera button (PNG or SVG); once per page run
    (reading_switches calls it)."""
    key = show("sidebar.image_format", focus.image_format)
    st.sidebar.segmented_control("Chart images", ["png", "svg"], key=key, on_change=on_change(key, _set_format),
                                 help="The camera button of every chart saves this format at 2× size.")
    return focus.image_format


def _set_format(focus: Focus, fmt: str | None) -> Focus:
    return focus.replace(image_format=fmt or "png")


# --- a layer's heads: one, or their mean ---------------------------------------------------------------------
MEAN_OF_HEADS = "mean of heads"  # the Head picker's first choice: the layer's heads averaged (aggregation "mean")


def head_or_mean(col, focus: Focus, n_heads: int, *, slot: str) -> int | None:
    """The Head picker of a page that shows one head or the mean of a layer's heads (a fitted focus). Returns
    the head, from 0, or None for the mean (the heads together, read by weighted norms); says so when another page
    showed the heads another way."""
    one = focus.aggregation in AGGREGATIONS and AGGREGATIONS[focus.aggregation].per_head
    if focus.aggregation not in ("head", "mean", "head_norm", "norm"):
        shown = "its weights" if one else "the mean"
        other = AGGREGATIONS[focus.aggregation].label if focus.aggregation in AGGREGATIONS else focus.aggregation
        st.caption(f"This page shows one head or the mean of a layer's heads: {shown} is shown (another page "
                   f"showed “{md(other)}”).")
    key = show(f"{slot}.head", str(focus.head + 1) if one else MEAN_OF_HEADS)
    choice = col.selectbox("Head", [MEAN_OF_HEADS] + [str(h + 1) for h in range(n_heads)], key=key,
                           on_change=on_change(key, _pick_head_or_mean))
    return None if choice == MEAN_OF_HEADS else int(choice) - 1


def _pick_head_or_mean(focus: Focus, choice: str) -> Focus:
    measure = measure_of(focus.aggregation)  # the head or the mean, read as they were read
    if choice == MEAN_OF_HEADS:
        return focus.replace(aggregation=with_measure("mean", measure))
    return focus.replace(head=int(choice) - 1, aggregation=with_measure("head", measure))


MEASURE_HELP = ("Weights: how much of its attention a token gives each key (softmax). Weighted norms: how much "
                "each key actually hands over, its weight times the size of what it passes on (Kobayashi et al. "
                "2020): a token can get much weight and give little. Holds on every page that reads a row.")


def measure_switch(col, focus: Focus, *, slot: str) -> str:
    """The "Read by" switch of a view that says a token looks at another: weights, or weighted norms. Kept in the
    focus's aggregation ("head" <-> "head_norm", "mean" <-> "norm": attention.models.with_measure), so it holds
    between pages and in the link. Returns "weights" or "norms"."""
    measure = measure_of(focus.aggregation)
    key = show(f"{slot}.measure", CONTRIBUTION_MEASURES[measure])
    col.segmented_control("Read by", list(CONTRIBUTION_MEASURES.values()), key=key, help=MEASURE_HELP,
                          on_change=on_change(key, _set_measure))
    return measure


def _set_measure(focus: Focus, label: str | None) -> Focus:
    chosen = next((m for m, shown in CONTRIBUTION_MEASURES.items() if shown == label), None)
    if chosen is None:  # the selected choice clicked again: a segmented control empties; keep what was read
        return focus
    return focus.replace(aggregation=with_measure(focus.aggregation, chosen), head_picked=focus.head_picked)


# --- a page's own pickers ---------------------------------------------------------------------------------
def labelled_key(key: str, labels) -> str:
    """`key` made for one list of option labels: a selectbox whose labels change while its value stays (token 6
    of a new sentence, token 0 of another model's) kept showing the old label in the browser ("6: bank" above
    a chart of "box"). A new key for new labels makes a new widget, which shows its own."""
    return f"{key}.{zlib.crc32(chr(31).join(map(str, labels)).encode()):08x}"


def among(key: str, options) -> str:
    """A page's own picker keyed `key` (not a part of the focus) whose options depend on the text or model:
    a value kept from before that is no longer an option is forgotten, so the picker shows its default
    instead of a choice the page does not have. Returns the key."""
    kept = st.session_state.get(key)
    if kept is not None and (any(v not in options for v in kept) if isinstance(kept, list) else kept not in options):
        del st.session_state[key]
    return key
