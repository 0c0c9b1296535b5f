"""Running a loaded model: the one place a forward pass happens and a model's constants are read.

`attend(loaded, text)` tokenizes and runs one forward pass while attention.models.capture records Q, K
and V of every layer. The pass uses the fused SDPA kernel, which never builds the (heads, n, n) weights,
so memory grows as n and SmolLM2 reads thousands of tokens; weights are recomputed from q and k when a
view needs them. Models that add a learned position bias to their scores (T5) run a second, eager pass
and keep their own output_attentions. `own_attention(loaded, att, layer)` runs one layer eagerly and
returns the model's own weights for it: the check the pages show. The output projections W_O are read
here too, as views of the model's parameters, so a page never reaches back into the network.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from attention.models.capture import CapturedCall, recording
from attention.models.model_attention import AttentionStack, ModelAttention
from attention.models.recompute import work_threads
from attention.models.registry import ModelSpec
from attention.models.tokens import display_tokens
from attention.models.words import encoding_words

MAX_TEXT_CHARS = 60_000  # longer text is cut before tokenizing (the token limit cuts again, with a notice)
Progress = Callable[[float, str], None]  # (fraction done, what is happening)


@dataclass(frozen=True)
class LoadedModel:
    """A model ready to attend (attention.models.loading builds it). Shared between sessions: `lock`
    serialises forward passes."""

    spec: ModelSpec
    network: torch.nn.Module  # transformers PreTrainedModel in eval mode, attention routed through CAPTURE
    tokenizer: object  # its transformers tokenizer
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def attend(self, text: str, *, target: str | None = None, progress: Progress | None = None) -> ModelAttention:
        """Run the model on `text` (and, for an encoder-decoder model, `target`): see attend()."""
        return attend(self, text, target=target, progress=progress)

    @property
    def device(self) -> torch.device:
        """Where the network's parameters are (attention.models.recompute.compute_device put them)."""
        first = next(self.network.parameters(), None)
        return torch.device("cpu") if first is None else first.device


@dataclass(frozen=True)
class _Inputs:
    text: str  # the text as read (cut at MAX_TEXT_CHARS)
    ids: torch.Tensor  # (1, n) input ids, truncated to the model's limit
    mask: torch.Tensor | None  # (1, n) the tokenizer's attention mask
    n_input: int  # tokens before truncation
    target_ids: torch.Tensor | None  # (1, t) decoder input of an encoder-decoder model
    word_ids: np.ndarray | None  # (n,) the tokenizer's word of each token (attention.models.words)
    offsets: np.ndarray | None  # (n, 2) character spans


def attend(loaded: LoadedModel, text: str, *, target: str | None = None,
           progress: Progress | None = None) -> ModelAttention:
    """Tokenize, run the model once with capture on, and collect everything the pages show.

    `progress(fraction, message)` is told after every attention layer (long inputs take seconds).
    """
    spec, network, tok = loaded.spec, loaded.network, loaded.tokenizer
    names = {id(m): name for name, m in network.named_modules()}
    expected = _attention_calls(network)
    say = progress or (lambda fraction, message: None)

    def on_call(done: int) -> None:
        say(min(1.0, done / expected), f"Running {spec.name}: attention layer {min(done, expected)} of {expected}")

    with loaded.lock, torch.inference_mode():
        inputs = _inputs(loaded, text, target)
        with work_threads(inputs.ids.shape[1]), recording(names, kernel="sdpa", on_call=on_call) as calls:
            out = _forward(network, inputs, output_attentions=False)
        if not _calls_of(calls, "self"):
            raise ValueError(f"{spec.name} returned no attention weights (its attention kernel does not expose "
                             "them to ours).")
        own = None
        if any(c.bias for c in calls):  # scores carry a learned bias: keep the model's own weights
            with recording(names, kernel="eager") as calls:
                own = _forward(network, inputs, output_attentions=True)
    states = list(out.encoder_hidden_states if spec.architecture == "encoder-decoder" else out.hidden_states)
    next_logits = _logits(out.logits[0, -1]) if inputs.target_ids is None and has_lm_head(network) else None
    del out  # now `states` alone holds the model's hidden states, and _hidden_states frees them as it copies
    hidden = _hidden_states(states)
    by_stack = {stack: _calls_of(calls, stack) for stack in ("self", "decoder", "cross")}
    calls.clear()  # each stack's list now holds its calls alone, so copying them can free them
    tokens, special = display_tokens(tok, inputs.ids[0])
    modules = dict(network.named_modules())
    encoder_decoder = spec.architecture == "encoder-decoder"
    self_own = None if own is None else (own.encoder_attentions if encoder_decoder else own.attentions)
    result = dict(
        model_name=spec.name, text=inputs.text, target=target if inputs.target_ids is not None else None,
        architecture=spec.architecture, tokens=tokens, token_ids=inputs.ids[0].cpu().numpy(), special=special,
        self_attn=_attention_stack(by_stack["self"], modules, self_own), hidden=hidden,
        truncated=inputs.n_input > inputs.ids.shape[1], n_input_tokens=inputs.n_input, next_logits=next_logits,
        word_ids=inputs.word_ids, offsets=inputs.offsets,
    )
    if inputs.target_ids is not None:
        result["target_tokens"] = display_tokens(tok, inputs.target_ids[0])[0]
        result["target_ids"] = inputs.target_ids[0].cpu().numpy()
        for stack in ("decoder", "cross"):
            own_w = None if own is None else getattr(own, f"{stack}_attentions")
            result[f"{stack}_attn"] = _attention_stack(by_stack[stack], modules, own_w)
    return ModelAttention(**result)


