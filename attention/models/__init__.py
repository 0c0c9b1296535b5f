"""Real pretrained models: load one, run it on a text, and read every layer and head (needs torch).

    >>> from attention.models import load_model
    >>> att = load_model("minilm").attend("I sat on the river bank.")
    >>> att.weights.shape            # (layers, heads, queries, keys)
    >>> att.head_trace(2, 5)         # one head rebuilt step by step, an attention.AttentionTrace

Modules, in the order a forward pass meets them:
    registry        which models exist (bundled, local folders, hub allowlist, default encoder and decoder)
    loading         load_model, from_model: files or a notebook's model -> a network whose attention goes
                    through capture, checked by the guard
    anatomy         where each family keeps its layers, W_O, norm, rotary embedding and LM head
    capture         records Q, K, V inside the network while it runs
    running         LoadedModel and attend(): the one place a forward pass happens
    guard           rebuilt weights held to the model's own before anyone's text is read: ModelCheck
    model_attention ModelAttention / AttentionStack: what the pass recorded; head_trace
    tokens          display strings, special and punctuation flags, finding a word
    recompute       weights recomputed from q and k, a chunk of rows at a time, on the compute device
    aggregations    the table of ways to show a layer as one matrix (one head, mean, max, rollout, norm)
    sinks           the one rule for a head's attention sinks
    words           pieces merged into the tokenizer's words: word_level(att) -> WordAttention
    views           what pages draw, re-read as Reading(words, without_sinks, log) says: zoom, query_row,
                    token_focus, line_view
    head_survey     one pass over every head: the grid, Head atlas statistics, distance, sink mass
    export          the matrix on screen as CSV, a sentence as .npz, safe file names
    ambiguous_words one word in two sentences (the Ambiguous words page)
    predictions     the next token and step-by-step generation (the Predictions page)
    contrast        a target and a foil token, tokenized once, and the model's logit difference
    edits           runs with heads' outputs or the residual stream edited, batched (ablation, patching)
    head_effects    each head removed, exactly or by attribution patching, and how well the two agree
    readout         the residual stream through the unembedding: direct logit attribution, the logit lens
    roles           previous-token, induction, duplicate-token and first-token scores on a probe
    patching        activation patching of a clean run into a corrupted one
    composition     Q-, K- and V-composition of heads, from their weights
    rotary          one head's q and k through its rotary positions (the Positions page)

The toy side (`import attention`) never imports this package, so toy pages start without torch.
"""

from attention.models.aggregations import AGGREGATIONS, aggregate, attention_row
from attention.models.head_survey import HeadSurvey, survey
from attention.models.loading import from_model, load_model
from attention.models.model_attention import STACKS, AttentionStack, ModelAttention
from attention.models.registry import (
    BUNDLED,
    DEFAULT_DECODER,
    DEFAULT_ENCODER,
    DEFAULT_MODEL,
    ModelSpec,
    ModelUnavailable,
    hub_allowlist,
)
from attention.models.running import LoadedModel, attend, own_attention
from attention.models.views import AS_IS, MatrixView, Reading, line_view, query_row, token_focus, zoom
from attention.models.words import WordAttention, WordGroups, word_groups, word_level

__all__ = [
    "AGGREGATIONS", "AS_IS", "BUNDLED", "DEFAULT_DECODER", "DEFAULT_ENCODER", "DEFAULT_MODEL", "STACKS",
    "AttentionStack", "HeadSurvey", "LoadedModel", "MatrixView", "ModelAttention", "ModelSpec", "ModelUnavailable",
    "Reading", "aggregate", "attend", "attention_row", "from_model", "hub_allowlist", "line_view", "load_model",
    "own_attention",
    "query_row", "survey", "token_focus", "zoom", "WordAttention", "WordGroups", "word_groups", "word_level",
]
