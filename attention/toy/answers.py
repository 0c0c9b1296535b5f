"""Each toy question's answer, computed from the state its page is set to with the same functions the page draws
from (attention.toy.questions lists the questions; attention.toy.reveal says what an answer holds).

    >>> lookup_winner({"lookup.sweetness": 0.2, "lookup.durability": 0.9, "lookup.texture": 0.1,
    ...                "lookup.scaled": True}).answer
"""

from __future__ import annotations

import numpy as np

from attention.seq2seq_record import read_record
from attention.toy import examples as ex
from attention.toy.ambiguity import bank_attention, it_attention
from attention.toy.core import attention_from_embeddings, entropy
from attention.toy.lookup import soft_lookup
from attention.toy.masks import causal_mask
from attention.toy.multihead import multi_head_attention, toy_translation
from attention.toy.positions import order_demo, shuffled_order
from attention.toy.reveal import Reveal, bars, weights_in_words
from attention.toy.rounding import number, percent
from attention.toy.scaling import scaling_study
from attention.toy.scoring import METHODS, scored_attention

# --- Lookup: hard vs soft ------------------------------------------------------------------------------
FRUIT_QUERY_KEYS = ("lookup.sweetness", "lookup.durability", "lookup.texture")  # the lookup page's query inputs


def lookup_winner(state: dict) -> Reveal:
    query = [state[k] for k in FRUIT_QUERY_KEYS]
    res = soft_lookup(query, ex.FRUIT_KEYS, ex.FRUIT_VALUES, ex.FRUIT_LABELS, scaled=state["lookup.scaled"])
    return Reveal(res.winner, f"{res.winner} wins", f"weights: {weights_in_words(res.labels, res.weights)}",
                  f"the key that matches the query best ({res.winner}) gets the largest dot product, and softmax "
                  "turns it into the largest weight; the others keep a share, so the answer is still a blend.",
                  bars(res.labels, res.weights), "weight of each item")


def lookup_scaling(state: dict) -> Reveal:
    query = [state[k] for k in FRUIT_QUERY_KEYS]
    scaled = soft_lookup(query, ex.FRUIT_KEYS, ex.FRUIT_VALUES, ex.FRUIT_LABELS, scaled=True)
    plain = soft_lookup(query, ex.FRUIT_KEYS, ex.FRUIT_VALUES, ex.FRUIT_LABELS, scaled=state["lookup.scaled"])
    grows = plain.winner_weight > scaled.winner_weight
    return Reveal("grows" if grows else "shrinks", "it grows" if grows else "it shrinks",
                  f"{plain.winner}'s weight {number(scaled.winner_weight)} with ÷√d_k, "
                  f"{number(plain.winner_weight)} without",
                  "dividing by √d_k shrinks the gaps between the scores; without it they are wider, and softmax "
                  "gives the best match more of the weight.",
                  bars(("with ÷√d_k", "without"), (scaled.winner_weight, plain.winner_weight)),
                  f"{plain.winner}'s weight")


# --- Step by step: self-attention ------------------------------------------------------------------------
SELF_EXAMPLES = {"Thinking Machines": ex.thinking_machines, "Cat sat on the mat": ex.cat_sentence}


def self_most(state: dict) -> Reveal:
    data = SELF_EXAMPLES[state["self.example"]]()
    t = attention_from_embeddings(data.x, data.w_q, data.w_k, data.w_v)
    i = state["self.query"]
    row = t.weights[i]
    most = data.tokens[int(row.argmax())]
    return Reveal(most, f"“{data.tokens[i]}” attends most to “{most}”",
                  f"weights of “{data.tokens[i]}”: {weights_in_words(data.tokens, row)}",
                  "its query's dot product is largest with that word's key; softmax turns the largest scaled score "
                  "into the largest weight.", bars(data.tokens, row), f"weights of “{data.tokens[i]}”")


def self_sum(state: dict) -> Reveal:
    data = SELF_EXAMPLES[state["self.example"]]()
    t = attention_from_embeddings(data.x, data.w_q, data.w_k, data.w_v)
    row = t.weights[state["self.query"]]
    total = f"{row.sum():.0f}"
    return Reveal(total, f"they add up to exactly {total}" if total == "1" else f"they add up to {total}",
                  f"sum of the weights of “{data.tokens[state['self.query']]}”: {number(row.sum())}",
                  "softmax divides each exponential by the sum of all of them, so a query's weights are shares of "
                  "one whole, whatever the scores: attention mixes the values, it never amplifies them.",
                  bars(data.tokens, row), f"weights of “{data.tokens[state['self.query']]}”")


# --- Why scale by √d_k -----------------------------------------------------------------------------------
def _largest_weights(state: dict) -> dict:
    """The page's chart "Largest weight" at the question's state: the study's averages over its random draws,
    by d (its DIMS), without and with ÷√d (the numbers the chart draws, not one draw's)."""
    study = scaling_study(n_keys=state["scaling.keys"], temperature=state["scaling.temperature"])
    d = [int(x) for x in study.dims]
    return {"draws": study.draws, "without": dict(zip(d, study.max_weight_unscaled, strict=True)),
            "with": dict(zip(d, study.max_weight_scaled, strict=True))}


def scaling_unscaled(state: dict) -> Reveal:
    top, d = _largest_weights(state), state["scaling.d"]
    small, large = top["without"][8], top["without"][d]
    answer = "it approaches 1" if large > 0.9 else "it stays about the same"
    return Reveal(answer, answer,
                  f"largest weight without scaling, averaged over {top['draws']} random draws (the chart “Largest "
                  f"weight” on this page): {number(small)} at d = 8, {number(large)} at d = {d}",
                  "each score is a sum of d products: its spread grows as √d, and softmax of widely spread scores "
                  "puts almost all the weight on one key.",
                  bars(("d = 8", f"d = {d}"), (small, large)), "largest weight without ÷√d, averaged")


