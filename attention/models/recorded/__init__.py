"""Reads of a recorded result: what a ModelAttention shows, with or without the model (a saved .npz too).

    >>> from attention.models.recorded import Reading, zoom
    >>> view = zoom(att, layer=2, head=5, reading=Reading(words=True, without_sinks=True))

Modules:
    aggregations    the table of ways to show a layer as one matrix (one head, mean, max, rollout, norm)
    words           pieces merged into the tokenizer's words: word_level(att) -> WordAttention
    views           what pages draw, re-read as Reading(words, without_sinks, log) says: zoom, query_row,
                    token_focus, line_view
    export          the matrix on screen as CSV, a sentence as .npz, safe file names
    imported        a result from a file (.npz) or from any model's output_attentions
    rotary          one head's q and k through its rotary positions (the Positions page)
    ambiguous_words one word in two sentences (the Ambiguous words page)
    comparison      two results of one text compared head by head: compare_heads -> HeadComparison, head_pair,
                    saved with both results in one file (comparison_npz, load_comparison); any measure of
                    heads in A beside its counterpart in B (head_change)
    questions       the model pages' predict-then-see questions, answered from the result
    image_reads     an image model's result over its picture: where a patch looks, every head, rollout, high norms
    contributions   what a weight does not say: weighted value norms, the sink by weight and by norm, ALTI (which
                    reads the loaded model's norms, not its pass)

Everything here takes a result and returns numbers; nothing runs the network (attention.models.analyses
does), so every read works on a result opened from a file.
"""

from attention.models.recorded.aggregations import (
    AGGREGATIONS,
    CONTRIBUTION_MEASURES,
    ROLLOUT_RESIDUAL,
    aggregate,
    attention_row,
    measure_of,
    rollout,
    with_measure,
)
from attention.models.recorded.ambiguous_words import WordComparison, compare_word, difference_by_token
from attention.models.recorded.comparison import (
    HEAD_MEASURES,
    HeadChange,
    HeadComparison,
    HeadPair,
    OwnStrongest,
    SavedComparison,
    compare_heads,
    compare_results,
    comparison_npz,
    head_change,
    head_pair,
    js_divergence,
    load_comparison,
    own_strongest,
    same_layout,
)
from attention.models.recorded.contributions import (
    Alti,
    RowContributions,
    alti,
    first_token_shares,
    head_shares,
    most_parked,
    norm_row,
    parked_weight,
    row_contributions,
    value_norms,
    weighted_value_norms,
)
from attention.models.recorded.export import file_stem, matrix_csv, sentence_npz
from attention.models.recorded.image_reads import (
    HIGH_NORM_FACTOR,
    PatchLooks,
    attention_rollout,
    heads_looking,
    high_norm_tokens,
    patch_looks,
    token_norms,
)
from attention.models.recorded.imported import NPZ_MAX_BYTES, export_npz, from_attentions, load_npz
from attention.models.recorded.questions import ModelQuestion, model_questions_for
from attention.models.recorded.rotary import RotaryView, rotary_view
from attention.models.recorded.views import (
    AS_IS,
    LINE_VIEW_MAX_UNITS,
    LINE_VIEW_TOKENS,
    LineView,
    MatrixView,
    Reading,
    alti_view,
    line_view,
    query_row,
    token_focus,
    zoom,
)
from attention.models.recorded.words import WordAttention, WordGroups, word_groups, word_level

__all__ = [
    "HEAD_MEASURES", "HeadChange", "head_change", "OwnStrongest", "own_strongest",
    "AGGREGATIONS", "AS_IS", "LINE_VIEW_MAX_UNITS", "LINE_VIEW_TOKENS", "NPZ_MAX_BYTES", "HeadComparison", "LineView",
    "MatrixView", "ModelQuestion", "Reading", "RotaryView", "WordAttention", "WordComparison", "WordGroups",
    "aggregate", "attention_row", "compare_heads", "compare_word", "difference_by_token", "export_npz", "file_stem",
    "from_attentions", "js_divergence", "line_view", "load_npz", "HeadPair", "SavedComparison", "compare_results",
    "comparison_npz", "head_pair", "load_comparison", "same_layout", "matrix_csv", "query_row", "model_questions_for",
    "rotary_view", "sentence_npz", "token_focus", "word_groups", "word_level", "zoom",
    "HIGH_NORM_FACTOR", "ROLLOUT_RESIDUAL", "PatchLooks", "attention_rollout", "heads_looking", "high_norm_tokens",
    "patch_looks", "rollout", "token_norms",
    # what a weight does not say (contributions): Kobayashi's weighted norms, the sink by weight and by norm, ALTI
    "Alti", "alti", "first_token_shares", "head_shares", "parked_weight", "value_norms", "weighted_value_norms",
    "RowContributions", "most_parked", "norm_row", "row_contributions", "CONTRIBUTION_MEASURES", "measure_of",
    "with_measure", "alti_view",
]
