"""Predict, then see: questions asked on the toy pages before their answer is visible.

Each question names its own state (widget key -> value: what the page shows when set to it) and a
`solve(state)` that computes the answer from that state with this package, the same functions the page
draws from; nothing is written by hand, so editing an example cannot leave a wrong answer behind. The
Reveal holds the answer as a sentence, the figures that decide it (as words and as bars, drawn by
attention.figures.reveal_bars) and why. Questions on real models
(attention.models.recorded.questions) are solved from the model's result.

    >>> q = questions_for("lookup")[0]
    >>> q.ask, q.choices
    >>> q.reveal().answer           # computed: soft_lookup at the state q.state names
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attention.toy import examples as ex
from attention.toy.ambiguity import bank_attention, it_attention
from attention.toy.core import attention_from_embeddings, entropy
from attention.toy.lookup import soft_lookup
from attention.toy.masks import causal_mask
from attention.toy.multihead import multi_head_attention, toy_translation
from attention.toy.positions import order_demo, shuffled_order
from attention.toy.scaling import scaling_sample
from attention.toy.scoring import METHODS, scored_attention


@dataclass(frozen=True)
class Reveal:
    """The answer, as a choice and as a sentence, the figures that decide it and why."""

    answer: str  # one of the question's choices
    said: str  # the answer as a phrase a verdict ends with: "it grows" ("You said “shrinks”; it grows.")
    numbers: str  # the figures that decide it, in words
    why: str  # one sentence on why
    bars: tuple[tuple[str, float], ...] = ()  # the same figures, one bar each: (label, value)
    measure: str = ""  # what the bars measure: the chart's title


@dataclass(frozen=True)
class Question:
    key: str  # unique, "lookup.winner"
    page: str  # the page's file stem, "lookup"
    ask: str
    choices: tuple[str, ...]
    state: tuple[tuple[str, object], ...]  # (widget key, value) pairs the page is set to when the answer shows
    solve: Callable[[dict], Reveal]  # the answer from the state, computed

    def reveal(self) -> Reveal:
        """The answer, solved at the question's own state."""
        return self.solve(dict(self.state))


def _shares(labels, weights) -> str:
    return ", ".join(f"{label} {w:.2f}" for label, w in zip(labels, weights, strict=True))


def _bars(labels, values) -> tuple[tuple[str, float], ...]:
    return tuple((str(label), float(v)) for label, v in zip(labels, values, strict=True))


# --- Lookup: hard vs soft ------------------------------------------------------------------------------
FRUIT_QUERY_KEYS = ("lookup.sweetness", "lookup.durability", "lookup.texture")  # the lookup page's query inputs


def _lookup_winner(state: dict) -> Reveal:
    query = [state[k] for k in FRUIT_QUERY_KEYS]
    res = soft_lookup(query, ex.FRUIT_KEYS, ex.FRUIT_VALUES, ex.FRUIT_LABELS, scaled=state["lookup.scaled"])
    return Reveal(res.winner, f"{res.winner} wins", f"weights: {_shares(res.labels, res.weights)}",
                  f"the key that matches the query best ({res.winner}) gets the largest dot product, and softmax "
                  "turns it into the largest weight; the others keep a share, so the answer is still a blend.",
                  _bars(res.labels, res.weights), "weight of each item")


def _lookup_scaling(state: dict) -> Reveal:
    query = [state[k] for k in FRUIT_QUERY_KEYS]
    scaled = soft_lookup(query, ex.FRUIT_KEYS, ex.FRUIT_VALUES, ex.FRUIT_LABELS, scaled=True)
    plain = soft_lookup(query, ex.FRUIT_KEYS, ex.FRUIT_VALUES, ex.FRUIT_LABELS, scaled=state["lookup.scaled"])
    grows = plain.winner_weight > scaled.winner_weight
    return Reveal("grows" if grows else "shrinks", "it grows" if grows else "it shrinks",
                  f"{plain.winner}'s weight {scaled.winner_weight:.3f} with ÷√d_k, {plain.winner_weight:.3f} without",
                  "dividing by √d_k shrinks the gaps between the scores; without it they are wider, and softmax "
                  "gives the best match more of the weight.",
                  _bars(("with ÷√d_k", "without"), (scaled.winner_weight, plain.winner_weight)),
                  f"{plain.winner}'s weight")


# --- Step by step: self-attention ------------------------------------------------------------------------
SELF_EXAMPLES = {"Thinking Machines": ex.thinking_machines, "Cat sat on the mat": ex.cat_sentence}


