"""The forward pass and what it records: load a model, run it on a text, keep every layer's q, k, v.

    >>> from attention.models.forward import load_model
    >>> att = load_model("minilm").attend("I sat on the river bank.")   # a ModelAttention

Modules, in the order a forward pass meets them:
    registry        which models exist (bundled, local folders, hub allowlist, default encoder and decoder)
    loading         load_model, from_model: files or a notebook's model -> a LoadedModel, checked by the guard
    memory          a model's size from its config (meta device) against what the process may use, before loading
    model           LoadedModel (network, tokenizer, its ModelCheck, the lock that shares it), has_lm_head
    anatomy         where each family keeps its layers, W_O, norm, rotary embedding and LM head
    capture         records Q, K, V inside the network while it runs (and its eager attention beside it)
    running         attend(): the one forward pass over a user's text; own_attention(): the model's own weights
    kernel          SurveyKernel, our attention kernel inside that pass: the layer's output and the survey's sums
    survey_sums     the sums a survey adds up from each chunk of weights
    head_survey     HeadSurvey: every head's summaries (the grid, Head atlas statistics, distance, sink mass)
    stacks          captured calls -> the result's AttentionStacks and hidden states
    model_attention ModelAttention / AttentionStack: what the pass recorded; head_trace
    recompute       weights recomputed from q and k, a chunk of rows at a time, on the compute device
    guard           rebuilt weights held to the model's own at every layer, on that layer's own inputs,
                    before anyone's text is read: ModelCheck, allowed_gap
    tokens          display strings, special and punctuation flags, finding a word
    images          an image model's input: a stranger's file read safely, its tokens named by their patches
    sinks           the one rule for a head's attention sinks

Nothing here imports the other two wings (attention.models.recorded, attention.models.analyses): they read
what this wing records.
"""

from attention.focus import DTYPES, Focus, ModelChoice, TokenAt, WordPair
from attention.models.forward.capture import EagerBeside
from attention.models.forward.guard import GUARD_GAP, ModelCheck, allowed_gap
from attention.models.forward.head_survey import BROAD_FRACTION, METRICS, TYPE_THRESHOLD, HeadSurvey, survey
from attention.models.forward.images import (
    IMAGE_FORMATS,
    MAX_IMAGE_BYTES,
    MAX_IMAGE_PIXELS,
    MAX_IMAGE_SIDE,
    MIN_IMAGE_SIDE,
    ExampleImages,
    ImagePatches,
    ImageRefused,
    image_patches,
    read_image,
)
from attention.models.forward.loading import SMALL_MODEL_BYTES, example_images, from_model, load_model
from attention.models.forward.memory import MEMORY_ENV, MemoryPlan, NotEnoughMemory, plan_memory, weight_bytes
from attention.models.forward.model import REQUESTER, LoadedModel, Progress, has_lm_head, layer_windows, rotary_base
from attention.models.forward.model_attention import STACKS, AttentionStack, ModelAttention
from attention.models.forward.registry import (
    BUNDLED,
    COMPARISONS,
    DEFAULT_DECODER,
    DEFAULT_ENCODER,
    DEFAULT_IMAGE_MODEL,
    DEFAULT_MODEL,
    IMAGE_HUB_MODELS,
    IMAGE_MODELS,
    LOCAL_PREFIX,
    ModelRefused,
    ModelSpec,
    ModelUnavailable,
    carriers,
    hub_allowlist,
    image_models,
    local_models,
    model_label,
    model_name,
)
from attention.models.forward.running import MAX_TEXT_CHARS, attend, attend_image, own_attention
from attention.models.forward.sinks import SINKS_NOTE
from attention.models.forward.tokens import default_focus, find_word, last_word

__all__ = [
    "Focus", "ModelChoice", "TokenAt", "WordPair",
    "BROAD_FRACTION", "BUNDLED", "COMPARISONS", "DEFAULT_DECODER", "DEFAULT_ENCODER", "DEFAULT_MODEL", "DTYPES",
    "GUARD_GAP", "EagerBeside", "allowed_gap",
    "LOCAL_PREFIX", "MAX_TEXT_CHARS", "MEMORY_ENV", "METRICS", "REQUESTER", "MemoryPlan", "NotEnoughMemory",
    "SINKS_NOTE", "SMALL_MODEL_BYTES", "STACKS", "TYPE_THRESHOLD", "AttentionStack", "HeadSurvey", "LoadedModel",
    "ModelAttention", "ModelCheck", "ModelRefused", "ModelSpec", "ModelUnavailable", "attend", "default_focus",
    "find_word",
    "Progress", "carriers", "from_model", "has_lm_head", "hub_allowlist", "last_word", "layer_windows",
    "load_model", "local_models", "model_label", "model_name", "own_attention", "plan_memory", "rotary_base", "survey",
    "weight_bytes",
    "DEFAULT_IMAGE_MODEL", "IMAGE_FORMATS", "IMAGE_HUB_MODELS", "IMAGE_MODELS", "MAX_IMAGE_BYTES", "MAX_IMAGE_PIXELS",
    "MAX_IMAGE_SIDE", "MIN_IMAGE_SIDE", "ImagePatches", "ImageRefused", "ExampleImages", "attend_image",
    "example_images", "image_models", "image_patches", "read_image",
]