def own_attention(loaded: LoadedModel, att: ModelAttention, layer: int, *, stack: str = "self") -> np.ndarray:
    """The model's own weights of one layer of `att`: a forward pass over the same text in which that
    layer runs transformers' eager attention (the others the fused kernel) and its weights are kept.
    What recomputed weights are checked against, at any length (one layer is H x n x m floats).

    Shapes: -> (H, n, m) float32.
    """
    module = att.attention_stack(stack).modules[layer]
    names = {id(m): name for name, m in loaded.network.named_modules()}
    with loaded.lock, torch.inference_mode():
        inputs = _inputs(loaded, att.text, att.target)
        with work_threads(inputs.ids.shape[1]), recording(names, kernel="sdpa", eager_for={module}) as calls:
            _forward(loaded.network, inputs, output_attentions=False, hidden_states=False)
    return next(c.weights for c in calls if c.module == module)


def _inputs(loaded: LoadedModel, text: str, target: str | None) -> _Inputs:
    if not isinstance(text, str) or not text.strip():
        raise ValueError("Type a sentence first: the text is empty.")
    text = text[:MAX_TEXT_CHARS]
    spec, tok = loaded.spec, loaded.tokenizer
    limit = spec.token_limit(loaded.device)
    enc = tok(text, return_tensors="pt", truncation=True, max_length=limit,
              return_offsets_mapping=bool(getattr(tok, "is_fast", False)))
    ids = enc["input_ids"]
    n_input = ids.shape[1]
    if n_input >= limit:  # maybe cut: count the whole text once to say by how much
        n_input = len(tok(text, add_special_tokens=True, truncation=False)["input_ids"])
    if ids.shape[1] == 0:
        raise ValueError("The tokenizer produced no tokens for this text.")
    mask = enc.get("attention_mask")
    target_ids = _target_ids(loaded.network, tok, enc, target) if spec.architecture == "encoder-decoder" else None
    device = loaded.device
    word_ids, offsets = encoding_words(enc, ids.shape[1])
    return _Inputs(text=text, ids=ids.to(device), mask=None if mask is None else mask.to(device), n_input=n_input,
                   target_ids=None if target_ids is None else target_ids.to(device), word_ids=word_ids,
                   offsets=offsets)


def _forward(network, inputs: _Inputs, *, output_attentions: bool, hidden_states: bool = True):
    kwargs = dict(output_attentions=output_attentions, output_hidden_states=hidden_states, return_dict=True)
    if inputs.target_ids is not None:
        kwargs["decoder_input_ids"] = inputs.target_ids
    elif has_lm_head(network):
        kwargs["logits_to_keep"] = 1  # the next token's logits only: (1, 1, V), not (1, n, V) (0.8 GB at 4,096)
    return network(input_ids=inputs.ids, attention_mask=inputs.mask, **kwargs)


def rotary_base(loaded: LoadedModel) -> float | None:
    """The base of the model's rotary positions (θ_i = base^(-2i/d)), or None when it has none (BERT adds
    learned positions to its embeddings instead). Only plain RoPE counts: scaled variants return None."""
    config = loaded.network.config
    params = getattr(config, "rope_parameters", None) or {}
    if not getattr(loaded.network, "model", None) or not hasattr(loaded.network.model, "rotary_emb"):
        return None
    if params.get("rope_type", "default") != "default":
        return None
    base = params.get("rope_theta", getattr(config, "rope_theta", None))
    return None if base is None else float(base)


def has_lm_head(network) -> bool:
    """A causal language model (SmolLM2, GPT-2): it predicts the next token. Encoders (MiniLM) do not."""
    get = getattr(network, "get_output_embeddings", None)
    return get is not None and get() is not None and not getattr(network.config, "is_encoder_decoder", False)


def _attention_calls(network) -> int:
    """How many attention calls one forward pass makes (for progress): the layers, and for an
    encoder-decoder model its decoder's self- and cross-attention too."""
    config = getattr(network, "config", None)
    n = getattr(config, "num_hidden_layers", None) or getattr(config, "num_layers", None) or 1
    if getattr(config, "is_encoder_decoder", False):
        n += 2 * (getattr(config, "num_decoder_layers", None) or getattr(config, "decoder_layers", None) or n)
    return max(1, int(n))


