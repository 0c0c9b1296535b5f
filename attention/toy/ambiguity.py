"""Toy attention that resolves ambiguous words, on the hand-built data of attention.toy.examples.

"bank" (one layer): the query of "bank" asks for sense-bearing words, so it attends to "river" or
"money" and its output moves to the nature or the finance axis.

"it" (two layers): layer 1 lets "it" read what the predicate wants ("tired" wants an animate subject,
"wide" a spatial one); layer 2 matches that want against the nouns, so "it" attends to "animal" or
"street". One layer cannot do it: the query of "it" alone is the same in both sentences.

`pull` multiplies every query: 0 gives uniform attention, larger values sharper attention.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from attention.toy import examples as ex
from attention.toy.core import attention_from_embeddings
from attention.toy.trace import AttentionTrace


def toy_tokens(sentence: str, vocab: dict) -> tuple[str, ...]:
    """Lower-case words of `sentence`; unknown words raise ValueError listing the known ones."""
    words = tuple(re.findall(r"[a-z']+", sentence.lower()))
    unknown = [w for w in words if w not in vocab]
    if unknown:
        raise ValueError(f"unknown word(s) {', '.join(unknown)}; this toy knows: {', '.join(sorted(vocab))}")
    if not words:
        raise ValueError("the sentence has no words")
    return words


@dataclass(frozen=True)
class BankResult:
    tokens: tuple[str, ...]
    x: np.ndarray  # (n, 4) embeddings over BANK_AXES
    trace: AttentionTrace  # weights (n, n); output (n, 2) over (nature, finance)
    focus: int  # index of "bank"

    @property
    def sense(self) -> np.ndarray:
        """(2,) the output of "bank" over (nature, finance)."""
        return self.trace.output[self.focus]

    @property
    def layers(self) -> tuple[tuple[str, AttentionTrace], ...]:
        """What the page draws a bar chart of: (title, trace) per layer."""
        return (("what “bank” attends to", self.trace),)


def bank_attention(sentence: str, pull: float = 4.0) -> BankResult:
    """The toy model's one head on a sentence with "bank": what "bank" attends to. `pull` scales its queries
    (sharper with more). ValueError without "bank" or with a word the toy vocabulary lacks."""
    tokens = toy_tokens(sentence, ex.BANK_VOCAB)
    if "bank" not in tokens:
        raise ValueError("the sentence must contain the word 'bank'")
    x = np.array([ex.BANK_VOCAB[t] for t in tokens], dtype=float)
    trace = attention_from_embeddings(x, ex.BANK_W_Q * pull, ex.BANK_W_K, ex.BANK_W_V)
    return BankResult(tokens=tokens, x=x, trace=trace, focus=tokens.index("bank"))


@dataclass(frozen=True)
class ItResult:
    tokens: tuple[str, ...]
    x: np.ndarray  # (n, 6) embeddings over IT_AXES
    layer1: AttentionTrace  # weights (n, n): "it" finds the predicate
    x1: np.ndarray  # (n, 6) x + layer-1 output (residual)
    layer2: AttentionTrace  # weights (n, n); output (n, 2) over (animate, spatial)
    focus: int  # index of "it"

    @property
    def sense(self) -> np.ndarray:
        """(2,) the layer-2 output of "it" over (animate, spatial)."""
        return self.layer2.output[self.focus]

    @property
    def layers(self) -> tuple[tuple[str, AttentionTrace], ...]:
        """What the page draws a bar chart of: (title, trace) per layer."""
        return (("layer 1: “it” finds the predicate", self.layer1), ("layer 2: “it” finds its noun", self.layer2))


def it_attention(sentence: str, pull: float = 4.0) -> ItResult:
    """The toy model's two layers on a sentence with "it": the second reads what the first wrote into the
    stream. ValueError without "it" or with a word the toy vocabulary lacks."""
    tokens = toy_tokens(sentence, ex.IT_VOCAB)
    if "it" not in tokens:
        raise ValueError("the sentence must contain the word 'it'")
    x = np.array([ex.IT_VOCAB[t] for t in tokens], dtype=float)
    layer1 = attention_from_embeddings(x, ex.IT_W_Q1 * pull, ex.IT_W_K1, ex.IT_W_V1)
    x1 = x + layer1.output  # residual stream: (n, 6) + (n, 6)
    layer2 = attention_from_embeddings(x1, ex.IT_W_Q2 * pull, ex.IT_W_K2, ex.IT_W_V2)
    return ItResult(tokens=tokens, x=x, layer1=layer1, x1=x1, layer2=layer2, focus=tokens.index("it"))


@dataclass(frozen=True)
class AmbiguousWord:
    """One ambiguous word of the toy page: how it is resolved, and its two example sentences."""

    word: str
    attend: Callable[[str, float], BankResult | ItResult]  # (sentence, pull) -> its result
    sentences: tuple[str, str]  # the seeds' two sentences, one per sense
    axes: tuple[str, str]  # the two output dimensions, one per sense
    formula: str  # LaTeX: how the word's output is made (in lines: on one, it ran past 800 px)
    story: str  # why it takes what it takes (markdown; empty for none)


AMBIGUOUS_WORDS = {
    "bank": AmbiguousWord(
        "bank", bank_attention, ex.BANK_SENTENCES, ("nature", "finance"),
        r"\begin{gathered} q_{bank} = \text{pull}\cdot x_{bank} W_Q,\quad k_j = x_j W_K \\ "
        r"z_{bank} = \sum_j \alpha_j\, x_j W_V \in (\text{nature}, \text{finance}) \end{gathered}", ""),
    "it": AmbiguousWord(
        "it", it_attention, ex.IT_SENTENCES, ("animate", "spatial"),
        r"\begin{gathered} x' = x + \operatorname{Attn}_1(x) \\ z_{it} = \operatorname{Attn}_2(x')_{it}"
        r" \in (\text{animate}, \text{spatial}) \end{gathered}",
        "One layer is not enough: the query of “it” is the same in both sentences. Layer 1 lets “it” read what "
        "the predicate wants (*tired* wants an animate subject, *wide* a spatial one); layer 2 matches that want "
        "against the nouns."),
}
