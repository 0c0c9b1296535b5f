"""Which families' scores "why this key" splits, and where each family's block keeps what its q and k read.

How each family's block writes to the stream (QKFamily.residual):
    "pre"                   x' = x + W_O(z) + mlp                      (Llama, GPT-2, OPT, Phi, Gemma)
    "post_attention_norm"   x' = x + N(W_O(z)) + mlp, N frozen         (Gemma-2, Gemma-3, OLMo-2)
    "post"                  y = N1(x + W_O(z)); x' = N2(y + mlp(y))     (BERT, RoBERTa, ELECTRA, DistilBERT)
REFUSED says, for the families whose scores are not split, why (docs/models.md lists them).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from attention.models.forward.anatomy import MissingAnatomy
from attention.models.forward.model import LoadedModel
from attention.models.forward.model_attention import ModelAttention


@dataclass(frozen=True)
class QKFamily:
    """Where one family's block keeps what its query and key read (paths from a block)."""

    norm: str | None  # the norm attention reads the stream through (None: it reads the stream itself)
    query: str  # the query projection, or the fused q, k, v projection (key None): q, then k, then v
    key: str | None
    residual: str = "pre"  # how the block writes to the stream (module docstring)
    post_norms: tuple[str, ...] = ()  # "post_attention_norm": the norm of W_O's output; "post": N1, N2
    query_scaling: bool = False  # the module multiplies q by its `scaling` before the kernel (OPT)


_LLAMA = QKFamily("input_layernorm", "self_attn.q_proj", "self_attn.k_proj")
_GEMMA2 = replace(_LLAMA, residual="post_attention_norm", post_norms=("post_attention_layernorm",))
_BERT = QKFamily(None, "attention.self.query", "attention.self.key", residual="post",
                 post_norms=("attention.output.LayerNorm", "output.LayerNorm"))
QK_FAMILIES = {  # config.model_type -> QKFamily
    "llama": _LLAMA, "mistral": _LLAMA, "mixtral": _LLAMA, "qwen2": _LLAMA, "qwen3": _LLAMA, "stablelm": _LLAMA,
    "gemma": _LLAMA, "phi": _LLAMA, "phi3": QKFamily("input_layernorm", "self_attn.qkv_proj", None),
    "gemma2": _GEMMA2, "gemma3_text": _GEMMA2, "olmo2": replace(_GEMMA2, norm=None),
    "gpt2": QKFamily("ln_1", "attn.c_attn", None),
    "opt": QKFamily("self_attn_layer_norm", "self_attn.q_proj", "self_attn.k_proj", query_scaling=True),
    "bert": _BERT, "roberta": _BERT, "electra": _BERT,
    "distilbert": QKFamily(None, "attention.q_lin", "attention.k_lin", residual="post",
                           post_norms=("sa_layer_norm", "output_layer_norm")),
}
REFUSED = {  # config.model_type -> why its scores are not split here (docs/models.md lists them)
    "t5": "adds a learned position bias to every score", "bloom": "adds ALiBi position biases to every score",
    "falcon": "adds ALiBi position biases to its scores (in some checkpoints) and writes attention and MLP "
              "from one norm", "deberta-v2": "adds disentangled position-to-content scores to every score",
    "albert": "runs one shared block for every layer", "gptj": "rotates queries and keys inside its attention "
              "with interleaved pairs", "gpt_neox": "fuses q, k and v per head in one projection",
    "modernbert": "fuses q, k and v in one projection read per head", "bart": "is an encoder-decoder model",
    "marian": "is an encoder-decoder model",
}


def qk_family(loaded: LoadedModel, att: ModelAttention) -> QKFamily:
    """The family's entry in QK_FAMILIES; ValueError, in words for the user, for a family whose scores are not
    split here (REFUSED, no entry, not captured, an encoder-decoder, OPT-350m's post-norm layout)."""
    name = loaded.spec.name
    if att.architecture == "encoder-decoder":
        raise ValueError(f"{name} is an encoder-decoder model: its scores are not split here.")
    try:
        kind = loaded.anatomy.model_type
    except MissingAnatomy as err:
        raise ValueError(f"{name}: {err}.") from None
    if kind in REFUSED:
        raise ValueError(f"{name} ({kind}) {REFUSED[kind]}: its scores are not split into parts here.")
    if kind not in QK_FAMILIES:
        raise ValueError(f"{name} ({kind}): its family has no entry in this app's list of the families whose scores "
                         "it splits, so its scores are not split into parts here.")
    if att.self_attn.q is None or att.self_attn.k is None or att.self_attn.bias:
        raise ValueError(f"{name}: its queries and keys were not captured (or it adds a position bias), so its "
                         "scores cannot be split here.")
    if kind == "opt" and not getattr(loaded.network.config, "do_layer_norm_before", True):
        raise ValueError(f"{name} normalises after each block (OPT-350m's layout): its scores are not split here.")
    return QK_FAMILIES[kind]
