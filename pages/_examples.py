"""The example pickers of the model pages, and what each fills in the visit's focus (pages/_focus.py): a
prediction's prompt, target and foil (Predictions, What heads do), and Ambiguous words' two sentences and
word. Each picker shows the example that is on screen, or says the sentence is the visitor's own; picking
one sets the sentence and what goes with it."""

import dataclasses
import functools

import streamlit as st

from attention.focus import from_visible_spaces, with_visible_spaces
from attention.models import (
    BUNDLED,
    DEFAULT_DECODER,
    Contrast,
    ContrastWords,
    Focus,
    LoadedModel,
    ModelAttention,
    ModelChoice,
    WordPair,
    contrast,
    contrast_words,
    direct_logit_attribution,
    model_label,
    spaced_alternative,
)
from attention.toy import examples as ex
from pages._focus import on_change, on_page, put, show
from pages._jobs import Source, attention_or_stop, model_or_stop, result_of
from pages._labels import label_of
from pages._path import arrived_by_path, stop_here
from pages._text import md
from pages._widgets import fit, sentence_and_model

OWN_SENTENCE = "your own sentence"  # the example picker's value when the sentence is none of its examples



# --- predictions: example, target and foil -----------------------------------------------------------------
def prediction_example(focus: Focus, *, slot: str) -> str:
    """The example picker of the pages that read a prediction. It shows the example whose prompt is the
    sentence (else "your own sentence"); picking one sets the sentence (its target and foil are the example's
    own: attention.models.contrast_words). Returns the prompt the page starts from: the example shown, else the
    first."""
    examples = ex.PREDICTION_EXAMPLES
    first = next(iter(examples))
    text = examples[first][0] if focus.text is None else focus.text
    matched = next((name for name, (prompt, _, _) in examples.items() if prompt == text), None)
    options = [*examples] + ([] if matched else [OWN_SENTENCE])
    key = show(f"{slot}.example", matched or OWN_SENTENCE)
    st.selectbox("Example", options, key=key, on_change=on_change(key, _pick_example),
                 help="Each example is a prompt, the next token expected (target) and an alternative (foil).")
    return examples[matched or first][0]


def _pick_example(focus: Focus, name: str) -> Focus:
    if name not in ex.PREDICTION_EXAMPLES:
        return focus
    return focus.with_text(ex.PREDICTION_EXAMPLES[name][0])  # picks for another text stay, and do not hold here


def prediction_start(*, page: str, slot: str, model: str) -> tuple[Focus, Source, str, ModelAttention,
                                                                   LoadedModel, ContrastWords | None]:
    """What both pages that read a prediction start with: the example picker, the sentence and model (the
    bundled decoder, `model`, by default), the model's result on it, the focus fitted to it, and the target,
    foil and corrupted prompt for this text (attention.models.contrast_words: picked for it, the example's
    own, or derived from it; None for a model that predicts no next token). Returns (focus, source, text,
    result, model, words)."""
    focus = on_page()
    if arrived_by_path(page) and focus.model is not None and focus.model.name in BUNDLED \
            and BUNDLED[focus.model.name].architecture == "encoder-only":  # the path opens it on a model that predicts
        focus = put(focus.replace(model=ModelChoice(DEFAULT_DECODER, focus.model.dtype), query=None),
                    (f"{model_label(focus.model)} predicts no next token: the path opens this page on "
                     f"{model_label(DEFAULT_DECODER)}, which does.",))
    prompt = prediction_example(focus, slot=slot)
    source, text = sentence_and_model(focus, slot=slot, default_text=prompt, default_model=model)
    att = attention_or_stop(source, text)
    focus = fit(att)
    loaded = model_or_stop(source)
    words = None if att.next_logits is None else contrast_words(focus, att, loaded.tokenizer)
    return focus, source, text, att, loaded, words


def target_and_foil(att: ModelAttention, tokenizer, words: ContrastWords, *, slot: str) -> Contrast:
    """The target and foil inputs side by side (a space shown as ␣: " Mary" and "Mary" are different tokens),
    showing `words` (contrast_words: picked for this text, the example's own, or derived from it, said under
    them, with any pick made for another text), read once into a Contrast (attention.models.contrast), what
    each word became, and m in a formula; words that cannot be read end the page with their message. Typing
    one picks it for this text."""
    c1, c2 = st.columns(2)
    for col, field, label, word in ((c1, "target", "expected next token (target)", words.target),
                                    (c2, "foil", "an alternative (foil)", words.foil)):
        key = show(f"{slot}.{field}", with_visible_spaces(word))
        col.text_input(label, key=key, max_chars=40,
                       on_change=on_change(key, pick_setter(field, words)),
                       help=f"The token exactly as the model reads it; a space is shown as ␣. After a word the "
                            f"model writes “{with_visible_spaces(' Mary')}”, a token of its own: “Mary” without "
                            "the space is another token.")
    st.caption(f"Target and foil: {md(words.how)}.")
    if words.note:
        st.caption(f":material/info: {md(words.note)}")
    try:
        made = contrast(att, tokenizer, words.target, words.foil)  # tokenized here, once, for everything the page reads
    except ValueError as err:
        st.warning(md(err))
        stop_here()
    for choice, col in ((made.target, c1), (made.foil, c2)):
        shown_text = md(with_visible_spaces(choice.text))
        line = (f"“{shown_text}” is one token." if choice.pieces == 1 else
                f"“{shown_text}” is {choice.pieces} tokens; the first, “{md(with_visible_spaces(choice.token))}”, "
                "is used.")
        spaced = spaced_alternative(tokenizer, choice)
        if spaced is not None:
            line += (f" After a word the model writes “{md(with_visible_spaces(spaced.token))}” (with its space), "
                     "another token: type ␣ or a space before the word to read that one.")
        col.caption(line)
    # Two lines: on one, "= 17.37 − 13.24 = 4.13" lost its last digit on a phone.
    st.latex(rf"\begin{{aligned}} m &= \text{{logit}}(\text{{target}}) - \text{{logit}}(\text{{foil}}) \\ "
             rf"&= {made.target_logit:.2f} - {_bracketed(made.foil_logit)} = {made.baseline:.2f} \end{{aligned}}")
    return made


