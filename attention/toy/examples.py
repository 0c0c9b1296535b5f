"""The seeds' examples as data (../shared/seeds). Every page's example comes from here.

- FRUIT: the apple / banana / chair lookup (seed 002).
- thinking_machines(): "Thinking Machines" with d_k = 64, q1.k1 = 112, q1.k2 = 96 (seed 004).
- CAT_SENTENCE: a short toy sentence for the step-by-step page (seed 001: "Cat sat on the mat").
- HANG_SENTENCE: "Hang them not let them go" for multi-head attention (seed 003).
- TRANSLATION: a toy English -> French pair for encoder-decoder cross-attention (seed 004).
- BANK and IT: hand-built embeddings and weights whose toy attention resolves "bank" (seed 000) and
  "it" (seed 004); see attention.toy.ambiguity for the computation and how they were built.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention.toy.positions import sinusoidal_positions

# --- Seed 002: hard lookup vs soft lookup ------------------------------------------------------------
FRUIT_HARD = {"apple": 9, "banana": 6, "chair": 3}  # the scalar key -> value store of Figure 1

FRUIT_LABELS = ("apple", "banana", "chair")
FRUIT_KEY_FEATURES = ("sweetness", "durability", "texture")
# Keys chosen so that the scaled scores (q.k / sqrt(3)) give the article's match scores 0.44, 0.37, 0.16.
FRUIT_KEYS = np.array([
    [0.9, 0.1, 0.2],  # apple: sweet, not durable, smooth
    [0.7, 0.1, 0.6],  # banana: sweet, not durable, rich texture
    [0.1, 0.9, 0.2],  # chair: not sweet, durable
])
FRUIT_VALUE_FEATURES = ("price", "liking", "use")
# Values on a 0..1 scale, our choice (the article names the features but prints no numbers):
# price relative to the dearest item; liking = how much people enjoy it; use = how long it stays useful.
# So the fruits share a profile (cheap, liked, short-lived) and the chair stands apart (dear, lasting).
FRUIT_VALUES = np.array([
    [0.3, 0.9, 0.2],  # apple
    [0.2, 0.8, 0.1],  # banana
    [0.9, 0.4, 0.9],  # chair
])
FRUIT_QUERY = np.array([0.8, 0.2, 0.1])  # "something sweet, not durable, smooth": a fruit
FRUIT_PUBLISHED_SCORES = (0.44, 0.37, 0.16)  # seed 002, Figure 3


# --- Seed 004: "Thinking Machines" ---------------------------------------------------------------------
@dataclass(frozen=True)
class ThinkingMachines:
    """Two tokens with the article's numbers: q1.k1 = 112, q1.k2 = 96, d_k = 64 -> 14, 12 -> 0.88, 0.12.

    x holds the embeddings (d_model = 512 as in the paper); W_Q, W_K, W_V (512, 64) map them exactly
    onto q, k, v (built as pinv(x) @ target, so x @ W reproduces the targets to ~1e-12).
    """

    tokens: tuple[str, ...]
    x: np.ndarray  # (2, 512) embeddings
    w_q: np.ndarray  # (512, 64)
    w_k: np.ndarray  # (512, 64)
    w_v: np.ndarray  # (512, 64)
    q: np.ndarray  # (2, 64)
    k: np.ndarray  # (2, 64)
    v: np.ndarray  # (2, 64)


def thinking_machines(d_model: int = 512, d_k: int = 64) -> ThinkingMachines:
    """The Illustrated Transformer's "Thinking Machines": seeded vectors whose scores are its 112 and 96."""
    rng = np.random.default_rng(2017)
    q = rng.normal(0.0, 1.0, (2, d_k))
    k = rng.normal(0.0, 1.0, (2, d_k))
    v = rng.normal(0.0, 1.0, (2, d_k))
    # Shift each key along q1 until q1 . k_j hits the article's score exactly.
    for j, target in enumerate((112.0, 96.0)):
        k[j] += (target - q[0] @ k[j]) / (q[0] @ q[0]) * q[0]
    x = rng.normal(0.0, 1.0, (2, d_model))
    x_pinv = np.linalg.pinv(x)  # (d_model, 2): x @ x_pinv = I_2, so x @ (x_pinv @ t) = t
    return ThinkingMachines(
        tokens=("Thinking", "Machines"), x=x, w_q=x_pinv @ q, w_k=x_pinv @ k, w_v=x_pinv @ v,
        q=q, k=k, v=v,
    )


# --- Seed 001: a short sentence for the step-by-step page ----------------------------------------------
@dataclass(frozen=True)
class ToySentence:
    tokens: tuple[str, ...]
    x: np.ndarray  # (n, d_model) embeddings
    w_q: np.ndarray  # (d_model, d_k)
    w_k: np.ndarray  # (d_model, d_k)
    w_v: np.ndarray  # (d_model, d_v)


