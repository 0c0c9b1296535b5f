"""A target and a foil: what "does the model prefer ' Mary' to ' John'?" reads, tokenized once.

    m = logit(target) - logit(foil)      at the last position of the text

`contrast(att, tokenizer, target, foil)` turns two typed words into the two tokens the metric reads,
checks them once (empty, the same token, several tokens: only the first is read) and takes the baseline
m from the model's own next-token logits in `att`. Every head-effect scan, attribution patching and the
page's formula read this one value (attention.models.analyses.head_effects).

Shapes: V vocabulary size.
"""

from __future__ import annotations

from dataclasses import dataclass

from attention.models.forward.model_attention import ModelAttention


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
    space before it and the spaced word is another single token (" Mary", not "Mary"); else None."""
    if choice.text.startswith(" "):
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