def _self_most(state: dict) -> Reveal:
    data = SELF_EXAMPLES[state["self.example"]]()
    t = attention_from_embeddings(data.x, data.w_q, data.w_k, data.w_v)
    i = state["self.query"]
    row = t.weights[i]
    most = data.tokens[int(row.argmax())]
    return Reveal(most, f"“{data.tokens[i]}” attends most to “{most}”",
                  f"weights of “{data.tokens[i]}”: {_shares(data.tokens, row)}",
                  "its query's dot product is largest with that word's key; softmax turns the largest scaled score "
                  "into the largest weight.", _bars(data.tokens, row), f"weights of “{data.tokens[i]}”")


def _self_sum(state: dict) -> Reveal:
    data = SELF_EXAMPLES[state["self.example"]]()
    t = attention_from_embeddings(data.x, data.w_q, data.w_k, data.w_v)
    row = t.weights[state["self.query"]]
    total = f"{row.sum():.0f}"
    return Reveal(total, f"they add up to exactly {total}" if total == "1" else f"they add up to {total}",
                  f"sum of the weights of “{data.tokens[state['self.query']]}”: {row.sum():.3f}",
                  "softmax divides each exponential by the sum of all of them, so a query's weights are shares of "
                  "one whole, whatever the scores: attention mixes the values, it never amplifies them.",
                  _bars(data.tokens, row), f"weights of “{data.tokens[state['self.query']]}”")


# --- Why scale by √d_k -----------------------------------------------------------------------------------
def _scaling_unscaled(state: dict) -> Reveal:
    small, large = scaling_sample(8), scaling_sample(state["scaling.d"])
    approaches = large.weights_unscaled.max() > 0.9
    answer = "it approaches 1" if approaches else "it stays about the same"
    return Reveal(answer, answer,
                  f"largest weight without scaling: {small.weights_unscaled.max():.2f} at d = 8, "
                  f"{large.weights_unscaled.max():.2f} at d = {state['scaling.d']}",
                  "each score is a sum of d products: its spread grows as √d, and softmax of widely spread scores "
                  "puts almost all the weight on one key.",
                  _bars(("d = 8", f"d = {state['scaling.d']}"), (small.weights_unscaled.max(),
                                                                 large.weights_unscaled.max())),
                  "largest weight, without ÷√d")


def _scaling_scaled(state: dict) -> Reveal:
    sample = scaling_sample(state["scaling.d"])
    top = sample.weights_scaled.max()
    answer = "no" if top < 0.9 else "yes"
    return Reveal(answer, "it stays well below 1" if answer == "no" else "it approaches 1 too",
                  f"largest weight at d = {state['scaling.d']} with ÷√d: {top:.2f}",
                  "dividing by √d brings the scores' spread back to about 1 whatever d is, so softmax stays soft.",
                  _bars((f"d = {state['scaling.d']}, with ÷√d",), (top,)), "largest weight, with ÷√d")


# --- Scoring functions ----------------------------------------------------------------------------------------
def _scoring_flattest(state: dict) -> Reveal:
    sentence = ex.cat_sentence()
    base = attention_from_embeddings(sentence.x, sentence.w_q, sentence.w_k, sentence.w_v)
    params = ex.scoring_parameters()
    spread = {m: float(entropy(scored_attention(base.q, base.k, base.v, m, **params[m]).weights).mean())
              for m in METHODS}
    best = max(spread, key=spread.get)
    return Reveal(best, f"{best} gives the flattest weights",
                  "how spread the weights are (mean entropy of the rows): "
                  + ", ".join(f"{m} {e:.2f}" for m, e in spread.items()),
                  "the flattest weights come from the scores that differ least from key to key.",
                  _bars(spread, spread.values()), "how spread the weights are (entropy)")


def _scoring_first_row(state: dict) -> Reveal:
    sentence = ex.cat_sentence()
    base = attention_from_embeddings(sentence.x, sentence.w_q, sentence.w_k, sentence.w_v)
    t = scored_attention(base.q, base.k, base.v, "scaled_dot", mask=causal_mask(len(sentence.tokens)))
    own = f"{t.weights[0, 0]:.0f}"
    return Reveal(own, "it keeps all of its weight: 1" if own == "1" else f"it gives itself {own}",
                  f"first row: {_shares(sentence.tokens, t.weights[0])}",
                  "a causal mask lets a token see only itself and what came before: the first token sees only "
                  "itself, so all its weight is there, whatever the scoring function.",
                  _bars(sentence.tokens, t.weights[0]), f"weights of “{sentence.tokens[0]}”, causal mask on")


