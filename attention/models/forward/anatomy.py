"""Where each model family keeps its parts: one entry per family, read by everything that reaches into a
network (the output projection W_O for the norm view and head ablation, the layers a forward pass can
restart from, the rotary embedding, the final norm and the language-model head).

Paths are relative to the network's base model (`network.base_model`: LlamaModel inside
LlamaForCausalLM, BertModel itself), and, for the parts of one block, relative to the block:

    family "llama":  layers "layers"   attention "self_attn"   output "self_attn.o_proj"   final norm "norm"

The entry also says what the hook points (attention.models.forward.hook_points) read there: which module's
output is what attention and the MLP add to the residual stream (`writes`), and how a family that makes q, k
and v in one projection lays them out (`fused_qkv`); and what "why this key" (attention.models.analyses.
qk_attribution) reads for a score's parts (`qk`: where q and k read the stream, or why its scores are not
split). A family is described here once; attention.models.forward.capabilities reads these entries to say
what each feature needs and which model lacks it.

A family without an entry still shows its attention (capture needs no anatomy); what needs the anatomy
says which family is missing instead of guessing module names.

Shapes: L layers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch


def parameter(module: torch.nn.Module, name: str = "weight") -> torch.Tensor | None:
    """A module's parameter's values wherever they are: in memory, or, for a layer accelerate keeps on disk
    (a device_map with "disk"), read from its offload files (the module's own tensor is then an empty
    placeholder on the meta device). None when the module has no such parameter."""
    tensor = getattr(module, name, None)
    if tensor is None or tensor.device.type != "meta":
        return tensor
    weights = getattr(getattr(module, "_hf_hook", None), "weights_map", None)
    if weights is None or name not in weights:
        raise ValueError(f"the model's {type(module).__name__}.{name} is on no device (an empty placeholder), so "
                         "its values cannot be read")
    return weights[name]


def home(module: torch.nn.Module) -> tuple[torch.device, torch.dtype]:
    """Where a module computes and in what dtype: its parameters' device, or, for a module accelerate moves
    in and out (a device_map), the device its hook runs it on."""
    hook = getattr(module, "_hf_hook", None)
    first = next(module.parameters(), None)
    dtype = first.dtype if first is not None else torch.float32
    if hook is not None and getattr(hook, "execution_device", None) is not None:
        return torch.device(hook.execution_device), dtype
    return (first.device if first is not None else torch.device("cpu")), dtype


@dataclass(frozen=True)
class Writes:
    """Where a family's block says what attention and the MLP add to the residual stream (paths in a block):
    TransformerLens's hook_attn_out and hook_mlp_out, and the post-norm encoders' hook_resid_post."""

    attn_out: str | None  # the module whose output attention adds (None: W_O, the family's output projection)
    mlp_out: str  # the module whose output the MLP adds
    post_norm: str | None = None  # post-norm encoders: the LayerNorm whose input is TL's hook_resid_post


@dataclass(frozen=True)
class Inner:
    """Where a pre-norm block keeps what TransformerLens hooks inside it (paths in a block; None: the block has no
    such part): the norms before attention and the MLP, the MLP's projections, and the module whose input is the
    stream between attention and the MLP (hook_resid_mid; None where the two read the same stream in parallel)."""

    ln1: str | None  # the norm attention reads through (its input: hook_resid_pre)
    ln2: str | None  # the norm the MLP reads through
    mlp_in: str  # the projection whose output is mlp.hook_pre (the gate, or the MLP's one up projection) ...
    mlp_linear: str | None  # ... the gated MLP's other up projection (mlp.hook_pre_linear; None: not gated)
    mlp_out: str  # the projection whose input is mlp.hook_post (the activation, times the up projection if gated)
    resid_mid: str | None  # the module whose first input is the stream after attention's write
    fused_gate_up: bool = False  # mlp_in makes [gate | up] side by side (Phi-3): hook_pre and hook_pre_linear halves


@dataclass(frozen=True)
class FusedQKV:
    """One projection in a block that makes q, k and v (families without separate ones: Family.qkv None)."""

    path: str  # the projection, from a block
    layout: str  # "side by side": [q | k | v] (k, v of the KV heads); "by head": [q_h k_h v_h] for each head h


@dataclass(frozen=True)
class QKFamily:
    """Where one family's block keeps what its query and key read (paths from a block), for "why this key".

    How the block writes to the stream (`residual`):
        "pre"                   x' = x + W_O(z) + mlp                      (Llama, GPT-2, OPT, Phi, Gemma)
        "post_attention_norm"   x' = x + N(W_O(z)) + mlp, N frozen         (Gemma-2, Gemma-3, OLMo-2)
        "post"                  y = N1(x + W_O(z)); x' = N2(y + mlp(y))     (BERT, RoBERTa, ELECTRA, DistilBERT)
    """

    norm: str | None  # the norm attention reads the stream through (None: it reads the stream itself)
    query: str  # the query projection, or the fused q, k, v projection (key None): q, then k, then v
    key: str | None
    residual: str = "pre"  # how the block writes to the stream (above)
    post_norms: tuple[str, ...] = ()  # "post_attention_norm": the norm of W_O's output; "post": N1, N2
    query_scaling: bool = False  # the module multiplies q by its `scaling` before the kernel (OPT)


NOT_SPLIT = ("its family has no entry in this app's list of the families whose scores it splits")


@dataclass(frozen=True)
class Family:
    """Where one family keeps its parts (paths from the base model; block parts from a block)."""

    layers: str  # the ModuleList of blocks
    attention: str  # the self-attention module in a block (what transformers' attention interface is called from)
    output: str  # the linear layer in a block that reads every head's output side by side: W_O
    final_norm: str | None  # the norm after the last block (None: the family has none)
    rotary: str | None = None  # the rotary position embedding, for RoPE families
    rotate_half: bool = False  # its rotary embedding turns the two halves of each head as LLaMA's rotate_half
    # does (pair i = dimensions i and i + d/2): what attention.models.recorded.rotary undoes (others interleave pairs)
    restartable: bool = False  # a forward pass can start at any block, given the residual stream there as
    # inputs_embeds (nothing is added to the embeddings on the way in: no positions, no scaling)
    shared_layers: bool = False  # one block serves every layer (ALBERT): a layer cannot be edited alone
    linear_heads: bool = False  # pre-norm residual blocks: x_out = x_in + W_O(z) + mlp, nothing normalises W_O(z)
    # on its way in, so each head's write to the residual stream is its own (direct logit attribution)
    qkv: tuple[str, str, str] | None = None  # separate q, k, v projections in a block (composition scores)
    fused_qkv: FusedQKV | None = None  # qkv None: the one projection making them, where its layout is known here
    # (Falcon's and BLOOM's are not: they have no hook_q, hook_k, hook_v)
    writes: Writes | None = None  # what attention and the MLP add to the residual stream (None: not known here,
    # as for OPT, Falcon, BLOOM, DeBERTa-v2: no hook_attn_out, hook_mlp_out)
    write_scale: str | None = None  # a config field the block multiplies what attention and the MLP return by
    # before adding it (Granite's residual_multiplier): W_O and the writes are read scaled
    logit_divisor: str | None = None  # a config field the LM head's output is divided by (Granite's logits_scaling)
    qk: QKFamily | str = NOT_SPLIT  # what q and k read, for "why this key"; or why its scores are not split
    inner: Inner | None = None  # the norms and the MLP's inside, for hook points (None: not known here)


PLAIN_WRITES = Writes(None, "mlp")  # x + W_O(z) + mlp(...): each term added as its module returns it
NORMED_WRITES = Writes("post_attention_layernorm", "post_feedforward_layernorm")  # each normalised, then added
BERT_WRITES = Writes(None, "output.dense", "output.LayerNorm")  # y = N1(x + W_O(z)); x' = N2(y + dense(...))
QKV = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")
LLAMA_QK = QKFamily("input_layernorm", "self_attn.q_proj", "self_attn.k_proj")
GEMMA2_QK = replace(LLAMA_QK, residual="post_attention_norm", post_norms=("post_attention_layernorm",))
BERT_QK = QKFamily(None, "attention.self.query", "attention.self.key", residual="post",
                   post_norms=("attention.output.LayerNorm", "output.LayerNorm"))
GATED = ("mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
LLAMA_INNER = Inner("input_layernorm", "post_attention_layernorm", *GATED, resid_mid="post_attention_layernorm")
GEMMA2_INNER = replace(LLAMA_INNER, ln2="pre_feedforward_layernorm", resid_mid="pre_feedforward_layernorm")
ENCODER_DECODER = "is an encoder-decoder model"
LLAMA_LIKE = Family("layers", "self_attn", "self_attn.o_proj", "norm", "rotary_emb", rotate_half=True,
                    restartable=True, linear_heads=True, qkv=QKV, writes=PLAIN_WRITES, qk=LLAMA_QK,
                    inner=LLAMA_INNER)
# OLMo-2 normalises what attention writes before adding it (and reads the stream without a norm)
POST_NORM = Family("layers", "self_attn", "self_attn.o_proj", "norm", "rotary_emb", rotate_half=True,
                   restartable=True, qkv=QKV, writes=NORMED_WRITES, qk=replace(GEMMA2_QK, norm=None),
                   inner=Inner(None, None, *GATED, resid_mid="mlp"))
# embeddings scaled by √D on the way in: no restart
GEMMA_LIKE = Family("layers", "self_attn", "self_attn.o_proj", "norm", "rotary_emb", rotate_half=True,
                    linear_heads=True, qkv=QKV, writes=PLAIN_WRITES, qk=LLAMA_QK, inner=LLAMA_INNER)
# attention's output is normalised before the residual: not linear per head
GEMMA2_LIKE = Family("layers", "self_attn", "self_attn.o_proj", "norm", "rotary_emb", rotate_half=True,
                     qkv=QKV, writes=NORMED_WRITES, qk=GEMMA2_QK, inner=GEMMA2_INNER)
BERT_LIKE = Family("encoder.layer", "attention.self", "attention.output.dense", None,
                   qkv=("attention.self.query", "attention.self.key", "attention.self.value"),
                   writes=BERT_WRITES, qk=BERT_QK)
DEBERTA_LIKE = replace(BERT_LIKE, qkv=("attention.self.query_proj", "attention.self.key_proj",
                                       "attention.self.value_proj"), writes=None,
                       qk="adds disentangled position-to-content scores to every score")
BART_LIKE = Family("encoder.layers", "self_attn", "self_attn.out_proj", None, qkv=QKV,  # the encoder's self-attention
                   qk=ENCODER_DECODER)

FAMILIES = {  # config.model_type -> Family
    "llama": LLAMA_LIKE, "mistral": LLAMA_LIKE, "mixtral": LLAMA_LIKE, "qwen2": LLAMA_LIKE, "qwen3": LLAMA_LIKE,
    "phi3": replace(LLAMA_LIKE, qkv=None, fused_qkv=FusedQKV("self_attn.qkv_proj", "side by side"),  # q, k, v fused
                    qk=QKFamily("input_layernorm", "self_attn.qkv_proj", None),
                    inner=replace(LLAMA_INNER, mlp_in="mlp.gate_up_proj", mlp_linear="mlp.gate_up_proj",
                                  fused_gate_up=True)),
    "olmo2": POST_NORM, "stablelm": LLAMA_LIKE,
    "gemma": GEMMA_LIKE, "gemma2": GEMMA2_LIKE, "gemma3_text": GEMMA2_LIKE,
    "phi": Family("layers", "self_attn", "self_attn.dense", "final_layernorm", "rotary_emb", linear_heads=True,
                  qkv=QKV, writes=PLAIN_WRITES, qk=LLAMA_QK,
                  inner=Inner("input_layernorm", None, "mlp.fc1", None, "mlp.fc2", None)),  # parallel: one norm
    "gpt2": Family("h", "attn", "attn.c_proj", "ln_f", linear_heads=True,
                   fused_qkv=FusedQKV("attn.c_attn", "side by side"), writes=PLAIN_WRITES,
                   qk=QKFamily("ln_1", "attn.c_attn", None),
                   inner=Inner("ln_1", "ln_2", "mlp.c_fc", None, "mlp.c_proj", "ln_2")),
    "gptj": Family("h", "attn", "attn.out_proj", "ln_f", linear_heads=True,
                   qkv=("attn.q_proj", "attn.k_proj", "attn.v_proj"), writes=PLAIN_WRITES,
                   qk="rotates queries and keys inside its attention with interleaved pairs"),
    "gpt_neox": Family("layers", "attention", "attention.dense", "final_layer_norm", "rotary_emb", linear_heads=True,
                       fused_qkv=FusedQKV("attention.query_key_value", "by head"), writes=PLAIN_WRITES,
                       qk="fuses q, k and v per head in one projection"),
    "opt": Family("decoder.layers", "self_attn", "self_attn.out_proj", "decoder.final_layer_norm", linear_heads=True,
                  qkv=("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
                  qk=QKFamily("self_attn_layer_norm", "self_attn.q_proj", "self_attn.k_proj", query_scaling=True)),
    "falcon": Family("h", "self_attention", "self_attention.dense", "ln_f", "rotary_emb", linear_heads=True,
                     qk="adds ALiBi position biases to its scores (in some checkpoints) and writes attention and MLP "
                        "from one norm"),
    "bloom": Family("h", "self_attention", "self_attention.dense", "ln_f", linear_heads=True,
                    qk="adds ALiBi position biases to every score"),
    "bert": BERT_LIKE, "roberta": BERT_LIKE, "electra": BERT_LIKE, "deberta-v2": DEBERTA_LIKE,
    "distilbert": Family("transformer.layer", "attention", "attention.out_lin", None,
                         qkv=("attention.q_lin", "attention.k_lin", "attention.v_lin"),
                         writes=Writes(None, "ffn", "output_layer_norm"),
                         qk=QKFamily(None, "attention.q_lin", "attention.k_lin", residual="post",
                                     post_norms=("sa_layer_norm", "output_layer_norm"))),
    "albert": Family("encoder.albert_layer_groups.0.albert_layers", "attention", "attention.dense", None,
                     shared_layers=True, qkv=("attention.query", "attention.key", "attention.value"),
                     qk="runs one shared block for every layer"),
    "modernbert": Family("layers", "attn", "attn.Wo", "final_norm", "rotary_emb", rotate_half=True,
                         fused_qkv=FusedQKV("attn.Wqkv", "side by side"), writes=PLAIN_WRITES,
                         qk="fuses q, k and v in one projection read per head"),
    "t5": Family("encoder.block", "layer.0.SelfAttention", "layer.0.SelfAttention.o", "encoder.final_layer_norm",
                 qkv=("layer.0.SelfAttention.q", "layer.0.SelfAttention.k", "layer.0.SelfAttention.v"),
                 qk="adds a learned position bias to every score"),
    "bart": BART_LIKE, "marian": BART_LIKE,
}


@dataclass(frozen=True)
class Anatomy:
    """A network's parts, found through its family's entry. Modules are the network's own (no copies)."""

    model_type: str
    family: Family
    base: torch.nn.Module  # network.base_model
    blocks: tuple[torch.nn.Module, ...]  # L, in order
    outputs: tuple[torch.nn.Module, ...]  # L: each block's W_O (its input is z, every head's output side by side)
    final_norm: torch.nn.Module | None
    rotary: torch.nn.Module | None
    unembed: torch.nn.Module | None  # the language-model head (get_output_embeddings), None for encoders
    write_scale: float = 1.0  # what each block adds is its attention's and MLP's output times this (Granite)
    logit_scale: float = 1.0  # the model's logits are its LM head's output times this (Granite: 1 / logits_scaling)
    inferred: str | None = None  # for a family without an entry: how its parts were found and confirmed
    # (attention.models.forward.anatomy_inferred); None for a family of the table

    def output_weight(self, layer: int):
        """W_O of one layer in x @ W_O form, (H * d, D), a float32 view of the parameter (no copy); times the
        write scale where the block scales what attention returns (then a copy)."""
        linear = self.outputs[layer]
        w = parameter(linear).detach().to(torch.float32).cpu().numpy()
        w = w if type(linear).__name__ == "Conv1D" else w.T  # Conv1D (GPT-2) already stores (in, out)
        return w if self.write_scale == 1.0 else w * np.float32(self.write_scale)