def cat_sentence() -> ToySentence:
    """"Cat sat on the mat": d_model = 4, d_k = d_v = 3; small random numbers rounded to one decimal
    (seeded), so every step fits on screen and can be checked by hand."""
    rng = np.random.default_rng(1)
    tokens = ("Cat", "sat", "on", "the", "mat")
    x = np.round(rng.uniform(-1, 1, (5, 4)), 1)
    w = [np.round(rng.uniform(-1, 1, (4, 3)), 1) for _ in range(3)]
    return ToySentence(tokens=tokens, x=x, w_q=w[0], w_k=w[1], w_v=w[2])


# --- Seed 003: multi-head on an ambiguous sentence -----------------------------------------------------
@dataclass(frozen=True)
class MultiHeadExample:
    tokens: tuple[str, ...]
    x: np.ndarray  # (n, d_model)
    w_q: np.ndarray  # (d_model, d_model)
    w_k: np.ndarray
    w_v: np.ndarray
    w_o: np.ndarray


def hang_sentence(d_model: int = 8, seed: int = 3) -> MultiHeadExample:
    """"Hang them not let them go" with seeded random embeddings and weights (d_model = 8): the heads
    differ only because each looks through its own slice of W_Q, W_K, W_V. The two "them" share one
    embedding, plus sinusoidal positions so that order matters."""
    rng = np.random.default_rng(seed)
    tokens = ("Hang", "them", "not", "let", "them", "go")
    vocab = {t: rng.normal(0, 1, d_model) for t in dict.fromkeys(tokens)}
    x = np.stack([vocab[t] for t in tokens]) + sinusoidal_positions(len(tokens), d_model)
    w = [rng.normal(0, 1 / np.sqrt(d_model), (d_model, d_model)) * 2.0 for _ in range(4)]
    return MultiHeadExample(tokens=tokens, x=x, w_q=w[0], w_k=w[1], w_v=w[2], w_o=w[3])


# --- Seed 004: encoder-decoder cross-attention, a toy translation --------------------------------------
TRANSLATION_AXES = ("determiner", "cat", "sit", "on", "mat", "past")
# Each word is a vector over these meaning axes; a French word sits near its English counterpart,
# so with W_Q = W_K = 3 I (sharpening) each target word attends to the source word it translates.
TRANSLATION_SOURCE = {
    "the": [1, 0, 0, 0, 0, 0], "cat": [0, 1, 0, 0, 0, 0], "sat": [0, 0, 1, 0, 0, 1],
    "on": [0, 0, 0, 1, 0, 0], "mat": [0, 0, 0, 0, 1, 0],
}
TRANSLATION_TARGET = {
    "le": [1, 0, 0, 0, 0, 0], "chat": [0, 0.9, 0, 0, 0, 0.1], "était": [0, 0, 0.3, 0, 0, 1],
    "assis": [0, 0, 1, 0, 0, 0.2], "sur": [0.1, 0, 0, 0.9, 0, 0], "tapis": [0, 0, 0, 0, 1, 0],
}
SOURCE_SENTENCE = ("the", "cat", "sat", "on", "the", "mat")
TARGET_SENTENCE = ("le", "chat", "était", "assis", "sur", "le", "tapis")


def translation_embeddings(source=SOURCE_SENTENCE, target=TARGET_SENTENCE) -> tuple[np.ndarray, np.ndarray]:
    """Shapes: -> x_source (len(source), 6), x_target (len(target), 6)."""
    return (
        np.array([TRANSLATION_SOURCE[w] for w in source], dtype=float),
        np.array([TRANSLATION_TARGET[w] for w in target], dtype=float),
    )


# --- Seeds 000 and 004: ambiguous words, hand-built --------------------------------------------------
BANK_AXES = ("nature", "finance", "function word", "needs context")
# Embeddings over 4 readable axes. "bank" sits half-way between nature and finance and carries the
# "needs context" feature; "river" and "money" carry one sense each; function words carry neither.
BANK_VOCAB = {
    "i": [0, 0, 0.3, 0], "sat": [0.1, 0, 0.2, 0], "on": [0, 0, 1, 0], "the": [0, 0, 1, 0],
    "river": [1, 0, 0, 0], "bank": [0.5, 0.5, 0, 1], "paid": [0, 0.6, 0.2, 0],
    "money": [0, 1, 0, 0], "into": [0, 0, 1, 0], "its": [0, 0, 1, 0], "water": [0.9, 0, 0, 0],
    "account": [0, 0.9, 0, 0], "my": [0, 0, 1, 0], "walked": [0.1, 0, 0.2, 0], "to": [0, 0, 1, 0],
}
BANK_SENTENCES = ("I sat on the river bank", "I paid money into the bank")
# W_Q: "needs context" -> asks for sense-bearing words (query axis 0). W_K: nature and finance -> key
# axis 0, but "needs context" subtracts, so "bank" does not simply look at itself. Axis 1 is a
# "self" channel left at zero. W_V: copies the two sense axes, so the output says which sense won.
BANK_W_Q = np.array([[0, 0], [0, 0], [0, 0], [1, 0]], dtype=float)  # (4, 2)
BANK_W_K = np.array([[1, 0], [1, 0], [0, 0], [-1, 0]], dtype=float)  # (4, 2)
BANK_W_V = np.array([[1, 0], [0, 1], [0, 0], [0, 0]], dtype=float)  # (4, 2) -> (nature, finance)