def scaling_scaled(state: dict) -> Reveal:
    top, d = _largest_weights(state), state["scaling.d"]
    small, large = top["with"][8], top["with"][d]
    answer = "no" if large < 0.9 else "yes"
    return Reveal(answer, "it stays well below 1" if answer == "no" else "it approaches 1 too",
                  f"largest weight with ÷√d, averaged over {top['draws']} random draws: {number(small)} at d = 8, "
                  f"{number(large)} at d = {d}",
                  "dividing by √d brings the scores' spread back to about 1 whatever d is, so softmax stays soft.",
                  bars(("d = 8", f"d = {d}"), (small, large)), "largest weight with ÷√d, averaged")


SCALING_STATE = (("scaling.d", 512), ("scaling.keys", 8), ("scaling.temperature", 1.0))  # the page's defaults but d


# --- Scoring functions ----------------------------------------------------------------------------------------
def scoring_flattest(state: dict) -> Reveal:
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
                  bars(spread, spread.values()), "how spread the weights are (entropy)")


def scoring_first_row(state: dict) -> Reveal:
    sentence = ex.cat_sentence()
    base = attention_from_embeddings(sentence.x, sentence.w_q, sentence.w_k, sentence.w_v)
    t = scored_attention(base.q, base.k, base.v, "scaled_dot", mask=causal_mask(len(sentence.tokens)))
    own = f"{t.weights[0, 0]:.0f}"  # the choices are whole numbers
    return Reveal(own, "it keeps all of its weight: 1" if own == "1" else f"it gives itself {own}",
                  f"first row: {weights_in_words(sentence.tokens, t.weights[0])}",
                  "a causal mask lets a token see only itself and what came before: the first token sees only "
                  "itself, so all its weight is there, whatever the scoring function.",
                  bars(sentence.tokens, t.weights[0]), f"weights of “{sentence.tokens[0]}”, causal mask on")


# --- Multi-head, masks, cross-attention ------------------------------------------------------------------
def multihead_causal(state: dict) -> Reveal:
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
                  bars(hang.tokens, row), f"weights of “{hang.tokens[0]}”, head 1, causal mask on")


def multihead_sharp(state: dict) -> Reveal:
    w = toy_translation(state["mh.sharp"]).heads[0].weights
    row = w[ex.TARGET_SENTENCE.index("chat")]
    most = ex.SOURCE_SENTENCE[int(row.argmax())]
    return Reveal(most, f"“chat” reads “{most}” most", f"“chat” reads: {weights_in_words(ex.SOURCE_SENTENCE, row)}",
                  "a sharper s widens the gaps between the scores: “chat” ends up reading almost only the English "
                  "word that shares its meaning.", bars(ex.SOURCE_SENTENCE, row),
                  f"what “chat” reads, s = {state['mh.sharp']:g}")


# --- Ambiguity in a toy model ------------------------------------------------------------------------------
def toy_bank(state: dict) -> Reveal:
    r = bank_attention(state["toy.bank0"], state["toy.pull"])
    nature, finance = r.sense
    sense = "nature" if nature > finance else "finance"
    return Reveal(sense, f"“bank” leans to {sense}",
                  f"output of “bank”: nature {number(nature)}, finance {number(finance)}",
                  "“bank” asks for context words; “river” is the one that answers, and its value points to nature.",
                  bars(("nature", "finance"), (nature, finance)), "the output of “bank”, sense by sense")


def toy_it(state: dict) -> Reveal:
    r = it_attention(state["toy.it1"], state["toy.pull"])
    row = r.layer2.weights[r.focus]
    nouns = [i for i, t in enumerate(r.tokens) if t in ("animal", "street")]
    best = r.tokens[max(nouns, key=lambda i: row[i])]
    return Reveal(best, f"“it” looks at “{best}” most",
                  "layer 2, “it”: " + ", ".join(f"{r.tokens[i]} {number(row[i])}" for i in nouns),
                  "in layer 1 “it” reads what the predicate wants (“wide”: something spatial); in layer 2 it looks "
                  "for the noun that is spatial.", bars([r.tokens[i] for i in nouns], [row[i] for i in nouns]),
                  "what “it” reads in layer 2")


# --- Word order and positions ------------------------------------------------------------------------------
def order(state: dict) -> Reveal:
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
                  bars((f"{pair}, as written", f"{pair}, shuffled"), (written, shuffled)), f"weight of {pair}")


# --- The bottleneck ----------------------------------------------------------------------------------------
SHARES = ("most of them", "about half", "almost none")  # the bottleneck question's choices


def share_in_words(share: float) -> str:
    """A share of sequences as the bottleneck question's choices say it: over 0.7, 0.3 to 0.7, under 0.3."""
    return SHARES[0] if share > 0.7 else SHARES[1] if share >= 0.3 else SHARES[2]


def bottleneck(state: dict) -> Reveal:
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
                  bars(("one context vector", "attention"), (share, attentive)),
                  f"share of {n}-digit sequences reversed exactly", percent=True)


def trained_lengths() -> str:
    """"1 to 20 digits", as training recorded them (no weights: the page says how to train them, asks nothing)."""
    try:
        return read_record().lengths_in_words()
    except (FileNotFoundError, KeyError):
        return "the lengths training recorded"
