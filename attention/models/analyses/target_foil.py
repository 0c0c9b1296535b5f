"""A target and a foil: what "does the model prefer ' Mary' to ' John'?" reads, tokenized once.

    m = logit(target) - logit(foil)      at the last position of the text

`contrast(att, tokenizer, target, foil)` turns two typed words into the two tokens the metric reads,
checks them once (empty, the same token, several tokens: only the first is read) and takes the baseline
m from the model's own next-token logits in `att`. Every head-effect scan, attribution patching and the
page's formula read this one value (attention.models.analyses.head_effects).

Which two words, for a text? `contrast_words(focus, att, tokenizer)`: the ones the visitor picked for this
text (attention.focus.Focus.picks_hold), else an example's own, else derived from the text itself
(`derived_words`): the model's likeliest next token, against the name in the prompt it finds likeliest next
(" Anna" against " Peter") when that token is a name in the prompt, else against its second likeliest token;
the corrupted prompt swaps the two names. Both prediction pages and a notebook call the same function.

Shapes: V vocabulary size.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from attention.focus import Focus, with_visible_spaces
from attention.models.forward.model_attention import ModelAttention
from attention.toy import examples as ex


@dataclass(frozen=True)
class TokenChoice:
    """How a word the user typed became the one token a metric reads."""

    text: str  # as typed
    token_id: int
    token: str  # the token used, as text
    pieces: int  # how many tokens the word is; only the first is used

    def __post_init__(self):
        if self.pieces < 1:
            raise ValueError("empty token choice")


def choose_token(tokenizer, word: str, role: str = "target") -> TokenChoice:
    """The first token of `word` (" Mary" with its leading space is one SmolLM2 token; "Mary" another)."""
    if not isinstance(word, str) or not word.strip():
        raise ValueError(f"Type the {role} token: it is empty.")
    ids = tokenizer(word, add_special_tokens=False)["input_ids"]
    if not ids:
        raise ValueError(f"The tokenizer makes no token of the {role} “{word}”.")
    return TokenChoice(text=word, token_id=int(ids[0]), token=tokenizer.decode([ids[0]]), pieces=len(ids))


def spaced_alternative(tokenizer, choice: TokenChoice) -> TokenChoice | None:
    """The token the model writes for the same word after another word, when `choice` was typed without the
    space before it and the spaced word is another single token (" Mary", not "Mary"); else None, and None for
    what does not start with a letter or a digit (after a word a model writes ",", not " ,")."""
    if choice.text.startswith(" ") or not choice.text[:1].isalnum():  # a comma or a line break takes no space
        return None
    spaced = choose_token(tokenizer, " " + choice.text)
    return spaced if spaced.pieces == 1 and spaced.token_id != choice.token_id else None


def logit_difference(logits, target: int, foil: int):
    """m = logit(target) - logit(foil), from logits (..., V) (numpy or torch): the one place m is computed.
    Shapes: (..., V) -> (...)."""
    return logits[..., target] - logits[..., foil]


@dataclass(frozen=True)
class Contrast:
    """A target and a foil next token for one text, and the model's logit for each on the clean run."""

    text: str  # the text the model read (att.text)
    target: TokenChoice
    foil: TokenChoice
    target_logit: float  # the model's own next-token logit of the target
    foil_logit: float
    baseline: float  # m = logit(target) - logit(foil) on the clean run: positive when the model prefers the target

    @property
    def typed(self) -> tuple[str, str]:
        """The two words as the user typed them (what a cache of work on this contrast is keyed by)."""
        return self.target.text, self.foil.text

    def difference(self, logits):
        """m read from other logits (..., V): a corrupted prompt's, an edited run's. Shapes: -> (...)."""
        return logit_difference(logits, self.target.token_id, self.foil.token_id)

    @property
    def metric(self) -> str:
        """What m measures, in words."""
        return f"logit(“{self.target.token}”) − logit(“{self.foil.token}”)"


