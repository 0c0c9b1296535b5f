"""Predict, then see, on real models: questions whose answers come from the model's own result.

Committing an answer sets the visit's focus to the question's own example (attention.focus.Focus fields ->
values; `about` says it in words, before the commit); the page runs the model as it always does and hands
its results to `solve`. See attention.toy.questions for the toy pages' questions and the Reveal they give.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from attention.focus import ModelChoice, TokenAt, WordPair, from_visible_spaces, with_visible_spaces
from attention.models.forward.model_attention import shown_tokens
from attention.models.forward.registry import DEFAULT_DECODER, DEFAULT_ENCODER, model_label
from attention.models.recorded.contributions import row_contributions
from attention.models.recorded.views import Reading, query_row
from attention.naming import head_words
from attention.toy import examples as ex
from attention.toy.reveal import Reveal, check_misconceptions_of, misconception_in
from attention.toy.rounding import number, percent


@dataclass(frozen=True)
class ModelQuestion:
    key: str
    page: str  # the page's file stem
    ask: str
    choices: tuple[str, ...]
    focus: tuple[tuple[str, object], ...]  # (Focus field, value): what the page shows when the answer does
    solve: Callable[[dict], Reveal]  # from the page's results, {"a": ModelAttention, ...} (the page says which)
    about: str = ""  # its example in words: "Committing shows {about} on this page"
    terms: tuple[str, ...] = ()  # glossary terms its answer rests on that the path may not have said yet: the
    # question says each (attention.glossary.definition) before it is answered
    misconceptions: tuple[tuple[str, str], ...] = ()  # (choice, what choosing it says the student believes): one
    # per choice, the answer's too, since the answer is computed; a sentence a teacher can read aloud

    def reveal(self, results: dict) -> Reveal:
        """The answer, solved from the page's own results at the question's focus."""
        return self.solve(results)

    def misconception(self, choice: str) -> str:
        """What choosing `choice` says the student believes (ValueError for a choice it has none for)."""
        return misconception_in(self.key, self.misconceptions, choice)


SINK_WHY = ("most heads park the weight they do not need on a sink, here [CLS]: a token that is in every input and "
            "carries little of this sentence's meaning")


def _looks_at(word: str, reading: Reading, layer: int, *, result: str, text: str, why: str
              ) -> Callable[[dict], Reveal]:
    """What `word` looks at most in `layer` (0-based), the mean of the layer's heads, read from the page's
    result `result` (the text it holds, `text`, named in the message when the word is not there)."""
    def solve(results: dict) -> Reveal:
        att = results[result]
        if word not in att.tokens:
            raise ValueError(f"{text} has no token “{word}” now")
        i = att.tokens.index(word)
        row = query_row(att, i, layer=layer, reading=reading).matrix[0]
        order = np.argsort(-row)[:3]
        top = ", ".join(f"{att.tokens[j]} {number(row[j])}" for j in order)
        most = att.tokens[int(order[0])]
        return Reveal(most, f"“{word}” looks at “{most}” most",
                      f"{model_label(att.model_name)}, layer {layer + 1}, mean of the heads: {top}", why,
                      tuple((att.tokens[j], float(row[j])) for j in order),
                      f"what “{word}” looks at, layer {layer + 1}" + (", sinks removed" if reading.without_sinks
                                                                        else ""))
    return solve


def _it_looks_at(reading: Reading, layer: int) -> Callable[[dict], Reveal]:
    why = SINK_WHY if not reading.without_sinks else (
        "with the sinks removed, what is left of each row goes to the words that carry the meaning: in this "
        "middle layer “it” reads what is said about it, as the toy model's first layer does")
    return _looks_at("it", reading, layer, result="a", text="sentence A", why=why)


def _next_token(results: dict) -> Reveal:
    att, tokenizer = results["att"], results["tokenizer"]
    if att.next_logits is None:
        raise ValueError(f"{model_label(att.model_name)} predicts no next token")
    z = np.asarray(att.next_logits, dtype=np.float64)
    p = np.exp(z - z.max())
    p /= p.sum()
    top = np.argsort(-p)[:5]
    choice = tokenizer.decode([int(top[0])])
    shown = with_visible_spaces(choice)
    return Reveal(choice, f"{model_label(att.model_name)} predicts “{shown}”",
                  f"probability of “{shown}”: {number(p[top[0]])}", "the model's last position, read through its "
                  "output layer: the capital is the continuation it has seen most often after such a sentence.",
                  tuple((with_visible_spaces(tokenizer.decode([int(t)])), float(p[t])) for t in top),
                  "probability of each next token")


def _head_looks_at(layer: int, head: int, text: str) -> Callable[[dict], Reveal]:
    """What the last token of `text` looks at most in one head (0-based), from the page's result "att": the
    key with the largest weight, as its token with its leading space (" bank"), and the token that followed
    the last token's earlier copy (where an induction head looks)."""
    def solve(results: dict) -> Reveal:
        att = results["att"]
        if att.text != text:
            raise ValueError("the page shows another sentence now")
        shown, ids = shown_tokens(att), np.asarray(att.token_ids)
        i = len(shown) - 1
        row = np.asarray(att.head_weights(layer, head)[i], dtype=np.float64)
        order = [int(j) for j in np.argsort(-row, kind="stable")[:4]]
        most = order[0]
        earlier = [int(j) for j in np.flatnonzero(ids[:i] == ids[i])]
        after = f"“{shown[earlier[-1] + 1]}”, the token after its earlier copy" if earlier else "no earlier copy"
        return Reveal(from_visible_spaces(shown[most]), f"the last “{shown[i]}” looks at “{shown[most]}” most",
                      f"{model_label(att.model_name)}, {head_words(layer, head)}: "
                      + ", ".join(f"“{shown[j]}” {number(row[j])}" for j in order),
                      f"{after}: a head that looks there (an induction head) lets the model continue a pattern it "
                      "has seen; “why this key”, below, splits that score into the earlier heads that make it",
                      tuple((f"{j}: {shown[j]}", float(row[j])) for j in order),
                      f"what the last “{shown[i]}” looks at, {head_words(layer, head)}")
    return solve