def _bracketed(value: float) -> str:
    """A number subtracted in a formula: "(−8.21)" when it is negative ("− −8.21" read as a typo)."""
    return f"({value:.2f})" if value < 0 else f"{value:.2f}"


def token_setter(field: str, text: str, target: str, foil: str):
    """An on_change setter for a target or foil box (a space shown as ␣) of a page that reads `text`: the token
    picked for that text (Focus.with_picks), with the target and foil the page showed beside it."""
    return functools.partial(_pick_token, field, text, (("target", target), ("foil", foil)))


def pick_setter(field: str, words: ContrastWords):
    """An on_change setter for a box that picks the target, foil or corrupted prompt (`field`) for the text on
    screen (Focus.with_picks: the pick holds for that text only). The target and foil shown beside it (`words`)
    are picked with it: what the visitor saw stays as it was."""
    return token_setter(field, words.text, words.target, words.foil)


def _pick_token(field: str, text: str, beside, focus: Focus, shown: str) -> Focus:
    typed = shown or ""  # a token's ␣ is its space; a prompt is taken as typed
    picked = typed if field == "corrupt" else from_visible_spaces(typed)
    return focus.with_picks(text, **{**dict(beside), field: picked})


# --- Ambiguous words: one word in two sentences ------------------------------------------------------------
YOUR_PAIR = "your own sentences"  # the example picker's value when the sentences are none of its examples
PAIR_LABELS = {**{name: f"“{name}”" for name in ex.AMBIGUOUS_PAIRS}, YOUR_PAIR: YOUR_PAIR}


def chosen_pair(focus: Focus) -> WordPair:
    """The focus's two sentences and word, else the first example's."""
    return focus.pair or WordPair(*next(iter(ex.AMBIGUOUS_PAIRS.values())))


def pair_example(col, focus: Focus, *, slot: str) -> WordPair:
    """The example picker: it shows the example whose sentences these are (else "your own sentences");
    picking one sets the sentences and the word. Returns the pair shown."""
    pair = chosen_pair(focus)
    example = next((name for name, texts in ex.AMBIGUOUS_PAIRS.items() if WordPair(*texts) == pair), YOUR_PAIR)
    key = show(f"{slot}.example", example)
    col.selectbox("Example", [*ex.AMBIGUOUS_PAIRS] + ([YOUR_PAIR] if example == YOUR_PAIR else []), key=key,
                  format_func=label_of(PAIR_LABELS), on_change=on_change(key, _pick_pair))
    return pair


def _pick_pair(focus: Focus, name: str) -> Focus:
    return focus if name not in ex.AMBIGUOUS_PAIRS else focus.replace(pair=WordPair(*ex.AMBIGUOUS_PAIRS[name]))


def pair_boxes(pair: WordPair, *, slot: str) -> None:
    """Sentence A, sentence B and the word, side by side; typing in one changes the focus's pair."""
    c1, c2 = st.columns(2)
    for col, part, label in ((c1, "a", "Sentence A"), (c2, "b", "Sentence B")):  # boxes that wrap: one line cut
        key = show(f"{slot}.{part}", getattr(pair, part)[:2000])             # both at "…because it was to"
        col.text_area(label, key=key, max_chars=2000, height=80,
                      on_change=on_change(key, functools.partial(_type_pair, part)))
    key = show(f"{slot}.word", pair.word[:40])
    st.columns([1, 2])[0].text_input("Word", key=key, max_chars=40,
                                     on_change=on_change(key, functools.partial(_type_pair, "word")))


def _type_pair(part: str, focus: Focus, typed: str) -> Focus:
    return focus.replace(pair=dataclasses.replace(chosen_pair(focus), **{part: typed}))


# --- a question's own example, run beside the page (pages/_lessons.predict_then_see's `example`) ---------------
def example_result(focus: Focus) -> dict:
    """What Model heads' and Inside one head's questions read: the model's result on the question's text."""
    return {"att": attention_or_stop(focus.model, focus.text, say_check=False)}


def example_pair(focus: Focus) -> dict:
    """What Ambiguous words' questions read: the model's results on the question's two sentences."""
    return {"a": attention_or_stop(focus.model, focus.pair.a, say_check=False),
            "b": attention_or_stop(focus.model, focus.pair.b, say_check=False)}


def example_prediction(focus: Focus) -> dict:
    """What Predictions' questions read: the result on the question's prompt, and the model's tokenizer."""
    return {"att": attention_or_stop(focus.model, focus.text, say_check=False),
            "tokenizer": model_or_stop(focus.model).tokenizer}


def example_shares(focus: Focus) -> dict:
    """What What heads do's questions read: each part's direct share of m on the question's prompt, its target and
    foil the example's own."""
    att = attention_or_stop(focus.model, focus.text, say_check=False)
    loaded = model_or_stop(focus.model)
    words = contrast_words(focus, att, loaded.tokenizer)
    made = contrast(att, loaded.tokenizer, words.target, words.foil)
    return {"shares": result_of(direct_logit_attribution, "Reading each part's share…", loaded, att, made)}