def contrast(att: ModelAttention, tokenizer, target: str, foil: str) -> Contrast:
    """Tokenize target and foil once and read their logits from att (a causal language model's result).
    ValueError, in words for the user, for an encoder, an empty word or two words that are one token."""
    if att.next_logits is None:
        raise ValueError(f"{att.model_name} is an encoder: it predicts no next token, so there is no logit "
                         "difference to measure. Use the token-vector metric, or choose a decoder (SmolLM2).")
    t, f = choose_token(tokenizer, target, "target"), choose_token(tokenizer, foil, "foil")
    if t.token_id == f.token_id:
        raise ValueError(f"The target and the foil are the same token (“{t.token}”): their logit difference is "
                         "always 0. Choose two different next tokens.")
    z = att.next_logits
    return Contrast(text=att.text, target=t, foil=f, target_logit=float(z[t.token_id]),
                    foil_logit=float(z[f.token_id]), baseline=float(logit_difference(z, t.token_id, f.token_id)))


# --- which target, foil and corrupted prompt, for a text -----------------------------------------------------
def swap_words(text: str, a: str, b: str) -> str:
    """`text` with every whole-word `a` and `b` exchanged: a corrupt prompt from a clean one (swap the
    names in "When Mary and John went to the store, John gave a drink to")."""
    if not a.strip() or not b.strip() or a.strip() == b.strip():
        raise ValueError("Name two different words to swap.")
    words = {a.strip(): b.strip(), b.strip(): a.strip()}
    pattern = r"\b(" + "|".join(re.escape(w) for w in words) + r")\b"
    swapped = re.sub(pattern, lambda m: words[m.group(0)], text)
    if swapped == text:
        raise ValueError(f"Neither “{a}” nor “{b}” is a word of the prompt.")
    return swapped


def prompt_names(text: str) -> tuple[str, ...]:
    """The names in a prompt: its words that start with a capital letter where no sentence starts, each once, in
    order ("When Anna and Peter went to the park, Peter gave" -> ("Anna", "Peter"))."""
    names = []
    for match in re.finditer(r"\b\w+\b", text):
        word, before = match.group(0), text[:match.start()].rstrip()
        sentence_start = not before or before[-1] in ".!?:\n\"“"
        if word[0].isupper() and len(word) > 1 and not sentence_start and word not in names:
            names.append(word)
    return tuple(names)


def swapped_prompt(tokenizer, text: str, target: str, foil: str) -> str | None:
    """The corrupted prompt for a contrast: `text` with the target and foil swapped, when both are names in it
    (prompt_names) and the swap keeps its number of tokens (patching compares position by position); else None."""
    names = prompt_names(text)
    if target.strip() not in names or foil.strip() not in names or target.strip() == foil.strip():
        return None
    corrupt = swap_words(text, target, foil)
    same = len(tokenizer(corrupt)["input_ids"]) == len(tokenizer(text)["input_ids"])
    return corrupt if same else None


DERIVED_FROM = 50  # the likeliest next tokens a target and foil are derived from


@dataclass(frozen=True)
class DerivedWords:
    """A target and a foil derived from a text and the model's prediction after it."""

    target: str  # the likeliest next token, as text (" Anna")
    foil: str  # the other name in the prompt the model finds likeliest next, else its second likeliest token
    how: str  # in words: how the two were chosen


def derived_words(att: ModelAttention, tokenizer, *, target: str | None = None) -> DerivedWords:
    """The target (`target` when given, else the likeliest next token) and a foil derived from the text: when the
    target is a name in the prompt (prompt_names), the other name there the model finds likeliest next, with its
    space (" Peter"); else the likeliest other next token. ValueError for a model that predicts no next token."""
    if att.next_logits is None:
        raise ValueError(f"{att.model_name} predicts no next token: there is no target or foil to derive.")
    z = np.asarray(att.next_logits, dtype=np.float64)  # (V,)
    ranked = [int(i) for i in np.argsort(-z, kind="stable")[:DERIVED_FROM]]
    # a token of spaces or line breaks alone cannot be typed in a box, nor read as a word: the likeliest others
    words = [i for i in ranked if tokenizer.decode([i]).strip()] or ranked
    if target is None:
        target, said = tokenizer.decode([words[0]]), "the model's likeliest next token" + (
            "" if words[0] == ranked[0] else " that is not a space or a line break")
    else:
        said = "the target picked"
    try:
        target_id = choose_token(tokenizer, target).token_id
    except ValueError:  # a target picked that is no token (empty): contrast() says so where the page reads it
        target_id = None
    names = prompt_names(att.text)
    others = []  # (logit, " Name") for each other name of the prompt that is one token after a word
    for name in names if target.strip() in names else ():  # a name predicted: the contrast is with the others
        ids = tokenizer(" " + name, add_special_tokens=False)["input_ids"]
        if len(ids) == 1 and ids[0] != target_id and name != target.strip():
            others.append((float(z[ids[0]]), " " + name))
    if others:
        return DerivedWords(target, max(others)[1], f"{said}, a name in the prompt, against the other name there "
                                                    "it finds likeliest next")
    foil_id = next((i for i in words if i != target_id), next(i for i in ranked if i != target_id))
    return DerivedWords(target, tokenizer.decode([foil_id]), f"{said} against the likeliest other next token"
                        + ("" if words[:2] == ranked[:2] else " that is a word"))