class MissingAnatomy(ValueError):
    """A feature needs a part of the network that this family's entry does not name; the message says which."""


class NoEntry(MissingAnatomy):
    """The family has no entry in FAMILIES: attention.models.forward.anatomy_inferred may read its parts."""


def model_type(network) -> str:
    """The family's name as transformers' config says it ("llama", "bert"), or "unknown"."""
    return str(getattr(getattr(network, "config", None), "model_type", "") or "unknown")


def anatomy(network) -> Anatomy:
    """The parts of `network` (a transformers PreTrainedModel); MissingAnatomy when its family has no entry
    or a part is not where the entry says."""
    kind = model_type(network)
    family = FAMILIES.get(kind)
    if family is None:
        raise NoEntry(f"the model family “{kind}” has no entry in this app's map of model parts, so its "
                      "output projections, layers and norms are not known here (its attention weights are "
                      "still shown exactly)")
    return parts_of(network, family)


def parts_of(network, family: Family) -> Anatomy:
    """The network's parts where `family` says they are; MissingAnatomy for a part that is not there."""
    kind = model_type(network)
    base = getattr(network, "base_model", network)

    def part(root: torch.nn.Module, path: str | None, what: str):
        if path is None:
            return None
        try:
            return root.get_submodule(path)
        except AttributeError:
            raise MissingAnatomy(f"{kind}: its {what} is not at “{path}” as this app's entry for the "
                                 "family says") from None

    blocks = tuple(part(base, family.layers, "list of layers"))
    if family.shared_layers:  # ALBERT: its few blocks are run in turn, num_hidden_layers times in all
        blocks = blocks * (int(getattr(network.config, "num_hidden_layers", len(blocks))) // max(1, len(blocks)))
    outputs = tuple(part(block, family.output, "output projection") for block in blocks)
    unembed = network.get_output_embeddings() if hasattr(network, "get_output_embeddings") else None
    config = network.config
    write_scale = float(getattr(config, family.write_scale)) if family.write_scale else 1.0
    logit_scale = 1.0 / float(getattr(config, family.logit_divisor)) if family.logit_divisor else 1.0
    return Anatomy(model_type=kind, family=family, base=base, blocks=blocks, outputs=outputs,
                   final_norm=part(base, family.final_norm, "final norm"),
                   rotary=part(base, family.rotary, "rotary embedding"), unembed=unembed, write_scale=write_scale,
                   logit_scale=logit_scale)


def has_lm_head(network) -> bool:
    """A causal language model (SmolLM2, GPT-2): it predicts the next token. Encoders (MiniLM) do not."""
    get = getattr(network, "get_output_embeddings", None)
    return get is not None and get() is not None and not getattr(network.config, "is_encoder_decoder", False)


def layer_windows(config, n_layers: int) -> tuple[int | None, ...]:
    """Each layer's sliding window in tokens (a query sees itself and the window - 1 keys before it), None for
    a global layer: from `layer_types` where the config lists kinds of layer (Gemma 2 and 3, Qwen2: only its
    "sliding_attention" layers have one), else a `sliding_window` that every layer shares (Mistral). What a
    page labels and draws; the masks themselves are the model's own (the capture records them)."""
    window = getattr(config, "sliding_window", None)
    window = window if isinstance(window, int) and not isinstance(window, bool) and window > 0 else None
    kinds = getattr(config, "layer_types", None)
    if window is None:
        return (None,) * n_layers
    if kinds is not None and len(kinds) == n_layers:
        return tuple(window if kind in ("sliding_attention", "chunked_attention") else None for kind in kinds)
    if getattr(config, "use_sliding_window", True) is False:
        return (None,) * n_layers
    return (window,) * n_layers


WINDOW_FIELDS = ("sliding_window", "local_attention", "attention_window")  # config fields that bound attention


def attention_window(config) -> int | None:
    """The longest attention window any field of the configuration declares (a sliding window, ModernBERT's
    local attention, Longformer's attention_window), or None: what the guard's probe must be longer than.
    layer_windows says which layers have one, for the pages."""
    sizes = []
    for name in WINDOW_FIELDS:
        value = getattr(config, name, None)
        values = value if isinstance(value, list | tuple) else [value]
        sizes += [int(v) for v in values if isinstance(v, int) and not isinstance(v, bool) and v > 0]
    return max(sizes) if sizes else None
