"""The forward pass and what it records: load a model, run it on a text, keep every layer's q, k, v.

    >>> from attention.models.forward import attend, load_model
    >>> att = attend(load_model("minilm"), "I sat on the river bank.")   # a ModelAttention

Modules, in the order a forward pass meets them:
    registry        which models exist (bundled, local folders, hub allowlist, default encoder and decoder)
    loading         load_model, from_model: files or a notebook's model -> a LoadedModel, checked by the guard
    bundled         the bundled models' files: carriers found, GGUF joined and checked, converted once
    memory          a model's size from its config (meta device) against what the process may use, before loading
    device          where work runs: compute_device, work_threads
    model           LoadedModel (network, tokenizer, its ModelCheck, the lock that shares it)
    anatomy         where each family keeps its layers, W_O, norm, rotary embedding and LM head; its windows
    capabilities    what a model supports: each feature -> None or why not, read from its family's entry
    inputs          what the network reads: a text tokenized and cut to its limit, ids as given, an image's pixels
    capture         records Q, K, V inside the network while it runs (and its eager attention beside it)
    running         attend(): the one forward pass over a user's text; own_attention(): the model's own weights
    hook_points     TransformerLens's hook names over the anatomy, and hooks() that put fns on them
    hook_runs       run_with_cache (gradients too, incl_bwd) and run_with_hooks through those points
    attention_edits hook_attn_scores and hook_pattern, edited inside the eager kernel's softmax
    head_results    attn.hook_result: each head's z_h W_O^h before the sum, summed back where a fn edits it
    tl_names        TransformerLens's hook names not given here, each with why and what to read instead
    token_ids       TransformerLens's to_tokens, to_str_tokens, to_single_token, with prepend_bos
    kernel          SurveyKernel, our attention kernel inside that pass: the layer's output and the survey's sums
    survey_sums     the sums a survey adds up from each chunk of weights
    fused_survey    the same sums on a GPU in two fused Triton passes (fused_survey_kernels: the kernels)
    survey_pass     survey(): every head's weights summed once, inside the pass or after it
    head_survey     HeadSurvey: every head's summaries (the grid, Head atlas statistics, distance, sink mass)
    stacks          captured calls -> the result's AttentionStacks and hidden states
    attention_stack AttentionStack: one kind of attention over every layer (q, k, v, masks), weights from them
    model_attention ModelAttention: what the pass recorded (tokens, hidden states, its stacks); head_trace, sinks
    device_arrays   a GPU pass's arrays kept on the GPU, read as numpy (DeviceArray)
    recompute       weights recomputed from q and k, a chunk of rows at a time, on the compute device
    guard           check_model: rebuilt weights held to the model's own at every layer, on that layer's own
                    inputs, before anyone's text is read
    check           what the guard measured (ModelCheck), the gaps it allows (allowed_gap), its refusal
                    (ModelRefused)
    tokens          display strings, special and punctuation flags, finding a word
    images          an image model's input: a stranger's file read safely, its tokens named by their patches
    sinks           the one rule for a head's attention sinks (plain numpy)
    vit_digits/     the bundled image model's files (scripts/train_vit_digits.py)

Nothing here imports the other two wings (attention.models.recorded, attention.models.analyses): they read
what this wing records.
"""