REPEATED = "I sat on the river bank and watched the water. I sat on the river"  # Inside one head's question
WRITERS = ("the heads", "the MLPs", "the embeddings")  # What heads do's question: the parts of m


def _writers(text: str) -> Callable[[dict], Reveal]:
    """Which parts write the most of m directly on `text`, from the page's direct logit attribution "shares"
    (attention.models.direct_logit_attribution): all heads, all MLPs, the embeddings."""
    def solve(results: dict) -> Reveal:
        shares = results["shares"]
        if shares.contrast.text != text:
            raise ValueError("the page shows another prompt now")
        parts = dict(zip(WRITERS, (float(shares.heads.sum()), float(shares.mlps.sum()), float(shares.embeddings)),
                         strict=True))
        most = max(parts, key=parts.get)
        written = ", ".join(f"{part} {number(share, signed=True)}" for part, share in parts.items())
        return Reveal(most, f"{most} write the most of m directly", f"of m = {number(shares.model)}, {written}",
                      "a part's direct share is what it adds to the last position's residual stream, read through "
                      "the final norm and the output layer; the shares add up to m. Section 1 shows each head's and "
                      "each MLP's", tuple(parts.items()), "direct share of m")
    return solve


RIVER_BANK = ex.BANK_SENTENCES[0]  # the seeds' "I sat on the river bank": Inside one head's second question
HANDED = ("almost all of it (over 90 %)", "most of it (50-90 %)", "some (20-50 %)", "under a fifth")
HANDED_FROM = (0.9, 0.5, 0.2, 0.0)  # each choice's lower bound, as a share of what the head hands over


def _hands_over(layer: int, head: int, word: str, text: str) -> Callable[[dict], Reveal]:
    """How much of what one head (0-based) hands over to `word` comes from the key it gives the most weight,
    from the page's result "att": that key's share of the weighted norms α_j ||v_j W_O|| (Kobayashi et al.
    2020, attention.models.row_contributions), beside its weight."""
    def solve(results: dict) -> Reveal:
        att = results["att"]
        if att.text != text or word not in att.tokens:
            raise ValueError("the page shows another sentence now")
        given = row_contributions(att, layer, head, att.tokens.index(word))
        j = given.strongest
        share = float(given.shares[j])
        answer = next(c for c, low in zip(HANDED, HANDED_FROM, strict=True) if share >= low)
        order = [int(k) for k in np.argsort(-given.weights, kind="stable")[:3]]
        return Reveal(answer, f"“{att.tokens[j]}” makes {percent(share)} of it",
                      f"{model_label(att.model_name)}, {head_words(layer, head)}: “{att.tokens[j]}” gets "
                      f"{percent(given.weights[j])} of the weight and makes {percent(share)} of what the head hands "
                      "over (its share of α·‖v W_O‖)",
                      "what a key hands over is its weight times the size of its value vector through the head's "
                      "output matrix; [CLS]'s is short, so the weight parked there carries little (Kobayashi et al. "
                      "2020): step 5 shows every key's",
                      tuple((f"{att.tokens[k]}: weight", float(given.weights[k])) for k in order)
                      + tuple((f"{att.tokens[k]}: hands over", float(given.shares[k])) for k in order),
                      "share of the weight, and of what the head hands over", percent=True)
    return solve


