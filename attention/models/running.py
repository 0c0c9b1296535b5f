"""Running a loaded model: the one place a forward pass happens and a model's constants are read.

`attend(loaded, text)` tokenizes, runs one forward pass with `output_attentions=True` while
attention.models.capture records Q, K, V of every layer, and returns a ModelAttention. The model's own
weights are kept as `weights`; each head can be rebuilt from the captured Q, K, V (`head_trace`). The
output projections W_O are read here too, as views of the model's parameters, so a page never reaches
back into the network.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np
import torch

from attention.models.capture import CapturedCall, recording
from attention.models.model_attention import AttentionStack, ModelAttention
from attention.models.registry import ModelSpec
from attention.models.tokens import display_tokens

MAX_TEXT_CHARS = 20_000  # longer text is cut before tokenizing (the token limit cuts again, with a notice)


@dataclass(frozen=True)
class LoadedModel:
    """A model ready to attend (attention.models.loading builds it). Shared between sessions: `lock`
    serialises forward passes."""

    spec: ModelSpec
    network: torch.nn.Module  # transformers PreTrainedModel in eval mode, attention routed through CAPTURE
    tokenizer: object  # its transformers tokenizer
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def attend(self, text: str, *, target: str | None = None) -> ModelAttention:
        """Run the model on `text` (and, for an encoder-decoder model, `target`): see attend()."""
        return attend(self, text, target=target)


def attend(loaded: LoadedModel, text: str, *, target: str | None = None) -> ModelAttention:
    """Tokenize, run the model once with capture on, and collect everything the pages show."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("Type a sentence first: the text is empty.")
    text = text[:MAX_TEXT_CHARS]
    spec, network, tok = loaded.spec, loaded.network, loaded.tokenizer
    enc = tok(text, return_tensors="pt", truncation=True, max_length=spec.max_tokens)
    ids = enc["input_ids"]
    n_input = ids.shape[1]
    if n_input >= spec.max_tokens:  # maybe cut: count the whole text once to say by how much
        n_input = len(tok(text, add_special_tokens=True, truncation=False)["input_ids"])
    if ids.shape[1] == 0:
        raise ValueError("The tokenizer produced no tokens for this text.")
    names = {id(m): name for name, m in network.named_modules()}
    kwargs = dict(output_attentions=True, output_hidden_states=True, return_dict=True)
    target_ids = None
    with loaded.lock, torch.inference_mode():
        if spec.kind == "encoder-decoder":
            target_ids = _target_ids(network, tok, enc, target)
            kwargs["decoder_input_ids"] = target_ids
        with recording(names) as calls:
            out = network(input_ids=ids, attention_mask=enc.get("attention_mask"), **kwargs)
    tokens, special = display_tokens(tok, ids[0])
    if spec.kind == "encoder-decoder":
        self_w, hidden = out.encoder_attentions, out.encoder_hidden_states
    else:
        self_w, hidden = out.attentions, out.hidden_states
    if not self_w:
        raise ValueError(f"{spec.name} returned no attention weights (its attention kernel does not expose them).")
    modules = dict(network.named_modules())
    result = dict(
        model_name=spec.name, kind=spec.kind, tokens=tokens, token_ids=ids[0].numpy(), special=special,
        self_attn=_attention_stack(self_w, _calls_of(calls, "self"), modules), hidden=_np(torch.stack(hidden)[:, 0]),
        truncated=n_input > ids.shape[1], n_input_tokens=n_input,
    )
    if target_ids is not None:
        result["target_tokens"] = display_tokens(tok, target_ids[0])[0]
        result["target_ids"] = target_ids[0].numpy()
        result["decoder_attn"] = _attention_stack(out.decoder_attentions, _calls_of(calls, "decoder"), modules)
        result["cross_attn"] = _attention_stack(out.cross_attentions, _calls_of(calls, "cross"), modules)
    return ModelAttention(**result)


def output_projection(modules: dict, module_name: str) -> np.ndarray | None:
    """W_O of one attention module in x @ W_O form, (H * d, D): a view of the parameter, or None.

    `modules` is the network's named_modules(); the projection sits beside the attention module under a
    name that depends on the architecture.
    """
    parent = module_name.rsplit(".", 1)[0] if module_name.endswith(".self") else module_name
    for name in (f"{module_name}.o_proj", f"{module_name}.out_proj", f"{module_name}.out_lin",
                 f"{module_name}.c_proj", f"{module_name}.o", f"{parent}.output.dense"):
        linear = modules.get(name)
        if linear is not None and hasattr(linear, "weight"):
            w = linear.weight.detach().to(torch.float32).numpy()  # float32 weights: shares memory, no copy
            return w if type(linear).__name__ == "Conv1D" else w.T  # Conv1D (GPT-2) already stores (in, out)
    return None


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


def _attention_stack(weights, calls: list[CapturedCall], modules: dict) -> AttentionStack:
    w = _np(torch.stack([a[0] for a in weights]))  # L x (1, H, n, m) -> (L, H, n, m)
    if len(calls) != w.shape[0]:
        raise RuntimeError(f"captured {len(calls)} attention calls for {w.shape[0]} layers")
    first = calls[0]
    w_o = tuple(output_projection(modules, c.module) for c in calls)
    return AttentionStack(
        weights=w, q=np.stack([c.q for c in calls]), k=np.stack([c.k for c in calls]),
        v=np.stack([c.v for c in calls]), mask=None if first.mask is None or first.mask.all() else first.mask,
        scale=first.scale, bias=any(c.bias for c in calls), modules=tuple(c.module for c in calls),
        w_o=None if any(x is None for x in w_o) else w_o,
    )


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(torch.float32).cpu().numpy()
