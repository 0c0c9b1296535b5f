"""Predict, then see: questions asked on the toy pages before their answer is visible.

Each question names its own state (widget key -> value: what the page shows when set to it) and a
`solve(state)` that computes the answer from that state with this package, the same functions the page
draws from; nothing is written by hand, so editing an example cannot leave a wrong answer behind. The
Reveal holds the answer as a sentence, the figures that decide it (as words and as bars, drawn by
attention.figures.reveal_bars) and why. Questions on real models
(attention.models.recorded.questions) are solved from the model's result. What a question and its answer are:
attention.toy.reveal; each answer's computation: attention.toy.answers.

    >>> q = questions_for("lookup")[0]
    >>> q.ask, q.choices
    >>> q.reveal().answer           # computed: soft_lookup at the state q.state names
"""

from __future__ import annotations

from attention.toy import examples as ex
from attention.toy.answers import (
    SCALING_STATE,
    SHARES,
    bottleneck,
    lookup_scaling,
    lookup_winner,
    multihead_causal,
    multihead_sharp,
    order,
    scaling_scaled,
    scaling_unscaled,
    scoring_first_row,
    scoring_flattest,
    self_most,
    self_sum,
    toy_bank,
    toy_it,
    trained_lengths,
)
from attention.toy.reveal import Question, check_misconceptions_of
from attention.toy.scoring import METHODS

QUESTIONS = (
    Question("lookup.winner", "lookup", "Ask for something barely sweet and very durable (sweetness 0.2, durability "
             "0.9, texture 0.1): which item wins?", ex.FRUIT_LABELS,
             (("lookup.sweetness", 0.2), ("lookup.durability", 0.9), ("lookup.texture", 0.1), ("lookup.scaled", True)),
             lookup_winner,
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
             lookup_scaling,
             misconceptions=(
                 ("grows", "believes removing ÷√d_k widens the gaps between the scores, so softmax gives the best "
                           "match more of the weight"),
                 ("shrinks", "believes dividing by √d_k sharpens the weights, so removing it leaves the winner with "
                             "less"))),
    Question("self.thinking", "self_attention", "In “Thinking Machines”, the query of “Thinking” scores 112 with its "
             "own key and 96 with the key of “Machines”: which word does “Thinking” attend to most?",
             ("Thinking", "Machines"), (("self.example", "Thinking Machines"), ("self.query", 0)), self_most,
             misconceptions=(
                 ("Thinking", "believes the larger score (112, with its own key) becomes the larger weight after "
                              "scaling and softmax"),
                 ("Machines", "believes a word attends mostly to the other words, not to itself, even when its own "
                              "key gives the larger score"))),
    Question("self.sum", "self_attention", "After softmax, what do the weights of “Thinking” add up to?",
             ("1", "it depends on the scores"), (("self.example", "Thinking Machines"), ("self.query", 0)), self_sum,
             misconceptions=(
                 ("1", "believes softmax turns any scores into shares of one whole, so a query's weights always add "
                       "up to 1"),
                 ("it depends on the scores", "believes larger scores give larger weights in total, as if softmax "
                                              "did not divide by the sum of the exponentials"))),
    Question("scaling.unscaled", "scaling", "Without ÷√d, what happens to the largest weight as d grows from 8 to "
             "512?", ("it approaches 1", "it stays about the same"), SCALING_STATE, scaling_unscaled,
             misconceptions=(
                 ("it approaches 1", "believes that without scaling the scores spread wider as d grows (as √d), so "
                                     "softmax puts almost all the weight on one key"),
                 ("it stays about the same", "believes the scores spread as much at d = 512 as at d = 8, as if a "
                                             "sum of more products did not vary more"))),
    Question("scaling.scaled", "scaling", "And with ÷√d: at d = 512, does the largest weight approach 1 as well?",
             ("yes", "no"), SCALING_STATE, scaling_scaled,
             misconceptions=(
                 ("yes", "believes dividing by √d does not change how the largest weight grows with d"),
                 ("no", "believes dividing by √d keeps the scores' spread about the same at every d, so softmax "
                        "stays soft"))),
    Question("scoring.flattest", "scoring", "Which scoring function gives the flattest weights on these inputs?",
             METHODS, (("scoring.causal", False),), scoring_flattest,
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
             "give itself?", ("0", "1"), (("scoring.causal", True),), scoring_first_row,
             misconceptions=(
                 ("0", "believes the causal mask hides a token from itself too, leaving the first token nothing to "
                       "attend to"),
                 ("1", "believes the causal mask lets the first token see only itself, so all its weight stays "
                       "there"))),
    Question("mh.causal", "multihead", "With the causal mask on, how much weight can the first word give to the "
             "words after it?", ("0", "1"), (("mh.causal", True),), multihead_causal,
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
             (("mh.sharp", 6.0),), multihead_sharp,
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
             ("nature", "finance"), (("toy.bank0", ex.BANK_SENTENCES[0]), ("toy.pull", 4.0)), toy_bank,
             misconceptions=(
                 ("nature", "believes “bank” reads its context, “river”, whose value points to the nature sense"),
                 ("finance", "believes “bank” keeps its usual money sense whatever words surround it"))),
    Question("toy.it", "toy_ambiguity", "“…because it was too wide”: which noun does “it” look at most in layer 2?",
             ("animal", "street"), (("toy.it1", ex.IT_SENTENCES[1]), ("toy.pull", 4.0)), toy_it,
             misconceptions=(
                 ("animal", "believes “it” refers to the sentence's subject (“animal”) whatever the predicate says, "
                            "rather than to the noun “wide” fits"),
                 ("street", "believes “it” first reads what “wide” asks for (something spatial), then looks for the "
                            "noun that is spatial"))),
    Question("pos.without", "positions", "Shuffle the words with no positions added: do the weights between two "
             "given words change?", ("yes", "no"), (("pos.shuffle", 1), ("pos.add", False)), order,
             misconceptions=(
                 ("yes", "believes attention by itself knows where each word stands, so moving the words changes "
                         "their weights"),
                 ("no", "believes that without positions a word's vector, and so its scores, are the same wherever "
                        "it stands: its weights move with it"))),
    Question("pos.with", "positions", "Now add positions (sinusoidal, below) and shuffle again: do the weights "
             "change?", ("yes", "no"), (("pos.shuffle", 1), ("pos.add", True)), order,
             misconceptions=(
                 ("yes", "believes added positions make a word's vector depend on its place, so moving it changes "
                         "its scores"),
                 ("no", "believes the weights survive a shuffle even with positions added, as if positions were not "
                        "part of the vectors the scores are made from"))),  # the page's own shuffle
    Question("bn.long", "bottleneck", f"Both models were trained on sequences of {trained_lengths()}. At 20 "
             "digits, how many sequences does the model with one context vector reverse exactly?", SHARES,
             (("bn.digits", "3 1 4 1 5 9 2 6 5 3 5 8 9 7 9 3 2 3 8 4"),), bottleneck,
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