IT_AXES = ("animate", "spatial", "pronoun", "wants animate", "wants spatial", "function word")
# "animal" is animate, "street" spatial; "tired" needs an animate subject, "wide" a spatial one.
IT_VOCAB = {
    "the": [0, 0, 0, 0, 0, 1], "animal": [1, 0, 0, 0, 0, 0], "didn't": [0, 0, 0, 0, 0, 1],
    "cross": [0, 0, 0, 0, 0, 1], "street": [0, 1, 0, 0, 0, 0], "because": [0, 0, 0, 0, 0, 1],
    "it": [0, 0, 1, 0, 0, 0], "was": [0, 0, 0, 0, 0, 1], "too": [0, 0, 0, 0, 0, 1],
    "tired": [0, 0, 0, 1, 0, 0], "wide": [0, 0, 0, 0, 1, 0],
}
IT_SENTENCES = (
    "The animal didn't cross the street because it was too tired",
    "The animal didn't cross the street because it was too wide",
)
_I6 = np.eye(6)
# Layer 1: the pronoun looks for the predicate ("wants ..." words) and copies what it wants.
IT_W_Q1 = np.outer(_I6[2], [1, 0])  # pronoun -> query axis 0            (6, 2)
IT_W_K1 = np.outer(_I6[3] + _I6[4], [1, 0])  # wants animate/spatial -> key axis 0
IT_W_V1 = np.outer(_I6[3], _I6[3]) + np.outer(_I6[4], _I6[4])  # copy the "wants" axes   (6, 6)
# Layer 2: what "it" now wants is matched against what nouns are.
IT_W_Q2 = np.outer(_I6[3], [1, 0]) + np.outer(_I6[4], [0, 1])  # wants animate -> 0, wants spatial -> 1
IT_W_K2 = np.outer(_I6[0], [1, 0]) + np.outer(_I6[1], [0, 1])  # animate -> 0, spatial -> 1
IT_W_V2 = np.outer(_I6[0], [1, 0]) + np.outer(_I6[1], [0, 1])  # (6, 2) -> (animate, spatial)

PLANT_SENTENCES = (
    "I need to water the plant that grows in my yard",
    "The workers at the power plant went on strike",
)


# --- Seed 003/004: scoring functions on the same inputs ----------------------------------------------
def scoring_parameters(d_q: int = 3, d_k: int = 3, rank: int = 2, d_att: int = 4, seed: int = 5) -> dict:
    """Seeded random parameters for each scoring method (see attention.toy.scoring), keyed by method name."""
    rng = np.random.default_rng(seed)
    return {
        "dot": {}, "scaled_dot": {},
        "multiplicative": {"w": np.round(rng.normal(0, 1, (d_q, d_k)), 2)},
        "reduced_rank": {"u": np.round(rng.normal(0, 1, (rank, d_q)), 2),
                         "w_v": np.round(rng.normal(0, 1, (rank, d_k)), 2)},
        "additive": {"w1": np.round(rng.normal(0, 1, (d_att, d_q)), 2),
                     "w2": np.round(rng.normal(0, 1, (d_att, d_k)), 2),
                     "v_a": np.round(rng.normal(0, 1, d_att), 2)},
    }


# --- Ambiguous words for real models (seeds 000 and 004) ----------------------------------------------
AMBIGUOUS_PAIRS = {  # name -> (sentence 1, sentence 2, the word to follow)
    "bank": ("I sat on the river bank", "I paid money into the bank", "bank"),
    "it": (*IT_SENTENCES, "it"),
    "plant": (*PLANT_SENTENCES, "plant"),
}


# --- Predictions and head effects -----------------------------------------------------------------------
# Decoders: a prompt, the next token expected and an alternative (leading spaces matter: " Mary" is one
# SmolLM2 token, "Mary" another). SmolLM2 gives " Mary" p = 0.92 and " Paris" p = 0.77; after the "it"
# prompt it prefers " far", but its logit difference still says whether " tired" beats " wide".
PREDICTION_EXAMPLES = {  # name -> (prompt, target, foil)
    "Mary and John": ("When Mary and John went to the store, John gave a drink to", " Mary", " John"),
    "capital of France": ("The capital of France is", " Paris", " London"),
    "it: tired or wide": ("The animal didn't cross the street because it was too", " tired", " wide"),
}
# Encoders predict no next token: their head effects follow one word's final vector.
VECTOR_EXAMPLES = {  # name -> (sentence, the word whose vector is followed)
    "bank by the river": ("I sat on the river bank", "bank"),
    "bank with money": ("I paid money into the bank", "bank"),
    "it was too tired": (IT_SENTENCES[0], "it"),
}