# --- Multi-head, masks, cross-attention ------------------------------------------------------------------
def _multihead_causal(state: dict) -> Reveal:
    hang = ex.hang_sentence()
    n = len(hang.tokens)
    mask = causal_mask(n) if state["mh.causal"] else None
    mh = multi_head_attention(hang.x, None, hang.w_q, hang.w_k, hang.w_v, hang.w_o, 2, mask=mask)
    row = mh.heads[0].weights[0]
    later = float(row[1:].sum())
    said = "it gives them none: exactly 0" if f"{later:.0f}" == "0" else f"it gives them {later:.0f}"
    return Reveal(f"{later:.0f}", said,
                  f"weight of the first word on the words after it: {later:.3f}",
                  "the mask sets every later word's score to −∞ before softmax: its weight is exactly 0.",
                  _bars(hang.tokens, row), f"weights of “{hang.tokens[0]}”, head 1, causal mask on")


def _multihead_sharp(state: dict) -> Reveal:
    w = toy_translation(state["mh.sharp"]).heads[0].weights
    row = w[ex.TARGET_SENTENCE.index("chat")]
    most = ex.SOURCE_SENTENCE[int(row.argmax())]
    return Reveal(most, f"“chat” reads “{most}” most", f"“chat” reads: {_shares(ex.SOURCE_SENTENCE, row)}",
                  "a sharper s widens the gaps between the scores: “chat” ends up reading almost only the English "
                  "word that shares its meaning.", _bars(ex.SOURCE_SENTENCE, row), "what “chat” reads, s = 6")


# --- Ambiguity in a toy model ------------------------------------------------------------------------------
def _toy_bank(state: dict) -> Reveal:
    r = bank_attention(state["toy.bank0"], state["toy.pull"])
    nature, finance = r.sense
    sense = "nature" if nature > finance else "finance"
    return Reveal(sense, f"“bank” leans to {sense}", f"output of “bank”: nature {nature:.2f}, finance {finance:.2f}",
                  "“bank” asks for context words; “river” is the one that answers, and its value points to nature.",
                  _bars(("nature", "finance"), (nature, finance)), "the output of “bank”, sense by sense")


def _toy_it(state: dict) -> Reveal:
    r = it_attention(state["toy.it1"], state["toy.pull"])
    row = r.layer2.weights[r.focus]
    nouns = [i for i, t in enumerate(r.tokens) if t in ("animal", "street")]
    best = r.tokens[max(nouns, key=lambda i: row[i])]
    return Reveal(best, f"“it” looks at “{best}” most",
                  "layer 2, “it”: " + ", ".join(f"{r.tokens[i]} {row[i]:.2f}" for i in nouns),
                  "in layer 1 “it” reads what the predicate wants (“wide”: something spatial); in layer 2 it looks "
                  "for the noun that is spatial.", _bars([r.tokens[i] for i in nouns], [row[i] for i in nouns]),
                  "what “it” reads in layer 2")


# --- Word order and positions ------------------------------------------------------------------------------
def _order(state: dict) -> Reveal:
    cat = ex.cat_sentence()
    perm = shuffled_order(len(cat.tokens), state["pos.shuffle"])
    demo = order_demo(list(cat.tokens), cat.x, cat.w_q, cat.w_k, cat.w_v, perm, positions=state["pos.add"])
    changes = demo.max_weight_change > 1e-9
    change = f"{demo.max_weight_change:.3g}" if changes else "0 (to rounding)"
    return Reveal("yes" if changes else "no", "they change" if changes else "they stay the same",
                  f"largest change of any weight: {change}",
                  "with positions, a word's vector depends on its place, so its scores change when it moves"
                  if changes else "without positions each word's vector is the same wherever it stands: its "
                  "weights move with it, unchanged.", _bars(("largest change",), (demo.max_weight_change,)),
                  "largest change of any weight")


# --- The bottleneck ----------------------------------------------------------------------------------------
WEIGHTS = Path(__file__).parents[1] / "seq2seq_weights.npz"  # attention.seq2seq.WEIGHTS (that module imports torch)


SHARES = ("most of them", "about half", "almost none")  # the bottleneck question's choices


def share_in_words(share: float) -> str:
    """A share of sequences as the bottleneck question's choices say it: over 0.7, 0.3 to 0.7, under 0.3."""
    return SHARES[0] if share > 0.7 else SHARES[1] if share >= 0.3 else SHARES[2]


def _bottleneck(state: dict) -> Reveal:
    n = len(state["bn.digits"].split())
    at = {}
    with np.load(WEIGHTS) as data:  # "<variant>/accuracy": lengths, sequences, digits (seq2seq_training writes it)
        for variant in ("bottleneck", "attentive"):
            lengths, sequences, _ = data[f"{variant}/accuracy"]
            at[variant] = dict(zip(lengths.astype(int).tolist(), sequences, strict=True))
    share = float(at["bottleneck"][n])
    return Reveal(share_in_words(share), f"it reverses {share_in_words(share)} of them exactly",
                  f"sequences of {n} digits reversed exactly: one context vector {share:.0%}, attention "
                  f"{at['attentive'][n]:.0%}", "one vector must hold every digit of the input, and a longer input "
                  "than it was trained on overflows it; attention instead reads, at each step, the encoder states "
                  "around the digit it is about to write.",
                  _bars(("one context vector", "attention"), (share, at["attentive"][n])),
                  f"share of {n}-digit sequences reversed exactly")


