"""Attention sinks: the tokens a head parks its weight on, found by one rule.

Softmax must put each row's weight somewhere; heads with nothing useful to read park it on a token every
query sees. The rule, used by every view ("without sinks") and by the Head atlas (sink mass):

    sinks of a head = the first token and the special tokens ([CLS], [SEP], BOS)     (Xiao et al. 2023)
                      + any key holding over half the weight in over SINK_ROWS of the rows

The second part finds sinks that are not special: a period, a newline. Counting it needs one pass over a
layer's weights (`AttentionStack.majority_share`); the count is kept with the result, so a page that asks again
(another view, another rerun) does not count again, and the survey leaves the counts it makes in its own
pass there too (survey_pass.survey). A result's sinks: `ModelAttention.layer_sinks`, `.head_sinks`.
This module is the rule alone, plain numpy: the records that apply it (the stack, the survey) import it.

Shapes: n query tokens, m keys, H heads.
"""

from __future__ import annotations

import numpy as np

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