_EXAMPLES_OWN = (("target", None), ("foil", None), ("corrupt", None), ("picked_for", None))  # no picks: an
# example's prompt reads its own target and foil


OTTER = "The otter dove into the cold river and came back up with a fish."  # Model heads' question, not its default
IT_PAIR = WordPair(*ex.AMBIGUOUS_PAIRS["it"])  # the "it" sentences of Ambiguous words
_CAPITAL = ex.PREDICTION_EXAMPLES["capital of France"]  # (prompt, target, foil)
QUESTIONS = (
    ModelQuestion("heads.river", "model_heads", f"In MiniLM, in “{OTTER}”, which token does “river” look at "
                  "most in layer 3 (the mean of its 12 heads)?", ("cold", "river", "otter", "[CLS]"),
                  (("model", ModelChoice(DEFAULT_ENCODER)), ("text", OTTER), ("query", TokenAt(7, "river")),
                   ("layer", 2), ("aggregation", "mean"), ("without_sinks", False)),
                  _looks_at("river", Reading(), 2, result="att", text="the sentence", why=SINK_WHY),
                  about="the otter sentence in MiniLM-L6", terms=("sink",),
                  misconceptions=(
                      ("cold", "believes “river” looks most at the word that describes it (“cold”), as if a layer's "
                               "heads mostly read meaning"),
                      ("river", "believes a token looks most at itself"),
                      ("otter", "believes “river” looks most at the sentence's subject (“otter”)"),
                      ("[CLS]", "believes most heads park the weight they do not need on a sink, [CLS], a token "
                                "in every input"))),
    ModelQuestion("amb.it_sink", "ambiguous_words", "In MiniLM, in “…because it was too tired”, which token "
                  "will “it” look at most in layer 5 (the mean of its heads)?", ("animal", "street", "tired", "[CLS]"),
                  (("model", ModelChoice(DEFAULT_ENCODER)), ("pair", IT_PAIR), ("layer", 4), ("aggregation", "mean"),
                   ("without_sinks", False)),
                  _it_looks_at(Reading(), 4), about="the two sentences with “it”, in MiniLM-L6", terms=("sink",),
                  misconceptions=(
                      ("animal", "believes the mean of layer 5's heads already points at the noun “it” stands for "
                                 "(“animal”), as if no weight went to a sink"),
                      ("street", "believes “it” looks most at the nearest noun before it (“street”)"),
                      ("tired", "believes “it” looks most at what is said about it (“tired”), even with the sinks "
                                "left in"),
                      ("[CLS]", "believes most heads park their weight on a sink, [CLS], so the mean of the heads "
                                "looks there most"))),
    ModelQuestion("amb.it_noun", "ambiguous_words", "Now remove the sinks and go down to layer 3, the middle of "
                  "the model: which token does “it” look at most there?", ("animal", "street", "tired", "because"),
                  (("model", ModelChoice(DEFAULT_ENCODER)), ("pair", IT_PAIR), ("layer", 2), ("aggregation", "mean"),
                   ("without_sinks", True)),  # layer 3, not 5: the first answer's chart shows layer 5's row
                  _it_looks_at(Reading(without_sinks=True), 2), about="the two sentences with “it”, in MiniLM-L6",
                  misconceptions=(
                      ("animal", "believes that, with the sinks removed, a middle layer already links “it” to the "
                                 "noun it stands for (“animal”)"),
                      ("street", "believes “it” looks most at the nearest noun before it (“street”)"),
                      ("tired", "believes that, sinks removed, a middle layer's “it” reads what is said about it "
                                "(“tired”), as the toy model's first layer does"),
                      ("because", "believes “it” looks most at the word just before it (“because”), as a "
                                  "previous-token head does"))),
    ModelQuestion("pred.paris", "predictions", "After “The capital of France is”, which token will SmolLM2 "
                  "predict next?", (" Paris", " London", " a", " the"),
                  (("model", ModelChoice(DEFAULT_DECODER)), ("text", _CAPITAL[0]), ("query", None),
                   *_EXAMPLES_OWN),  # the example's own target and foil (attention.models.contrast_words)
                  _next_token, about="“The capital of France is”, in SmolLM2-135M",
                  misconceptions=(
                      (" Paris", "believes the model continues with what it has seen most often after such a "
                                 "sentence: France's capital"),
                      (" London", "believes the model writes a well-known capital without tying it to “France”"),
                      (" a", "believes the model starts a longer phrase with a common small word (“a”) rather than "
                             "naming the capital"),
                      (" the", "believes the most common word (“the”) is the likeliest next token whatever the "
                               "sentence says"))),
    ModelQuestion("circ.writers", "what_heads_do", f"In SmolLM2, after “{_CAPITAL[0]}”, m = logit(“"
                  f"{with_visible_spaces(_CAPITAL[1])}”) − logit(“{with_visible_spaces(_CAPITAL[2])}”). Which "
                  "part writes the most of m straight into the output: all the heads together, all the MLPs "
                  "together, or the embeddings?", WRITERS,
                  (("model", ModelChoice(DEFAULT_DECODER)), ("saved", None), ("text", _CAPITAL[0]), ("query", None),
                   *_EXAMPLES_OWN),
                  _writers(_CAPITAL[0]), about="“The capital of France is”, in SmolLM2-135M", terms=("MLP",),
                  misconceptions=(
                      ("the heads", "believes the heads together write most of m straight into the output at the "
                                    "last position"),
                      ("the MLPs", "believes the MLPs, where a model's facts are often said to be kept, write most "
                                   "of m straight into the output"),
                      ("the embeddings", "believes the last token's own embedding (“is”) already prefers “Paris” to "
                                         "“London”"))),
    ModelQuestion("inside.induction", "inside_head", f"SmolLM2 reads a sentence, then starts it again: "
                  f"“{REPEATED}”. In layer 19, head 7, which token does the last “river” look at most?",
                  (" bank", " river", " the", "I"),
                  (("model", ModelChoice(DEFAULT_DECODER)), ("saved", None), ("text", REPEATED),
                   ("query", TokenAt(15, "river")),
                   ("layer", 18), ("head", 6), ("aggregation", "head"), ("words", False), ("without_sinks", False)),
                  _head_looks_at(18, 6, REPEATED),
                  about="the sentence read twice, in layer 19, head 7 of SmolLM2-135M",
                  misconceptions=(
                      (" bank", "believes this head looks at the token after the earlier copy of “river” (“bank”), "
                                "to continue the pattern, as an induction head does"),
                      (" river", "believes a head looks most at the earlier copy of the same token, not at the "
                                 "token that followed it"),
                      (" the", "believes the head looks at the token just before the current one (“the”), as a "
                               "previous-token head does"),
                      ("I", "believes this head parks most of its weight on the first token (“I”), as many heads do "
                            "with a sink"))),
    ModelQuestion("inside.parked", "inside_head", f"In MiniLM, in “{RIVER_BANK}”, layer 3, head 8 gives [CLS] about "
                  "95 % of “bank”'s weight. How much of what that head hands over to “bank” comes from [CLS]?",
                  HANDED, (("model", ModelChoice(DEFAULT_ENCODER)), ("saved", None), ("text", RIVER_BANK),
                           ("query", TokenAt(6, "bank")), ("layer", 2), ("head", 7), ("aggregation", "head_norm"),
                           ("words", False), ("without_sinks", False)),
                  _hands_over(2, 7, "bank", RIVER_BANK),
                  about="the river bank sentence, in layer 3, head 8 of MiniLM-L6",
                  terms=("sink",),
                  misconceptions=(
                      (HANDED[0], "believes a head's output is made of what it gives its weight to, in the same "
                                  "shares: a weight says how much a key counts"),
                      (HANDED[1], "believes a weight overstates a key a little but still says roughly what the "
                                  "head reads"),
                      (HANDED[2], "believes a sink's weight is partly parked and partly read"),
                      (HANDED[3], "believes weight parked on a sink carries little: what a key hands over is its "
                                  "weight times the size of its value, and [CLS]'s is short"))),
)


def model_questions_for(page: str | None = None) -> tuple[ModelQuestion, ...]:
    """The questions a model page asks, in order ("model_heads"), or every page's (None); the toy pages' are
    attention.toy.questions.questions_for."""
    return tuple(q for q in QUESTIONS if page is None or q.page == page)


def check_misconceptions() -> None:
    """Each choice of every model question has one misconception (ValueError naming the first question that
    has not); their answers need the models, so attention.toy.questions.check_answers checks the toy side's."""
    for q in QUESTIONS:
        check_misconceptions_of(q.key, q.choices, q.misconceptions)