QUESTIONS = (
    Question("lookup.winner", "lookup", "Ask for something barely sweet and very durable (sweetness 0.2, durability "
             "0.9, texture 0.1): which item wins?", ex.FRUIT_LABELS,
             (("lookup.sweetness", 0.2), ("lookup.durability", 0.9), ("lookup.texture", 0.1), ("lookup.scaled", True)),
             _lookup_winner),
    Question("lookup.scaling", "lookup", "Back to the default query (sweet, not durable, smooth), and switch off the "
             "division by √d_k: does the winner's weight grow or shrink?", ("grows", "shrinks"),
             (("lookup.sweetness", 0.8), ("lookup.durability", 0.2), ("lookup.texture", 0.1), ("lookup.scaled", False)),
             _lookup_scaling),
    Question("self.thinking", "self_attention", "In “Thinking Machines”, the query of “Thinking” scores 112 with its "
             "own key and 96 with the key of “Machines”: which word does “Thinking” attend to most?",
             ("Thinking", "Machines"), (("self.example", "Thinking Machines"), ("self.query", 0)), _self_most),
    Question("self.sum", "self_attention", "After softmax, what do the weights of “Thinking” add up to?",
             ("1", "it depends on the scores"), (("self.example", "Thinking Machines"), ("self.query", 0)), _self_sum),
    Question("scaling.unscaled", "scaling", "Without ÷√d, what happens to the largest weight as d grows from 8 to "
             "512?", ("it approaches 1", "it stays about the same"), (("scaling.d", 512),), _scaling_unscaled),
    Question("scaling.scaled", "scaling", "And with ÷√d: at d = 512, does the largest weight approach 1 as well?",
             ("yes", "no"), (("scaling.d", 512),), _scaling_scaled),
    Question("scoring.flattest", "scoring", "Which scoring function gives the flattest weights on these inputs?",
             METHODS, (("scoring.causal", False),), _scoring_flattest),
    Question("scoring.first", "scoring", "With the causal mask on, how much weight does “Cat” (the first token) "
             "give itself?", ("0", "1"), (("scoring.causal", True),), _scoring_first_row),
    Question("mh.causal", "multihead", "With the causal mask on, how much weight can the first word give to the "
             "words after it?", ("0", "1"), (("mh.causal", True),), _multihead_causal),
    Question("mh.sharp", "multihead", "In the toy translation, raise the sharpness s to 6: which English word does "
             "“chat” read most?", tuple(dict.fromkeys(ex.SOURCE_SENTENCE)), (("mh.sharp", 6.0),), _multihead_sharp),
    Question("toy.bank", "toy_ambiguity", "In “I sat on the river bank”, which sense does “bank” lean to?",
             ("nature", "finance"), (("toy.bank0", ex.BANK_SENTENCES[0]), ("toy.pull", 4.0)), _toy_bank),
    Question("toy.it", "toy_ambiguity", "“…because it was too wide”: which noun does “it” look at most in layer 2?",
             ("animal", "street"), (("toy.it1", ex.IT_SENTENCES[1]), ("toy.pull", 4.0)), _toy_it),
    Question("pos.without", "positions", "Shuffle the words with no positions added: do the weights between two "
             "given words change?", ("yes", "no"), (("pos.shuffle", 2), ("pos.add", False)), _order),
    Question("pos.with", "positions", "Now add positions (sinusoidal, below) and shuffle again: do the weights "
             "change?", ("yes", "no"), (("pos.shuffle", 2), ("pos.add", True)), _order),
    Question("bn.long", "bottleneck", "Both models were trained on sequences of 1 to 20 digits. At 20 digits, how "
             "many sequences does the model with one context vector reverse exactly?", SHARES,
             (("bn.digits", "3 1 4 1 5 9 2 6 5 3 5 8 9 7 9 3 2 3 8 4"),), _bottleneck),
)


def questions_for(page: str) -> tuple[Question, ...]:
    """The questions of one page (its file stem), in order."""
    return tuple(q for q in QUESTIONS if q.page == page)


def check_answers() -> None:
    """Every question's answer is one of its choices (ValueError naming the first that is not)."""
    for q in QUESTIONS:
        answer = q.reveal().answer
        if answer not in q.choices:
            raise ValueError(f"{q.key}: the computed answer {answer!r} is not among {q.choices}")
