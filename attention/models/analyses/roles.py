"""What kind of head each head is, from standard probes: previous-token, induction, duplicate-token, first-token.

The probe (Olsson et al. 2022, "In-context learning and induction heads"): a beginning-of-text token, then
R random tokens, then the same R tokens again. On the second repeat a token has been seen before, R
positions back, and the token that followed it then is R - 1 positions back:

    previous_token   mean weight on position i - 1                     (every query after the first)
    first_token      mean weight on position 0 (the sink role)         (every query after the first)
    duplicate_token  mean weight on i - R: the same token, seen before (second-repeat queries)
    induction        mean weight on i - R + 1: what followed it then   (second-repeat queries)

Every score is a mean of attention weights, in [0, 1]. Random tokens are drawn (seeded) from the middle
of the vocabulary, where ordinary word pieces live, never special tokens. These are the pages' quick roles on one
short probe: not TransformerLens's detect_head (its own ratio, its own sequences) nor the papers' scores on their
probes, which the head census gives under their own names (attention.models.analyses.census: detect_head,
prefix_matching over 10 rows of 50 tokens, Gu et al.'s α).

Shapes: L layers, H heads, R repeated tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from attention.models.forward.capabilities import require
from attention.models.forward.model import LoadedModel
from attention.models.forward.model_attention import ModelAttention
from attention.models.forward.running import attend

PROBE_REPEAT = 25  # R: random tokens, seen twice
ROLE_THRESHOLD = 0.4  # a head is labelled with a role when its score exceeds this (the atlas says so)
ROLES = {  # field -> (label, what it measures)
    "induction": ("induction", "Weight on the token after the earlier occurrence of the current one (i − R + 1)."),
    "previous_token": ("previous-token", "Weight on the token right before (i − 1)."),
    "duplicate_token": ("duplicate-token", "Weight on the earlier occurrence of the same token (i − R)."),
    "first_token": ("first-token", "Weight on the first token, the usual attention sink (position 0)."),
}


@dataclass(frozen=True)
class HeadRoles:
    """Each head's role scores on the probe. Every score is (L, H) in [0, 1]. Not TransformerLens's detect_head: the
    census (head_census) gives that and the papers' own scores."""

    previous_token: np.ndarray
    induction: np.ndarray
    duplicate_token: np.ndarray
    first_token: np.ndarray
    repeat: int  # R
    seed: int
    probe_ids: np.ndarray  # (1 + 2R,) or (2R,) without a beginning-of-text token
    first: int  # position of the first random token (1 after a beginning-of-text token, else 0)
    probe: ModelAttention | None = field(default=None, repr=False, compare=False)  # the model's attention on
    # the probe, to show a head's pattern there (head_roles keeps it)

    def labels(self, threshold: float = ROLE_THRESHOLD) -> np.ndarray:
        """(L, H) str: each head's strongest role above `threshold` ("induction", ...), else ""."""
        fields = list(ROLES)
        scores = np.stack([getattr(self, f) for f in fields])  # (4, L, H)
        best = scores.argmax(0)
        names = np.array([ROLES[f][0] for f in fields], dtype=object)[best]
        return np.where(scores.max(0) > threshold, names, "").astype(str)

    def strongest(self, role: str) -> tuple[int, int, float]:
        """The head with the highest `role` score (a key of ROLES): (layer, head, score), 0-based; the first in
        layer order on a tie."""
        scores = getattr(self, role)  # (L, H)
        layer, head = divmod(int(np.argmax(scores)), scores.shape[1])
        return layer, head, float(scores[layer, head])

    def passed(self, layer: int, head: int, threshold: float = ROLE_THRESHOLD) -> tuple[tuple[str, float], ...]:
        """Every role head (layer, head), from 0, scores above `threshold`: (its label, the score), strongest
        first. `labels` keeps only the first; a head can pass several (SmolLM2's L19H8: first-token and
        induction)."""
        scores = [(ROLES[f][0], float(getattr(self, f)[layer, head])) for f in ROLES]
        return tuple(sorted(((name, s) for name, s in scores if s > threshold), key=lambda p: -p[1]))


def probe_ids(tokenizer, repeat: int = PROBE_REPEAT, seed: int = 0) -> tuple[np.ndarray, int]:
    """[beginning-of-text] + R random tokens + the same R again; and where the random tokens start."""
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    size = len(tokenizer)
    low, high = size // 20, max(size // 20 + repeat + 1, size * 2 // 5)  # ordinary word pieces
    rng = np.random.default_rng(seed)
    pool = np.array([i for i in range(low, high) if i not in special])
    tokens = rng.choice(pool, size=repeat, replace=False)
    bos = next((i for i in (getattr(tokenizer, "bos_token_id", None), getattr(tokenizer, "cls_token_id", None))
                if i is not None), None)
    head = [] if bos is None else [int(bos)]
    return np.array(head + tokens.tolist() * 2, dtype=np.int64), len(head)


def roles_of(att: ModelAttention, repeat: int, first: int, *, seed: int = 0) -> HeadRoles:
    """Role scores from `att`, a model's attention on a probe of `repeat` tokens starting at `first`."""
    s = att.self_attn
    n = s.n_queries
    if n != first + 2 * repeat:
        raise ValueError(f"the probe has {n} tokens, not {first} + 2 x {repeat}")
    queries = np.arange(1, n)
    second = np.arange(first + repeat, n)  # queries on the second repeat
    scores = {name: np.zeros((s.n_layers, s.n_heads)) for name in ROLES}
    for layer in range(s.n_layers):
        w = s.layer_weights(layer).cpu().numpy().astype(np.float64)  # (H, n, n)
        scores["previous_token"][layer] = w[:, queries, queries - 1].mean(-1)
        scores["first_token"][layer] = w[:, queries, 0].mean(-1)
        scores["duplicate_token"][layer] = w[:, second, second - repeat].mean(-1)
        scores["induction"][layer] = w[:, second, second - repeat + 1].mean(-1)
    return HeadRoles(**scores, repeat=repeat, seed=seed, probe_ids=np.asarray(att.token_ids), first=first)


def probe_attention(loaded: LoadedModel, *, repeat: int = PROBE_REPEAT, seed: int = 0) -> tuple[ModelAttention, int]:
    """The model's attention on the probe (for roles_of, and to show a head's pattern on it)."""
    require(loaded, "roles")
    ids, first = probe_ids(loaded.tokenizer, repeat, seed)
    return attend(loaded, f"{repeat} random tokens, twice (seed {seed})", ids=ids), first


def head_roles(loaded: LoadedModel, *, repeat: int = PROBE_REPEAT, seed: int = 0) -> HeadRoles:
    """Every head's role scores (module docstring), from one forward pass over the probe."""
    att, first = probe_attention(loaded, repeat=repeat, seed=seed)
    return replace(roles_of(att, repeat, first, seed=seed), probe=att)

