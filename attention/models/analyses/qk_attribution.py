"""Why this key: one head's score split into where its query and its key come from.

The residual stream at a position is a sum of parts: the embeddings, what each earlier head wrote (z_h W_O^h),
each earlier attention's output bias, each earlier MLP (everything else a block adds), and, in post-norm
models, the norms' biases. With every norm's scale frozen at its value on this text (the convention of direct
logit attribution, attention.models.analyses.readout), each norm is linear, and so are the projections and
the rotary embedding at a fixed position. So head (l, h)'s query at position i and its key at position j are
each a sum over parts plus a constant (the norms' and projections' biases), and its scaled score is exactly

    s_ij = scale * q_i . k_j = Σ_(query part a, key part b) scale * q_i^a . k_j^b   +   bias terms

`qk_attribution` builds that matrix (rows: query parts, columns: key parts) from the stream's parts at layer l
(attention.models.analyses.qk_stream: the result itself, or one pass up to layer l reading its hook points).
`against` asks why this key and not the others: the same matrix for key j minus the one for a second key, or
minus the mean over the keys the query can see. A soft cap (Gemma-2) applies after the sum: softmax reads c *
tanh(s / c) of the total. The sum is held to the model's own score (its q and k as its attention kernel
received them); where the parts do not add up to what the model computed, the family is refused instead of
shown.

Which families are split and how each block writes to the stream: attention.models.analyses.qk_families
(QK_FAMILIES). Position biases (T5, ALiBi), disentangled attention (DeBERTa), shared blocks (ALBERT),
interleaved or fused per-head projections (GPT-J, GPT-NeoX, ModernBERT) and encoder-decoders are refused with
the reason.

Shapes: P parts, p positions, H heads, H_kv KV heads, d head size, D model size.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from attention.models.analyses.qk_families import qk_family
from attention.models.analyses.qk_stream import StreamParts
from attention.models.forward.model import LoadedModel
from attention.models.forward.model_attention import ModelAttention
from attention.naming import head_words

MEAN_CHUNK = 256  # key positions whose parts are built at once for against="mean"


@dataclass(frozen=True)
class QKAttribution:
    """Head (layer, head)'s score of query position `query` on key position `key` (from 0), split into
    (query part, key part) pairs. total = matrix.sum() + sum(rest.values()) equals score."""

    layer: int
    head: int
    query: int
    key: int
    against: int | str | None  # None; a second key position; or "mean" (over the keys the query sees)
    query_parts: tuple[str, ...]  # (Pq,) "embeddings", "L1H3" (layer and head from 1), "L2 MLP", ...
    key_parts: tuple[str, ...]  # (Pk,)
    matrix: np.ndarray  # (Pq, Pk) scale * q^a . k^b (minus the same for `against`)
    rest: dict[str, float]  # the bias terms: the query's constant against every key part, and so on
    total: float  # the sum of everything
    score: float  # the model's own scaled score before softmax (minus the same for `against`)
    softcap: float | None  # softmax reads softcap * tanh(score / softcap) (for against=None)
    rounding: float = 0.0  # in half precision: how far (relative) total may be from score, the model's own
    # q and k being rounded to its dtype (StreamParts.tolerance); 0 in float32, where the two agree to 1e-3

    @property
    def apart(self) -> float:
        """How far apart total and score are, relative to the score (what `rounding` bounds in half precision)."""
        return abs(self.total - self.score) / max(abs(self.score), 1e-12)

    @property
    def biases(self) -> float:
        """The bias terms together (the sum of `rest`)."""
        return float(sum(self.rest.values()))

    def largest(self, k: int = 5) -> list[tuple[str, str, float]]:
        """The k pairs (query part, key part, value) of largest magnitude."""
        order = np.argsort(-np.abs(self.matrix), axis=None, kind="stable")[:k]
        columns = self.matrix.shape[1]
        return [(self.query_parts[i // columns], self.key_parts[i % columns], float(self.matrix.flat[i]))
                for i in order]

    def top_parts(self, n: int = 12) -> QKAttribution:
        """The same with only the n query parts and n key parts of largest total magnitude, the others summed
        into "other parts" (a last row and column), parts that add exactly 0 left out; sums unchanged. What a
        readable heatmap shows."""
        def keep(names: tuple[str, ...], weight: np.ndarray) -> tuple[tuple[str, ...], np.ndarray]:
            nonzero = np.flatnonzero(weight > 0)
            if len(nonzero) <= n + 1:
                into = np.zeros((len(nonzero), len(names)))
                into[np.arange(len(nonzero)), nonzero] = 1
                return tuple(names[i] for i in nonzero), into
            chosen = np.sort(np.argsort(-weight, kind="stable")[:n])
            into = np.zeros((n + 1, len(names)))
            into[n] = 1
            into[:, chosen] = 0
            into[np.arange(n), chosen] = 1
            return (*(names[i] for i in chosen), "other parts"), into

        rows, r = keep(self.query_parts, np.abs(self.matrix).sum(1))
        columns, c = keep(self.key_parts, np.abs(self.matrix).sum(0))
        return replace(self, query_parts=rows, key_parts=columns, matrix=r @ self.matrix @ c.T)

    def by_layer(self) -> QKAttribution:
        """The same with each layer's heads summed into one part ("L3 heads"); sums unchanged."""
        def groups(names: tuple[str, ...]) -> tuple[tuple[str, ...], np.ndarray]:
            merged = tuple(dict.fromkeys(_layer_group(n) for n in names))
            into = np.zeros((len(merged), len(names)))
            into[[merged.index(_layer_group(n)) for n in names], np.arange(len(names))] = 1
            return merged, into

        rows, r = groups(self.query_parts)
        columns, c = groups(self.key_parts)
        return replace(self, query_parts=rows, key_parts=columns, matrix=r @ self.matrix @ c.T)


