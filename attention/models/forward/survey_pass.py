"""The survey's pass: every head's weights summed once into a HeadSurvey (attention.models.forward.head_survey).

attend() makes the sums inside the model's forward pass (SurveyKernel, attention.models.forward.kernel) and
calls finish_survey; a result made otherwise (the model's own weights, a saved file) is surveyed by survey(),
a pass of its own over the weights recomputed from q and k, summed by the same SurveySums
(attention.models.forward.survey_sums), a chunk of query rows at a time.

Shapes: L layers, H heads, n tokens, m keys.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from attention.models.forward import fused_survey
from attention.models.forward.device import work_threads
from attention.models.forward.head_survey import HeadSurvey
from attention.models.forward.model_attention import ModelAttention
from attention.models.forward.recompute import row_chunks
from attention.models.forward.sinks import sink_candidates
from attention.models.forward.survey_sums import SurveySums, band_pairs, visible_pairs
from attention.models.forward.tokens import is_punctuation


def survey(att: ModelAttention, *, progress: Callable[[float, str], None] | None = None) -> HeadSurvey:
    """Every head's summaries of the self-attention. Made during the forward pass when the model ran our
    SurveyKernel (attend() keeps them with the result), else by one pass over every head now, layer by
    layer, a chunk of query rows at a time; kept with the result either way (`AttentionStack.derived.survey`)."""
    s = att.self_attn
    if s.derived.survey is None:
        L, H, n, m = s.n_layers, s.n_heads, s.n_queries, s.n_keys
        totals = SurveySums(L, H, n, m)
        with work_threads(n):
            for layer in range(L):
                window = fused_survey.supported(s, layer, totals.block)
                sums = None if window is None else fused_survey.try_layer_sums(s, layer, totals.block, window)
                if sums is not None:  # on a GPU: the layer's sums in two fused passes, no weights stored
                    totals.add_layer(layer, sums)
                else:
                    for rows in row_chunks(n, totals.rows_per_chunk):
                        keys = s.keys_seen(rows)  # a causal chunk never sees later keys: their weights are 0
                        totals.add(layer, rows, s.layer_scores(layer, rows=rows, keys=keys, out=totals.scores),
                                   s.causal)
                if progress:
                    progress((layer + 1) / L, f"Surveying every head: layer {layer + 1} of {L}")
        s.derived.survey = finish_survey(att, totals)
    return s.derived.survey


def finish_survey(att: ModelAttention, totals: SurveySums) -> HeadSurvey:
    """The HeadSurvey from the pass's sums, with what the tokens add: special tokens, punctuation, sinks."""
    s = att.self_attn
    L, n = s.n_layers, s.n_queries
    totals.flush()
    by_mask = {}  # id of each distinct mask -> (visible pairs per offset, uniform entropy): layers share masks
    for layer in range(L):
        mask = s.mask_of(layer)
        if id(mask) not in by_mask:
            window = fused_survey.band_window(s, layer)  # a causal, windowed or open mask: counted
            by_mask[id(mask)] = (visible_pairs(s, mask, totals.rows_per_chunk) if window is None
                                 else band_pairs(n, s.n_keys, s.causal, window))
    special = att.special.copy()
    if not special.any():  # decoders without BOS: the first token plays the special token's role
        special[0] = True
    punct = np.array([is_punctuation(t) and not sp for t, sp in zip(att.tokens, att.special, strict=True)])
    column_mass, majority_share = totals.column_mass / n, totals.column_majority / n
    for layer in range(L):  # the sink rule's counts, made in this pass: no view counts them again
        s.keep_majority_share(layer, majority_share[layer])
    per_layer = [by_mask[id(s.mask_of(layer))] for layer in range(L)]
    return HeadSurvey(
        tiles=totals.tiles, block=totals.block, entropy=totals.entropy / n,
        uniform_entropy=np.array([uniform for _, uniform in per_layer]),
        column_mass=column_mass, majority_share=majority_share, offset_mass=totals.offset_mass,
        offset_pairs=np.stack([pairs for pairs, _ in per_layer]), special_mass=column_mass[..., special].sum(-1),
        punctuation=column_mass[..., punct].sum(-1), sink_candidates=sink_candidates(att.special),
    )

