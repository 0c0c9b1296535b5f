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

import numpy as np

from attention.seq2seq_record import read_record
from attention.toy import examples as ex
from attention.toy.ambiguity import bank_attention, it_attention
from attention.toy.core import attention_from_embeddings, entropy
from attention.toy.lookup import soft_lookup
from attention.toy.masks import causal_mask
from attention.toy.multihead import multi_head_attention, toy_translation
from attention.toy.positions import order_demo, shuffled_order
from attention.toy.rounding import number, percent
from attention.toy.scaling import scaling_study
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
    percent: bool = False  # the figures are shares said as percents ("98.5%"), not numbers ("0.296")

    def shown(self, value: float) -> str:
        """A figure as the sentence says it and its bar is labelled: one rounding rule (attention.toy.rounding)."""
        return percent(value) if self.percent else number(value)


@dataclass(frozen=True)
class Question:
    key: str  # unique, "lookup.winner"
    page: str  # the page's file stem, "lookup"
    ask: str
    choices: tuple[str, ...]
    state: tuple[tuple[str, object], ...]  # (widget key, value) pairs the page is set to when the answer shows
    solve: Callable[[dict], Reveal]  # the answer from the state, computed
    misconceptions: tuple[tuple[str, str], ...] = ()  # (choice, what choosing it says the student believes): one
    # per choice, the answer's too, since the answer is computed; a sentence a teacher can read aloud

    def reveal(self) -> Reveal:
        """The answer, solved at the question's own state."""
        return self.solve(dict(self.state))

    def misconception(self, choice: str) -> str:
        """What choosing `choice` says the student believes (ValueError for a choice it has none for)."""
        return misconception_in(self.key, self.misconceptions, choice)


def misconception_in(key: str, misconceptions: tuple[tuple[str, str], ...], choice: str) -> str:
    """The one belief `misconceptions` holds for `choice`, of the question `key` (named in the ValueError)."""
    found = [text for c, text in misconceptions if c == choice]
    if len(found) != 1:
        raise ValueError(f"{key}: {len(found)} misconceptions for the choice {choice!r}, not 1")
    return found[0]


def check_misconceptions_of(key: str, choices: tuple[str, ...], misconceptions: tuple[tuple[str, str], ...]) -> None:
    """Exactly one belief, not empty, for each choice of the question `key`, and none for a choice it does not
    offer (ValueError naming the first that is not so); model questions are checked with it too."""
    stray = [c for c, _ in misconceptions if c not in choices]
    if stray:
        raise ValueError(f"{key}: misconceptions for {stray}, which are not among its choices {choices}")
    for choice in choices:
        if not misconception_in(key, misconceptions, choice).strip():
            raise ValueError(f"{key}: the misconception for the choice {choice!r} is empty")


def _shares(labels, weights) -> str:
    """"apple 0.296, banana 0.296": each weight as its bar says it (attention.toy.rounding.number)."""
    return ", ".join(f"{label} {number(w)}" for label, w in zip(labels, weights, strict=True))


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
                  f"{plain.winner}'s weight {number(scaled.winner_weight)} with ÷√d_k, "
                  f"{number(plain.winner_weight)} without",
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
                  f"sum of the weights of “{data.tokens[state['self.query']]}”: {number(row.sum())}",
                  "softmax divides each exponential by the sum of all of them, so a query's weights are shares of "
                  "one whole, whatever the scores: attention mixes the values, it never amplifies them.",
                  _bars(data.tokens, row), f"weights of “{data.tokens[state['self.query']]}”")


# --- Why scale by √d_k -----------------------------------------------------------------------------------
def _largest_weights(state: dict) -> dict:
    """The page's chart "Largest weight" at the question's state: the study's averages over its random draws,
    by d (its DIMS), without and with ÷√d (the numbers the chart draws, not one draw's)."""
    study = scaling_study(n_keys=state["scaling.keys"], temperature=state["scaling.temperature"])
    d = [int(x) for x in study.dims]
    return {"draws": study.draws, "without": dict(zip(d, study.max_weight_unscaled, strict=True)),
            "with": dict(zip(d, study.max_weight_scaled, strict=True))}