from attention.focus import DTYPES, Focus, ModelChoice, TokenAt, WordPair
from attention.models.forward.anatomy import Anatomy, MissingAnatomy, has_lm_head, layer_windows
from attention.models.forward.attention_stack import AttentionStack
from attention.models.forward.bundled import example_images, minilm_dir
from attention.models.forward.capabilities import FEATURES, capabilities, require, why_not
from attention.models.forward.capture import CAPTURE, EagerBeside
from attention.models.forward.check import GUARD_GAP, ModelCheck, ModelRefused, allowed_gap
from attention.models.forward.device import compute_device, work_threads
from attention.models.forward.head_survey import BROAD_FRACTION, METRICS, TYPE_THRESHOLD, HeadSurvey
from attention.models.forward.hook_points import HookPoint, HookPointError, add_hook, hook_names, hooks, reset_hooks
from attention.models.forward.hook_runs import HookCache, run_with_cache, run_with_hooks
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
from attention.models.forward.inputs import MAX_TEXT_CHARS
from attention.models.forward.kernel import SurveyKernel
from attention.models.forward.loading import (
    SMALL_MODEL_BYTES,
    from_model,
    load_model,
    memory_plan,
)
from attention.models.forward.memory import MEMORY_ENV, MemoryPlan, NotEnoughMemory, plan_memory, weight_bytes
from attention.models.forward.model import REQUESTER, LoadedModel, Progress, rotary_base
from attention.models.forward.model_attention import STACKS, ModelAttention, shown_tokens
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
    ModelSpec,
    ModelUnavailable,
    cache_dir,
    carriers,
    hub_allowlist,
    image_models,
    local_models,
    model_label,
    model_name,
)
from attention.models.forward.running import attend, attend_image, own_attention
from attention.models.forward.sinks import SINKS_NOTE
from attention.models.forward.survey_pass import survey
from attention.models.forward.tl_names import get_act_name
from attention.models.forward.token_ids import to_single_token, to_str_tokens, to_tokens
from attention.models.forward.tokens import default_focus, find_word, last_word, spaced_labels, text_pieces
from attention.naming import HeadName, head_name, head_words

__all__ = [
    "Focus", "ModelChoice", "TokenAt", "WordPair", "head_name", "head_words",
    "BROAD_FRACTION", "BUNDLED", "COMPARISONS", "DEFAULT_DECODER", "DEFAULT_ENCODER", "DEFAULT_MODEL", "DTYPES",
    "GUARD_GAP", "EagerBeside", "allowed_gap",
    "LOCAL_PREFIX", "MAX_TEXT_CHARS", "MEMORY_ENV", "METRICS", "REQUESTER", "MemoryPlan", "NotEnoughMemory",
    "SINKS_NOTE", "SMALL_MODEL_BYTES", "STACKS", "TYPE_THRESHOLD", "AttentionStack", "HeadSurvey", "LoadedModel",
    "ModelAttention", "ModelCheck", "ModelRefused", "ModelSpec", "ModelUnavailable", "attend", "default_focus",
    "shown_tokens", "cache_dir",
    "find_word",
    "Progress", "carriers", "from_model", "has_lm_head", "hub_allowlist", "last_word", "layer_windows",
    "spaced_labels", "text_pieces",
    "load_model", "local_models", "model_label", "model_name", "own_attention", "plan_memory", "rotary_base", "survey",
    "weight_bytes",
    "DEFAULT_IMAGE_MODEL", "IMAGE_FORMATS", "IMAGE_HUB_MODELS", "IMAGE_MODELS", "MAX_IMAGE_BYTES", "MAX_IMAGE_PIXELS",
    "MAX_IMAGE_SIDE", "MIN_IMAGE_SIDE", "ImagePatches", "ImageRefused", "ExampleImages", "attend_image",
    "example_images", "image_models", "image_patches", "read_image",
    "CAPTURE", "SurveyKernel", "compute_device", "memory_plan", "minilm_dir", "work_threads",
    # TransformerLens's hook points (hook_points) and one name for a head, both ways
    "HeadName", "HookCache", "HookPoint", "HookPointError", "add_hook", "get_act_name", "hook_names", "hooks",
    "reset_hooks",
    "run_with_cache", "run_with_hooks", "to_single_token", "to_str_tokens", "to_tokens",
    # where a family keeps its parts, from the table or read from its module tree (anatomy_inferred)
    "Anatomy", "MissingAnatomy",
    # what a model supports: each feature -> None or why not (capabilities), the guard every analysis starts with
    "FEATURES", "capabilities", "require", "why_not",
]