@dataclass(frozen=True)
class ContrastWords:
    """What a page reads a prediction with, for one text: target and foil, the corrupted prompt, where they come
    from, and what the visitor picked for another text (said beside the inputs)."""

    text: str  # the text they are for (att.text)
    target: str
    foil: str
    corrupt: str | None  # the prompt patched into; None: none can be made from this text (the visitor types one)
    how: str  # in words: picked, the example's, or how they were derived
    note: str | None  # picks made for another text, which do not hold here; None when there are none
    corrupt_picked: bool  # the corrupted prompt is the visitor's, typed for this text


def contrast_words(focus: Focus | None, att: ModelAttention, tokenizer, examples=None) -> ContrastWords:
    """The target, foil and corrupted prompt for the text `att` read: each one the visitor picked for this text
    (focus.picks_hold()), else the example's own when the text is an example's prompt (`examples`: name ->
    (prompt, target, foil); the prediction examples by default), else derived from the text (derived_words,
    swapped_prompt). Picks made for another text are said in `note`, not used. A notebook passes focus=None.

        >>> words = contrast_words(None, attend(m, "When Anna and Peter went to the park, Peter gave a ball to"),
        ...                        m.tokenizer)
        >>> words.target, words.foil, words.corrupt
        (' Anna', ' Peter', 'When Peter and Anna went to the park, Anna gave a ball to')"""
    examples = ex.PREDICTION_EXAMPLES if examples is None else examples
    focus = Focus() if focus is None else focus  # a notebook: nothing picked
    text = att.text
    holds = focus.picks_hold()
    target = focus.target if holds else None
    foil = focus.foil if holds else None
    corrupt = focus.corrupt if holds else None
    example = next(((t, f) for prompt, t, f in examples.values() if prompt == text), None)
    if target is not None or foil is not None:
        how = "the ones you chose for this text"
    elif example is not None:
        target, foil, how = *example, "the example's own"
    else:
        how = ""
    if target is None or foil is None:
        derived = derived_words(att, tokenizer, target=target)
        if foil is not None and derived.target.strip() == foil.strip():  # the likeliest is the foil picked
            derived = derived_words(att, tokenizer, target=foil)
            target = derived.foil
        target = derived.target if target is None else target  # a pick, even empty, is the visitor's: contrast()
        foil = derived.foil if foil is None else foil            # says what is wrong with it
        how = derived.how if not how else f"{how} (the other derived: {derived.how})"
    return ContrastWords(text=text, target=target, foil=foil,
                         corrupt=corrupt if corrupt is not None else swapped_prompt(tokenizer, text, target, foil),
                         how=how, note=None if holds else _not_held(focus), corrupt_picked=corrupt is not None)


def _not_held(focus: Focus) -> str | None:
    picked = [f"{name} “{with_visible_spaces(value)}”" for name, value in
              (("target", focus.target), ("foil", focus.foil)) if value is not None]
    if focus.corrupt is not None:
        picked.append("a corrupted prompt")
    if not picked:
        return None
    was = focus.picked_for if focus.picked_for is not None else "the page's example"
    was = was if len(was) <= 60 else was[:57] + "…"
    were, they = ("were", "they are") if len(picked) > 1 else ("was", "it is")
    return (f"The {' and '.join(picked)} {were} picked for another text (“{was}”): {they} not used on this one, "
            "whose own are below.")