def _scaling_unscaled(state: dict) -> Reveal:
    top, d = _largest_weights(state), state["scaling.d"]
    small, large = top["without"][8], top["without"][d]
    answer = "it approaches 1" if large > 0.9 else "it stays about the same"
    return Reveal(answer, answer,
                  f"largest weight without scaling, averaged over {top['draws']} random draws (the chart “Largest "
                  f"weight” on this page): {number(small)} at d = 8, {number(large)} at d = {d}",
                  "each score is a sum of d products: its spread grows as √d, and softmax of widely spread scores "
                  "puts almost all the weight on one key.",
                  _bars(("d = 8", f"d = {d}"), (small, large)), "largest weight without ÷√d, averaged")


def _scaling_scaled(state: dict) -> Reveal:
    top, d = _largest_weights(state), state["scaling.d"]
    small, large = top["with"][8], top["with"][d]
    answer = "no" if large < 0.9 else "yes"
    return Reveal(answer, "it stays well below 1" if answer == "no" else "it approaches 1 too",
                  f"largest weight with ÷√d, averaged over {top['draws']} random draws: {number(small)} at d = 8, "
                  f"{number(large)} at d = {d}",
                  "dividing by √d brings the scores' spread back to about 1 whatever d is, so softmax stays soft.",
                  _bars(("d = 8", f"d = {d}"), (small, large)), "largest weight with ÷√d, averaged")


SCALING_STATE = (("scaling.d", 512), ("scaling.keys", 8), ("scaling.temperature", 1.0))  # the page's defaults but d


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
                  + ", ".join(f"{m} {number(e)}" for m, e in spread.items()),
                  "the flattest weights come from the scores that differ least from key to key.",
                  _bars(spread, spread.values()), "how spread the weights are (entropy)")


def _scoring_first_row(state: dict) -> Reveal:
    sentence = ex.cat_sentence()
    base = attention_from_embeddings(sentence.x, sentence.w_q, sentence.w_k, sentence.w_v)
    t = scored_attention(base.q, base.k, base.v, "scaled_dot", mask=causal_mask(len(sentence.tokens)))
    own = f"{t.weights[0, 0]:.0f}"  # the choices are whole numbers
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
                  f"weight of the first word on the words after it: {number(later)}",
                  "the mask sets every later word's score to −∞ before softmax: its weight is exactly 0.",
                  _bars(hang.tokens, row), f"weights of “{hang.tokens[0]}”, head 1, causal mask on")


def _multihead_sharp(state: dict) -> Reveal:
    w = toy_translation(state["mh.sharp"]).heads[0].weights
    row = w[ex.TARGET_SENTENCE.index("chat")]
    most = ex.SOURCE_SENTENCE[int(row.argmax())]
    return Reveal(most, f"“chat” reads “{most}” most", f"“chat” reads: {_shares(ex.SOURCE_SENTENCE, row)}",
                  "a sharper s widens the gaps between the scores: “chat” ends up reading almost only the English "
                  "word that shares its meaning.", _bars(ex.SOURCE_SENTENCE, row),
                  f"what “chat” reads, s = {state['mh.sharp']:g}")


# --- Ambiguity in a toy model ------------------------------------------------------------------------------
def _toy_bank(state: dict) -> Reveal:
    r = bank_attention(state["toy.bank0"], state["toy.pull"])
    nature, finance = r.sense
    sense = "nature" if nature > finance else "finance"
    return Reveal(sense, f"“bank” leans to {sense}",
                  f"output of “bank”: nature {number(nature)}, finance {number(finance)}",
                  "“bank” asks for context words; “river” is the one that answers, and its value points to nature.",
                  _bars(("nature", "finance"), (nature, finance)), "the output of “bank”, sense by sense")


def _toy_it(state: dict) -> Reveal:
    r = it_attention(state["toy.it1"], state["toy.pull"])
    row = r.layer2.weights[r.focus]
    nouns = [i for i, t in enumerate(r.tokens) if t in ("animal", "street")]
    best = r.tokens[max(nouns, key=lambda i: row[i])]
    return Reveal(best, f"“it” looks at “{best}” most",
                  "layer 2, “it”: " + ", ".join(f"{r.tokens[i]} {number(row[i])}" for i in nouns),
                  "in layer 1 “it” reads what the predicate wants (“wide”: something spatial); in layer 2 it looks "
                  "for the noun that is spatial.", _bars([r.tokens[i] for i in nouns], [row[i] for i in nouns]),
                  "what “it” reads in layer 2")


