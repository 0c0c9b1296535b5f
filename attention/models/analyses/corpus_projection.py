"""A head's queries and keys over a corpus in one 2-D picture (AttentionViz, Yeh et al., IEEE VIS 2023).

A query q attends to a key k by q · k. Two changes leave every softmax row as it was, and make q · k
structure show as distance in a joint projection:
    translate the keys   k' = k - mean(k) + mean(q): each row's scores shift by one constant, softmax
                         ignores it
    scale both           q'' = a q, k'' = k' / a with a = sqrt(mean |k'| / mean |q|): q · k unchanged, the two
                         clouds the same size
Then one PCA of the queries and keys together (the first two principal components). The vectors come from
the corpus survey's sample (attention.models.analyses.corpus_survey): the same token positions for every
head, queries after their rotary positions.

Shapes: P sampled positions, d head size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention.models.analyses.corpus_survey import CorpusSurvey


@dataclass(frozen=True)
class QKProjection:
    """One head's sampled queries and keys, normalised and projected together."""

    queries: np.ndarray  # (P, 2) each sampled position's query, projected
    keys: np.ndarray  # (P, 2) the same positions' keys (through the head's KV head), projected
    explained: tuple[float, float]  # share of the joint variance along each axis
    scale: float  # a: queries were multiplied by it, translated keys divided by it


def qk_projection(found: CorpusSurvey, layer: int, head: int) -> QKProjection:
    """The joint projection of head (layer, head)'s sampled queries and keys (module docstring), computed
    once per head and kept with the survey. ValueError when the survey holds no vectors."""
    if found.q_sample is None or found.k_sample is None or found.q_sample.shape[2] < 3:
        raise ValueError("this survey holds no sample of queries and keys (the model's attention was not "
                         "captured, or the corpus is too short)")
    if (layer, head) not in found.projection_cache:
        group = found.q_sample.shape[1] // found.k_sample.shape[1]  # query heads per KV head
        q = found.q_sample[layer, head].astype(np.float64)  # (P, d)
        k = found.k_sample[layer, head // group].astype(np.float64)
        k = k - k.mean(0) + q.mean(0)
        a = np.sqrt(np.linalg.norm(k, axis=1).mean() / max(np.linalg.norm(q, axis=1).mean(), 1e-12))
        both = np.concatenate([q * a, k / a])  # (2P, d)
        centred = both - both.mean(0)
        _, sv, vt = np.linalg.svd(centred, full_matrices=False)
        xy = centred @ vt[:2].T  # (2P, 2)
        share = sv ** 2 / max(float((sv ** 2).sum()), 1e-12)
        P = len(q)
        found.projection_cache[layer, head] = QKProjection(queries=xy[:P], keys=xy[P:],
                                                      explained=(float(share[0]), float(share[1])), scale=float(a))
    return found.projection_cache[layer, head]
