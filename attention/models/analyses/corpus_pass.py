"""What a corpus survey keeps between texts (attention.models.analyses.corpus_survey): a running top-k per head,
each text's statistics, and the sample of queries and keys with the lowest priorities (lowest(), which the
corpus job's merge of two parts uses too).

Shapes: L layers, H heads, k examples per head, P sampled positions, d head size.
"""

from __future__ import annotations

import numpy as np
import torch

from attention.models.forward.survey_pass import survey


class CorpusPass:
    """What the pass keeps between texts: running top-k per head, per-text statistics, the sample."""

    def __init__(self, *, k: int, include_sinks: bool, sample: int, seed: int, statistics: tuple[str, ...]):
        self.k, self.include_sinks, self.sample, self.seed = k, include_sinks, sample, seed
        self.top: tuple[torch.Tensor, ...] | None = None  # weight, text, query, key: each (L, H, k)
        self.stats: dict[str, list[np.ndarray]] = {name: [] for name in statistics}  # HeadSurvey fields
        self.priority = np.zeros(0)  # (P',) of the positions kept so far, with their (text, position) and q, k
        self.where = np.zeros((0, 2), np.int32)
        self.q: np.ndarray | None = None
        self.k_vectors: np.ndarray | None = None
        self.pending: list[tuple[np.ndarray, ...]] = []  # (priority, where, q, k) of texts not merged in yet
        self.captured = True

    def add(self, index: int, att) -> None:
        s = att.self_attn
        head_survey = survey(att)  # made in the forward pass by our kernel; a pass of its own otherwise
        for name in self.stats:
            self.stats[name].append(np.asarray(getattr(head_survey, name), np.float32))
        self._add_top(index, s, att.special)
        self._add_sample(index, s, att.special)

    def _add_top(self, index: int, s, special: np.ndarray) -> None:
        """Merge this text's k largest weights per head into the running top-k."""
        L, H, n, m = s.n_layers, s.n_heads, s.n_queries, s.n_keys
        skip = torch.zeros(m, dtype=torch.bool)
        if not self.include_sinks:
            skip[torch.from_numpy(np.asarray(special[:m], bool))] = True
            skip[0] = True
        take = min(self.k, n * m)
        found = []
        for layer in range(L):
            w = s.layer_weights(layer).float().cpu()  # (H, n, m)
            w = w.masked_fill(skip, -1.0).reshape(H, n * m)
            found.append(torch.topk(w, take, dim=-1))
        weight = torch.stack([f.values for f in found])  # (L, H, take)
        flat = torch.stack([f.indices for f in found])
        text = torch.full_like(flat, index)
        new = (weight, text, flat // m, flat % m)
        if self.top is None:
            merged = new
        else:
            merged = tuple(torch.cat([old, add], -1) for old, add in zip(self.top, new, strict=True))
        order = torch.topk(merged[0], min(self.k, merged[0].shape[-1]), dim=-1).indices
        self.top = tuple(torch.gather(x, -1, order) for x in merged)

    def _add_sample(self, index: int, s, special: np.ndarray) -> None:
        """This text's non-special positions, with their priorities, q and k, into the lowest `sample`."""
        if not s.captured or s.q.shape[2] != s.k.shape[2]:  # no q and k, or queries and keys of other texts
            self.captured = False
            return
        positions = np.flatnonzero(~np.asarray(special, bool))
        drawn = np.random.default_rng([self.seed, index]).random(len(special))[positions]
        if len(self.priority) == self.sample:  # full: only a priority below the highest kept gets in
            below = drawn < self.priority[-1]  # (kept in priority order: the last is the highest)
            positions, drawn = positions[below], drawn[below]
            if not len(positions):
                return
        q = s.q[:, :, positions].astype(np.float16)
        k = s.k[:, :, positions].astype(np.float16)
        where = np.stack([np.full(len(positions), index), positions], 1).astype(np.int32)
        if self.q is None:
            self.q, self.k_vectors = q[:, :, :0], k[:, :, :0]
        self.pending.append((drawn, where, q, k))
        if sum(len(p[0]) for p in self.pending) >= self.sample:
            self._merge()

    def _merge(self) -> None:
        """The pending texts' positions into the lowest `sample`, in one merge: merging text by text copied the
        whole (L, H, P, d) sample for each text (2.1 of MiniLM's 9.0 s over the default corpus). The same
        positions are kept either way (the lowest priorities of all; ties in text order)."""
        if not self.pending:
            return
        drawn, where, q, k = (np.concatenate(part, axis=2 if part[0].ndim == 4 else 0)
                              for part in zip(*self.pending, strict=True))
        self.pending = []
        self.priority, self.where, self.q, self.k_vectors = lowest(
            self.sample, (self.priority, drawn), (self.where, where), (self.q, q), (self.k_vectors, k))

    def finish(self) -> dict:
        """What the pass found, as CorpusSurvey's fields (all but the texts' own: their tokens, spans, the model)."""
        self._merge()
        weight, text, query, key = (x.numpy() for x in self.top)
        empty = weight <= 0  # fewer candidates than k (skipped keys, or a causal text's later keys): no example
        text, query, key = (np.where(empty, -1, x).astype(np.int32) for x in (text, query, key))
        keep = self.captured and self.q is not None
        return dict(
            include_sinks=self.include_sinks, top_text=text, top_query=query, top_key=key,
            top_weight=np.where(empty, 0, weight).astype(np.float32),
            statistics={name: np.stack(values) for name, values in self.stats.items()},
            sample_text=self.where[:, 0], sample_position=self.where[:, 1], sample_priority=self.priority,
            q_sample=self.q if keep else None, k_sample=self.k_vectors if keep else None)


def lowest(size: int, priority: tuple[np.ndarray, np.ndarray], *others) -> tuple[np.ndarray, ...]:
    """Of two sets of sampled positions, the `size` with the lowest priorities, and the same rows of each of
    `others` (pairs of arrays, the sampled axis first for (P, 2) positions, third for (L, H, P, d) vectors).
    Kept in priority order, so the result does not depend on which set came first."""
    both = np.concatenate(priority)
    keep = np.argsort(both, kind="stable")[:size]
    out = [both[keep]]
    for a, b in others:
        axis = 0 if a.ndim == 2 else 2
        out.append(np.take(np.concatenate([a, b], axis=axis), keep, axis=axis))
    return tuple(out)
