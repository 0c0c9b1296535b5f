"""Attention sinks: the tokens a head parks its weight on, found by one rule.

Softmax must put each row's weight somewhere; heads with nothing useful to read park it on a token every
query sees. The rule, used by every view ("without sinks") and by the Head atlas (sink mass):

    sinks of a head = the first token and the special tokens ([CLS], [SEP], BOS)     (Xiao et al. 2023)
                      + any key holding over half the weight in over SINK_ROWS of the rows

The second part finds sinks that are not special: a period, a newline. Counting it needs one pass over a
layer's weights; the count is kept with the result (`AttentionStack.derived.majority_share`), so a page that asks again
(another view, another rerun) does not count again, and the survey leaves the counts it makes in its own
pass there too (head_survey.survey).

Shapes: n query tokens, m keys, H heads.
"""

from __future__ import annotations

import numpy as np

from attention.models.forward.model_attention import AttentionStack, ModelAttention
from attention.models.forward.recompute import chunk_rows, row_chunks

SINK_ROWS = 0.5  # a key is a sink of a head when it holds over half the weight in over this share of rows

SINKS_NOTE = ("**Why sinks?** Softmax must put each row's weight somewhere. Heads with nothing useful to read park "
              "it on a token every query can see, usually the first token or [SEP]/[CLS] (Clark et al. 2019, "
              "“What does BERT look at?”). Xiao et al. (2023, “Efficient streaming language models with attention "
              "sinks”) found that models keep the first tokens as such sinks even when they carry no meaning: "
              "removing them from the cache breaks generation. The weight is large but the value vectors there are "
              "small, so the head adds little; the norm-based view (“Show: norm”, ‖α v W_O‖, Kobayashi et al. 2020) "
              "shrinks sinks for that reason. “Without sinks” shows what the rest of each row looks like.")


def sink_candidates(special: np.ndarray) -> np.ndarray:
    """(n,) bool: the first token and the special tokens, sinks of every head. Shapes: special (n,) bool."""
    special = np.asarray(special, bool)
    return special | (np.arange(len(special)) == 0)


def sink_rule(candidates: np.ndarray, majority_share: np.ndarray) -> np.ndarray:
    """The one rule: the candidates, and every key holding over half the weight in over SINK_ROWS of the
    rows. Shapes: candidates (m,) bool, majority_share (..., m) -> (..., m) bool."""
    return np.asarray(candidates, bool) | (np.asarray(majority_share) > SINK_ROWS)


def majority_share(s: AttentionStack, layer: int) -> np.ndarray:
    """(H, m) for each head of one layer, the share of query rows in which key j holds over half the
    weight. Counted once per layer, a chunk of rows at a time, and kept in s.derived.majority_share."""
    if layer not in s.derived.majority_share:
        count = np.zeros((s.n_heads, s.n_keys))
        for rows in row_chunks(s.n_queries, chunk_rows(s.n_heads, s.n_keys)):
            keys = s.keys_seen(rows)
            count[:, :keys] += (s.layer_weights(layer, rows=rows, keys=keys) > 0.5).sum(1).cpu().numpy()
        remember_majority_share(s, layer, count / s.n_queries)
    return s.derived.majority_share[layer]


def remember_majority_share(s: AttentionStack, layer: int, share: np.ndarray) -> None:
    """Keep a layer's majority shares, counted elsewhere (the survey's pass), for majority_share."""
    share = np.array(share, dtype=np.float32)
    share.flags.writeable = False
    s.derived.majority_share[layer] = share


def layer_sinks(att: ModelAttention, layer: int) -> np.ndarray:
    """(H, n) bool: each head's sinks in one layer of the self-attention."""
    return sink_rule(sink_candidates(att.special), majority_share(att.self_attn, layer))


def head_sinks(att: ModelAttention, layer: int, head: int | None = None) -> np.ndarray:
    """(n,) bool: one head's sinks, or (head None) those of any head of the layer, what a view over all
    the layer's heads (the mean, the max) removes."""
    sinks = layer_sinks(att, layer)
    return sinks.any(0) if head is None else sinks[head]