# --- Word order and positions ------------------------------------------------------------------------------
def _order(state: dict) -> Reveal:
    """Shuffling and the weights, on the pair of words positions change most (both questions show it)."""
    cat = ex.cat_sentence()
    perm = shuffled_order(len(cat.tokens), state["pos.shuffle"])
    demo, with_positions = (order_demo(list(cat.tokens), cat.x, cat.w_q, cat.w_k, cat.w_v, perm, positions=on)
                            for on in (state["pos.add"], True))
    change = np.abs(with_positions.weights - with_positions.weights_unshuffled)
    i, j = np.unravel_index(int(np.argmax(change)), change.shape)
    pair = f"“{cat.tokens[i]}” → “{cat.tokens[j]}”"
    written, shuffled = demo.weights[i, j], demo.weights_unshuffled[i, j]
    changes = number(demo.max_weight_change) != number(0)  # a change the page's three decimals can show
    order = " ".join(cat.tokens[k] for k in perm)
    return Reveal("yes" if changes else "no", "they change" if changes else "they stay the same",
                  f"shuffled as “{order}” (shuffle {state['pos.shuffle']}), the weight of {pair}: {number(written)} "
                  f"as written, {number(shuffled)} shuffled; largest change of any weight: "
                  f"{number(demo.max_weight_change)}",
                  "with positions, a word's vector depends on its place, so its scores change when it moves"
                  if changes else "without positions each word's vector is the same wherever it stands: its "
                  "weights move with it, unchanged.",
                  _bars((f"{pair}, as written", f"{pair}, shuffled"), (written, shuffled)), f"weight of {pair}")


# --- The bottleneck ----------------------------------------------------------------------------------------
SHARES = ("most of them", "about half", "almost none")  # the bottleneck question's choices


def share_in_words(share: float) -> str:
    """A share of sequences as the bottleneck question's choices say it: over 0.7, 0.3 to 0.7, under 0.3."""
    return SHARES[0] if share > 0.7 else SHARES[1] if share >= 0.3 else SHARES[2]


def _bottleneck(state: dict) -> Reveal:
    """The share of n-digit sequences each model reversed when saved, and why, from what training recorded
    (attention.seq2seq_record): whether the models practised n digits is read there, not written here."""
    n = len(state["bn.digits"].split())
    record = read_record()
    share, attentive = (record.share_reversed(v, n) for v in ("bottleneck", "attentive"))
    trained = (f"{n} digits is among the lengths both models were trained on" if record.trained_on(n) else
               f"{n} digits is {'longer' if n > record.train_lengths[1] else 'shorter'} than anything the models "
               "were trained on") + f" ({record.lengths_in_words()})"
    held = ("one vector still holds every digit of so short an input" if share_in_words(share) == SHARES[0] else
            "one vector must hold every digit of the input, and that many digits do not fit in it"
            + (", even at a length it practised" if record.trained_on(n) else ""))
    return Reveal(share_in_words(share), f"it reverses {share_in_words(share)} of them exactly",
                  f"sequences of {n} digits reversed exactly: one context vector {percent(share)}, attention "
                  f"{percent(attentive)}", f"{trained}: {held}; attention instead reads, at each step, the encoder "
                  "states around the digit it is about to write.",
                  _bars(("one context vector", "attention"), (share, attentive)),
                  f"share of {n}-digit sequences reversed exactly", percent=True)


def _trained_lengths() -> str:
    """"1 to 20 digits", as training recorded them (no weights: the page says how to train them, asks nothing)."""
    try:
        return read_record().lengths_in_words()
    except (FileNotFoundError, KeyError):
        return "the lengths training recorded"


