"""What heads do, in two models (or one model in two precisions): one number per head of A beside its
counterpart's in B, the same head or, for two tokenizers, the head of B nearest to it on the text's words
(attention.models.compare_heads(..., words=True).match).

    >>> change = head_change(roles_a.induction, roles_b.induction)          # same layout
    >>> change = head_change(dla_a.heads, dla_b.heads, cmp.match)            # two models
    >>> change.largest(5)      # [(layer, head, B − A)], 0-based, largest change either way first

The numbers are any (L, H) measure of heads: role scores (roles.head_roles), direct shares of a logit
difference (readout.direct_logit_attribution), effects of removing a head (head_effects.head_ablation).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

HEAD_MEASURES = {  # what Compare two models measures in both: key -> (label, what it is)
    "roles": ("Head roles", "Role scores on the induction probe (the Head atlas's), 0 to 1."),
    "direct": ("Direct share of the logit difference", "What each head writes straight into logit(target) − "
               "logit(foil) at the last position, through the final norm and the unembedding (What heads do)."),
    "ablation": ("Effect of removing the head", "How much logit(target) − logit(foil) changes when the head's "
                 "output is zeroed, the rest of the model run again (Predictions and head effects)."),
}


@dataclass(frozen=True)
class HeadChange:
    """One measure of each head of A beside its counterpart's in B. Shapes: (L, H) of A's heads."""

    a: np.ndarray  # (L, H) A's values
    b: np.ndarray  # (L, H) the value of each A head's counterpart in B
    counterpart: np.ndarray  # (L, H, 2) int: B's (layer, head) for each head of A

    @property
    def change(self) -> np.ndarray:
        """(L, H) B's value minus A's."""
        return self.b - self.a

    def largest(self, k: int = 10) -> list[tuple[int, int, float]]:
        """The k heads whose value changed most (either way): [(layer, head, B − A)], 0-based."""
        change = self.change
        flat = np.argsort(-np.abs(change), axis=None, kind="stable")[:k]
        return [(int(i), int(j), float(change[i, j]))
                for i, j in zip(*np.unravel_index(flat, change.shape), strict=True)]


def head_change(values_a, values_b, match: np.ndarray | None = None) -> HeadChange:
    """Each head of A's value beside its counterpart's in B: the same head (`match` None: both (L, H) alike),
    else B's head match[layer, head]. ValueError when neither says which head of B to read."""
    a, b = np.asarray(values_a, dtype=np.float64), np.asarray(values_b, dtype=np.float64)
    if match is None:
        if a.shape != b.shape:
            raise ValueError(f"A has {a.shape[0]} × {a.shape[1]} heads and B {b.shape[0]} × {b.shape[1]}: give each "
                             "head of A its counterpart in B (match)")
        layers, heads = np.indices(a.shape)
        match = np.stack([layers, heads], axis=-1)
    match = np.asarray(match, dtype=np.int64)
    if match.shape != (*a.shape, 2):
        raise ValueError(f"match must be (L, H, 2) for A's {a.shape[0]} × {a.shape[1]} heads, not {match.shape}")
    return HeadChange(a, b[match[..., 0], match[..., 1]], match)