def output_projection_module(modules: dict, module_name: str) -> torch.nn.Module | None:
    """The linear layer that reads an attention module's concatenated heads (its input is z, every head's
    output side by side, (B, n, H * d)), or None. `modules` is the network's named_modules(); the layer's
    name depends on the architecture."""
    parent = module_name.rsplit(".", 1)[0] if module_name.endswith(".self") else module_name
    for name in (f"{module_name}.o_proj", f"{module_name}.out_proj", f"{module_name}.out_lin",
                 f"{module_name}.c_proj", f"{module_name}.o", f"{parent}.output.dense"):
        linear = modules.get(name)
        if linear is not None and hasattr(linear, "weight"):
            return linear
    return None


def output_projection(modules: dict, module_name: str) -> np.ndarray | None:
    """W_O of one attention module in x @ W_O form, (H * d, D): a view of the parameter, or None."""
    linear = output_projection_module(modules, module_name)
    if linear is None:
        return None
    w = linear.weight.detach().to(torch.float32).numpy()  # float32 weights: shares memory, no copy
    return w if type(linear).__name__ == "Conv1D" else w.T  # Conv1D (GPT-2) already stores (in, out)


def _target_ids(network, tok, enc, target: str | None) -> torch.Tensor:
    """Decoder input: the given target text, else the model's own greedy output (a translation)."""
    start_id = next((x for x in (getattr(network.config, "decoder_start_token_id", None),
                                 getattr(network.generation_config, "decoder_start_token_id", None),
                                 getattr(network.config, "pad_token_id", None)) if x is not None), 0)
    start = torch.tensor([[start_id]])
    if target:
        t = tok(text_target=target, return_tensors="pt", truncation=True, max_length=128)["input_ids"]
        return torch.cat([start, t], dim=1)
    # Only ids and mask: a tokenizer's token_type_ids would make generate() refuse the call.
    return network.generate(input_ids=enc["input_ids"], attention_mask=enc.get("attention_mask"), max_new_tokens=64,
                            do_sample=False, num_beams=1)


def _calls_of(calls: list[CapturedCall], stack: str) -> list[CapturedCall]:
    """The captured calls of one attention stack, told apart by their module names."""
    def stack_of(module_name: str) -> str:
        lower = module_name.lower()
        if "encoder_attn" in lower or "crossattention" in lower or "enc_dec" in lower or "encdec" in lower:
            return "cross"
        return "decoder" if "decoder" in lower else "self"

    return [c for c in calls if stack_of(c.module) == stack]


def _attention_stack(calls: list[CapturedCall], modules: dict, own_weights=None) -> AttentionStack:
    """One stack from its captured calls; `own_weights` (the model's output_attentions) only when the
    scores carry a bias that q and k cannot reproduce.

    q, k, v are copied layer by layer into arrays made once, and each call's own copy is dropped as soon
    as it is taken: at 4,096 tokens they are ~0.5 GB, and stacking them at the end would hold it twice.
    """
    first = calls[0]
    modules_of = tuple(c.module for c in calls)
    w_o = tuple(output_projection(modules, name) for name in modules_of)
    q = np.empty((len(calls), *first.q.shape), np.float32)
    k = np.empty((len(calls), *first.k.shape), np.float32)
    v = np.empty((len(calls), *first.v.shape), np.float32)
    for i, call in enumerate(calls):
        q[i], k[i], v[i] = call.q, call.k, call.v
        calls[i] = replace(call, q=None, k=None, v=None)
    mask = None if first.mask is None or first.mask.all() else first.mask
    return AttentionStack(
        q=q, k=k, v=v, mask=mask,
        causal=mask is not None and mask.shape[0] == mask.shape[1] and np.array_equal(
            mask, np.tri(mask.shape[0], dtype=bool)),
        scale=first.scale, bias=any(c.bias for c in calls), modules=modules_of,
        w_o=None if any(x is None for x in w_o) else w_o,
        own_weights=None if own_weights is None else _np(torch.stack([a[0] for a in own_weights])),
    )


def _hidden_states(states: list) -> np.ndarray:
    """(L + 1, n, D) float32 from the model's per-layer hidden states, each dropped from `states` once
    copied: at 4,096 tokens they are ~0.3 GB, and the model's copy and ours need not coexist."""
    out = np.empty((len(states), *states[0].shape[1:]), np.float32)
    for i in range(len(states)):
        out[i] = _np(states[i][0])
        states[i] = None
    return out


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(torch.float32).cpu().numpy()


def _logits(t: torch.Tensor) -> np.ndarray:
    """Logits at the model's own precision (float64 stays float64: a logit difference is read from them),
    half precisions as float32."""
    return t.detach().to(torch.float64 if t.dtype == torch.float64 else torch.float32).cpu().numpy()