QUESTIONS = (
    Question("lookup.winner", "lookup", "Ask for something barely sweet and very durable (sweetness 0.2, durability "
             "0.9, texture 0.1): which item wins?", ex.FRUIT_LABELS,
             (("lookup.sweetness", 0.2), ("lookup.durability", 0.9), ("lookup.texture", 0.1), ("lookup.scaled", True)),
             _lookup_winner,
             misconceptions=(
                 ("apple", "believes the sweet item the default query found still wins, whatever this query asks "
                           "for"),
                 ("banana", "believes the lookup returns one of the fruits, as a dictionary of fruit would, rather "
                            "than whichever key lies closest to the query"),
                 ("chair", "believes the item whose key best matches the query (durable, barely sweet) gets the "
                           "largest weight, while the others keep a share"))),
    Question("lookup.scaling", "lookup", "Back to the default query (sweet, not durable, smooth), and switch off the "
             "division by √d_k: does the winner's weight grow or shrink?", ("grows", "shrinks"),
             (("lookup.sweetness", 0.8), ("lookup.durability", 0.2), ("lookup.texture", 0.1), ("lookup.scaled", False)),
             _lookup_scaling,
             misconceptions=(
                 ("grows", "believes removing ÷√d_k widens the gaps between the scores, so softmax gives the best "
                           "match more of the weight"),
                 ("shrinks", "believes dividing by √d_k sharpens the weights, so removing it leaves the winner with "
                             "less"))),
    Question("self.thinking", "self_attention", "In “Thinking Machines”, the query of “Thinking” scores 112 with its "
             "own key and 96 with the key of “Machines”: which word does “Thinking” attend to most?",
             ("Thinking", "Machines"), (("self.example", "Thinking Machines"), ("self.query", 0)), _self_most,
             misconceptions=(
                 ("Thinking", "believes the larger score (112, with its own key) becomes the larger weight after "
                              "scaling and softmax"),
                 ("Machines", "believes a word attends mostly to the other words, not to itself, even when its own "
                              "key gives the larger score"))),
    Question("self.sum", "self_attention", "After softmax, what do the weights of “Thinking” add up to?",
             ("1", "it depends on the scores"), (("self.example", "Thinking Machines"), ("self.query", 0)), _self_sum,
             misconceptions=(
                 ("1", "believes softmax turns any scores into shares of one whole, so a query's weights always add "
                       "up to 1"),
                 ("it depends on the scores", "believes larger scores give larger weights in total, as if softmax "
                                              "did not divide by the sum of the exponentials"))),
    Question("scaling.unscaled", "scaling", "Without ÷√d, what happens to the largest weight as d grows from 8 to "
             "512?", ("it approaches 1", "it stays about the same"), SCALING_STATE, _scaling_unscaled,
             misconceptions=(
                 ("it approaches 1", "believes that without scaling the scores spread wider as d grows (as √d), so "
                                     "softmax puts almost all the weight on one key"),
                 ("it stays about the same", "believes the scores spread as much at d = 512 as at d = 8, as if a "
                                             "sum of more products did not vary more"))),
    Question("scaling.scaled", "scaling", "And with ÷√d: at d = 512, does the largest weight approach 1 as well?",
             ("yes", "no"), SCALING_STATE, _scaling_scaled,
             misconceptions=(
                 ("yes", "believes dividing by √d does not change how the largest weight grows with d"),
                 ("no", "believes dividing by √d keeps the scores' spread about the same at every d, so softmax "
                        "stays soft"))),
    Question("scoring.flattest", "scoring", "Which scoring function gives the flattest weights on these inputs?",
             METHODS, (("scoring.causal", False),), _scoring_flattest,
             misconceptions=(
                 ("dot", "believes the plain dot product, without ÷√d_k, gives the scores that differ least from "
                         "key to key"),
                 ("scaled_dot", "believes dividing the dot product by √d_k narrows the gaps between the scores the "
                                "most here, so its weights are the flattest"),
                 ("multiplicative", "believes a matrix W between query and key (here a random one) makes the scores "
                                    "differ less than ÷√d_k does"),
                 ("reduced_rank", "believes passing q and k through a rank-2 projection makes their scores differ "
                                  "less from key to key"),
                 ("additive", "believes the additive score, a bounded sum of tanh terms, gives the scores that "
                              "differ least from key to key"))),
    Question("scoring.first", "scoring", "With the causal mask on, how much weight does “Cat” (the first token) "
             "give itself?", ("0", "1"), (("scoring.causal", True),), _scoring_first_row,
             misconceptions=(
                 ("0", "believes the causal mask hides a token from itself too, leaving the first token nothing to "
                       "attend to"),
                 ("1", "believes the causal mask lets the first token see only itself, so all its weight stays "
                       "there"))),
    Question("mh.causal", "multihead", "With the causal mask on, how much weight can the first word give to the "
             "words after it?", ("0", "1"), (("mh.causal", True),), _multihead_causal,
             misconceptions=(
                 ("0", "believes the causal mask sets every later word's score to −∞, so softmax gives them exactly "
                       "0"),
                 ("1", "believes the first word can give its weight to the words after it, as if the causal mask "
                       "hid the past rather than the future"))),
    Question("mh.sharp", "multihead", "A toy translation: the French words of “le chat était assis sur le tapis” "
             "each read the English words of “the cat sat on the mat”, their queries against the English keys. A "
             "sharpness s multiplies every query and key (each is its word's vector times s): the larger s, the "
             "wider apart the scores. At s = 6, which English word does “chat” read most?",
             tuple(dict.fromkeys(ex.SOURCE_SENTENCE)),
             (("mh.sharp", 6.0),), _multihead_sharp,
             misconceptions=(
                 ("the", "believes a word that occurs twice (“the”) draws the most weight, rather than the key that "
                         "matches the query of “chat”"),
                 ("cat", "believes a sharper s widens the gaps between the scores, so “chat” reads almost only the "
                         "English word with its meaning"),
                 ("sat", "believes “chat” reads a word by its place in the sentence (“sat”, right after “cat”) "
                         "rather than by its meaning"),
                 ("on", "believes “chat” reads a small word with no meaning of its own (“on”), as if a sharper s "
                        "spread its weight over unrelated words"),
                 ("mat", "believes “chat” reads “mat”, a word that rhymes with “cat”, as if keys matched spelling "
                         "rather than meaning"))),
    Question("toy.bank", "toy_ambiguity", "In “I sat on the river bank”, which sense does “bank” lean to?",
             ("nature", "finance"), (("toy.bank0", ex.BANK_SENTENCES[0]), ("toy.pull", 4.0)), _toy_bank,
             misconceptions=(
                 ("nature", "believes “bank” reads its context, “river”, whose value points to the nature sense"),
                 ("finance", "believes “bank” keeps its usual money sense whatever words surround it"))),
    Question("toy.it", "toy_ambiguity", "“…because it was too wide”: which noun does “it” look at most in layer 2?",
             ("animal", "street"), (("toy.it1", ex.IT_SENTENCES[1]), ("toy.pull", 4.0)), _toy_it,
             misconceptions=(
                 ("animal", "believes “it” refers to the sentence's subject (“animal”) whatever the predicate says, "
                            "rather than to the noun “wide” fits"),
                 ("street", "believes “it” first reads what “wide” asks for (something spatial), then looks for the "
                            "noun that is spatial"))),
    Question("pos.without", "positions", "Shuffle the words with no positions added: do the weights between two "
             "given words change?", ("yes", "no"), (("pos.shuffle", 1), ("pos.add", False)), _order,
             misconceptions=(
                 ("yes", "believes attention by itself knows where each word stands, so moving the words changes "
                         "their weights"),
                 ("no", "believes that without positions a word's vector, and so its scores, are the same wherever "
                        "it stands: its weights move with it"))),
    Question("pos.with", "positions", "Now add positions (sinusoidal, below) and shuffle again: do the weights "
             "change?", ("yes", "no"), (("pos.shuffle", 1), ("pos.add", True)), _order,
             misconceptions=(
                 ("yes", "believes added positions make a word's vector depend on its place, so moving it changes "
                         "its scores"),
                 ("no", "believes the weights survive a shuffle even with positions added, as if positions were not "
                        "part of the vectors the scores are made from"))),  # the page's own shuffle
    Question("bn.long", "bottleneck", f"Both models were trained on sequences of {_trained_lengths()}. At 20 "
             "digits, how many sequences does the model with one context vector reverse exactly?", SHARES,
             (("bn.digits", "3 1 4 1 5 9 2 6 5 3 5 8 9 7 9 3 2 3 8 4"),), _bottleneck,
             misconceptions=(
                 ("most of them", "believes that having practised 20-digit sequences is enough for one context "
                                  "vector to hold all 20 digits"),
                 ("about half", "believes one context vector still gets long sequences right about half the time, "
                                "as if holding most of the digits were enough to reverse them exactly"),
                 ("almost none", "believes one fixed-size context vector cannot hold 20 digits, even at a length "
                                 "the model practised"))),
)


def questions_for(page: str) -> tuple[Question, ...]:
    """The questions of one page (its file stem), in order."""
    return tuple(q for q in QUESTIONS if q.page == page)


def check_answers() -> None:
    """Every question's answer is one of its choices, and each choice has one misconception (ValueError naming
    the first question that is not so)."""
    for q in QUESTIONS:
        answer = q.reveal().answer
        if answer not in q.choices:
            raise ValueError(f"{q.key}: the computed answer {answer!r} is not among {q.choices}")
        check_misconceptions_of(q.key, q.choices, q.misconceptions)