def _layer_group(name: str) -> str:
    if name.startswith("L") and "H" in name and " " not in name:
        return name[:name.index("H")] + " heads"
    return name


def part_in_words(name: str) -> str:
    """'L17H1' -> "layer 17's head 1"; 'L3 MLP' -> "layer 3's MLP"; other names as they are."""
    if name.startswith("L") and " " not in name and "H" in name:
        layer, head = name[1:].split("H")
        return f"layer {layer}'s head {head}"
    if name.startswith("L") and name[1:].split(" ")[0].isdigit():
        layer, what = name[1:].split(" ", 1)
        return f"layer {layer}'s {what}"
    return name


def key_choices(weights: np.ndarray) -> tuple[list[int], int]:
    """The keys a query row can ask about (those with a weight: the mask hides the others) and the one to
    start with: the strongest, the first token (where attention sinks) only when nothing else has weight.
    Shapes: weights (m,)."""
    visible = [int(j) for j in np.flatnonzero(np.asarray(weights) > 0)] or list(range(len(weights)))
    return visible, max(visible, key=lambda j: (j != 0, float(weights[j])))


def qk_attribution(loaded: LoadedModel, att: ModelAttention, layer: int, head: int, query: int, key: int, *,
                   against: int | str | None = None) -> QKAttribution:
    """Split head (layer, head)'s score of `query` on `key` (0-based) into (query part, key part) pairs
    (module docstring). ValueError, in words for the user, for a family or a choice that cannot be split
    exactly (and for a key the query cannot see)."""
    qk = qk_family(loaded, att)
    s = att.self_attn
    L, H, n = s.n_layers, s.n_heads, s.n_queries
    if not (0 <= layer < L and 0 <= head < H):
        raise ValueError(f"{head_words(layer, head)} is outside {L} x {H}")
    if not 0 <= query < n:
        raise ValueError(f"the text has {n} tokens: there is no token {query}")
    query, key = int(query), int(key)
    if isinstance(against, (int, np.integer)):
        against = int(against)
    visible = _visible(s, layer, query, n)
    for j in (key, against):
        if isinstance(j, int) and (not 0 <= j < n or not visible[j]):
            raise ValueError(f"token {query} (“{att.tokens[query]}”) cannot see token {j} in layer {layer + 1} (the "
                             "mask hides it), so it has no score there")
    if against is not None and not isinstance(against, int) and against != "mean":
        raise ValueError("against is a key position or \"mean\"")
    run = StreamParts(loaded, att, qk, layer)
    names, q_vectors = run.vectors([query], "query", head)  # (P + 1, 1, d), the constant last
    _, k_vectors = run.vectors([key], "key", head)
    scale = float(s.scale_of(layer))
    own = scale * float(np.dot(s.q[layer, head, query].astype(np.float64), s.k[layer, s.kv_head(head), key]))
    matrix = scale * q_vectors[:, 0] @ k_vectors[:, 0].T  # (P + 1, P + 1)
    if against is not None:
        others = [against] if isinstance(against, int) else np.flatnonzero(visible).tolist()
        mean_k = torch.zeros_like(k_vectors[:, 0])
        for chunk in range(0, len(others), MEAN_CHUNK):
            _, k_other = run.vectors(others[chunk:chunk + MEAN_CHUNK], "key", head)
            mean_k += k_other.sum(1)
        mean_k /= len(others)
        matrix = matrix - scale * q_vectors[:, 0] @ mean_k.T
        keys = s.k[layer, s.kv_head(head), np.asarray(others)].astype(np.float64)  # (keys, d): one read
        own -= float(np.mean(scale * (keys @ s.q[layer, head, query].astype(np.float64))))
    matrix = matrix.cpu().numpy()
    rest = {"query's biases × key parts": float(matrix[-1, :-1].sum()),
            "query parts × key's biases": float(matrix[:-1, -1].sum()),
            "query's biases × key's biases": float(matrix[-1, -1])}
    total = float(matrix.sum())
    tol = run.tolerance(1e-3)
    if not np.isclose(total, own, rtol=tol, atol=tol * max(1.0, abs(own))):
        raise ValueError(f"{loaded.spec.name}: the parts add up to {total:.5g}, the model's own score is {own:.5g}: "
                         "its query or key is not rebuilt exactly here, so the split is not shown")
    return QKAttribution(layer=layer, head=head, query=query, key=key, against=against, query_parts=names,
                         key_parts=names, matrix=matrix[:-1, :-1], rest=rest, total=total, score=own,
                         softcap=s.softcap_of(layer) if against is None else None, rounding=tol if tol > 1e-3 else 0.0)


def _visible(s, layer: int, query: int, n: int) -> np.ndarray:
    mask = s.mask_of(layer)
    return np.ones(n, bool) if mask is None else np.asarray(mask[query], bool)
