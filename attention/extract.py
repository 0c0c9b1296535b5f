"""Attention of a real model on one text: every layer and head, the tokens, and each head's math.

`run_attention(loaded, text)` runs one forward pass with `output_attentions=True` while
attention.capture records Q, K, V of every layer. The model's own weights are kept as `weights`;
`head_trace(layer, head)` recomputes one head from the captured Q, K, V with the same
`scaled_dot_product_attention` the toy pages use, so the real math can be shown step by step.

Shapes (L layers, H query heads, H_kv key/value heads, n tokens, d head size, D model size):
    weights (L, H, n, n)   hidden (L + 1, n, D)   q (L, H, n, d)   k, v (L, H_kv, n, d)
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

import numpy as np
import torch

from attention.capture import recording
from attention.core import scaled_dot_product_attention
from attention.trace import AttentionTrace

MAX_TEXT_CHARS = 20_000  # longer text is cut before tokenizing (the token limit cuts again, with a notice)


@dataclass(frozen=True)
class Stack:
    """One stack of attention layers of one kind: encoder self, decoder self or cross-attention."""

    weights: np.ndarray  # (L, H, n, m) float32, the model's own output_attentions
    q: np.ndarray  # (L, H, n, d)
    k: np.ndarray  # (L, H_kv, m, d)
    v: np.ndarray  # (L, H_kv, m, d)
    mask: np.ndarray | None  # (n, m) bool, True = may attend; None = every key visible
    scale: float  # the model's score scaling (1/sqrt(d) for most; 1.0 for T5)
    bias: bool  # the model adds a position bias to the scores (T5): head_trace cannot rebuild it

    def __post_init__(self):
        _read_only(self)


@dataclass(frozen=True)
class ModelAttention:
    model: str  # registry key or hub id
    kind: str  # "encoder", "decoder", "encoder-decoder"
    tokens: tuple[str, ...]  # display strings, sub-word markers removed
    token_ids: np.ndarray  # (n,)
    special: np.ndarray  # (n,) bool: [CLS], [SEP], <s>, BOS...
    self_attn: Stack  # the (encoder's) self-attention
    hidden: np.ndarray  # (L + 1, n, D) float32: embeddings, then the output of each layer
    truncated: bool  # the text was longer than the model's limit
    n_input_tokens: int  # tokens before truncation
    self_modules: tuple[str, ...] = ()  # names of the self-attention modules, layer by layer
    target_tokens: tuple[str, ...] | None = None  # decoder side of an encoder-decoder model
    target_ids: np.ndarray | None = None  # (t,) decoder input ids, starting with the decoder start token
    decoder_attn: Stack | None = None  # (L, H, t, t)
    cross_attn: Stack | None = None  # (L, H, t, n): target queries attend to source keys

    def __post_init__(self):
        _read_only(self)  # results are shared between sessions by the app's cache: nobody may write to them

    @property
    def weights(self) -> np.ndarray:
        """(L, H, n, n): the self-attention weights of every layer and head."""
        return self.self_attn.weights

    @property
    def n_layers(self) -> int:
        return self.weights.shape[0]

    @property
    def n_heads(self) -> int:
        return self.weights.shape[1]

    def stack(self, name: str = "self") -> Stack:
        """The "self", "decoder" or "cross" attention stack; ValueError if this model has none."""
        s = {"self": self.self_attn, "decoder": self.decoder_attn, "cross": self.cross_attn}[name]
        if s is None:
            raise ValueError(f"this model has no {name} attention")
        return s

    def head_trace(self, layer: int, head: int, *, stack: str = "self") -> AttentionTrace:
        """One head's attention rebuilt from the captured Q, K, V: scores, scaling, mask, softmax, output.

        Query head h reads key/value head h // (H / H_kv) (grouped-query attention shares KV heads).
        Shapes: -> AttentionTrace with q (n, d), k (m, d), v (m, d), weights (n, m).
        """
        s = self.stack(stack)
        n_layers, n_heads = s.weights.shape[:2]
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise ValueError(f"layer {layer}, head {head} is outside {n_layers} layers x {n_heads} heads")
        if s.bias:
            raise ValueError("this model adds a learned position bias to the scores (as T5 does); "
                             "its weights are shown, but a head cannot be rebuilt from Q and K alone")
        kv = head // (n_heads // s.k.shape[1])
        return scaled_dot_product_attention(s.q[layer, head], s.k[layer, kv], s.v[layer, kv], mask=s.mask,
                                            scale=s.scale)


def display_tokens(tokenizer, ids) -> tuple[tuple[str, ...], np.ndarray]:
    """Readable token strings (no `##`, `Ġ`, `▁`) and a special-token flag per token.

    Shapes: ids (n,) -> n strings, (n,) bool.
    """
    ids = [int(i) for i in ids]
    special_ids = set(getattr(tokenizer, "all_special_ids", []) or [])
    pieces = tokenizer.convert_ids_to_tokens(ids)
    out = []
    for i, piece in zip(ids, pieces, strict=True):
        piece = "" if piece is None else str(piece)
        if i in special_ids:
            out.append(piece)
            continue
        text = piece[2:] if piece.startswith("##") else tokenizer.convert_tokens_to_string([piece])
        text = text.replace("▁", " ").replace("\n", "⏎").strip()
        out.append(text or "␣")
    return tuple(out), np.array([i in special_ids for i in ids], dtype=bool)


def is_punctuation(token: str) -> bool:
    return bool(token) and all(unicodedata.category(c).startswith("P") for c in token)


def run_attention(loaded, text: str, *, target: str | None = None) -> ModelAttention:
    """Tokenize, run the model once with capture on, and collect everything the pages show."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("Type a sentence first: the text is empty.")
    text = text[:MAX_TEXT_CHARS]
    spec, model, tok = loaded.spec, loaded.model, loaded.tokenizer
    enc = tok(text, return_tensors="pt", truncation=True, max_length=spec.max_tokens)
    ids = enc["input_ids"]
    n_input = ids.shape[1]
    if n_input >= spec.max_tokens:  # maybe cut: count the whole text once to say by how much
        n_input = len(tok(text, add_special_tokens=True, truncation=False)["input_ids"])
    if ids.shape[1] == 0:
        raise ValueError("The tokenizer produced no tokens for this text.")
    names = {id(m): name for name, m in model.named_modules()}
    kwargs = dict(output_attentions=True, output_hidden_states=True, return_dict=True)
    target_ids = None
    with loaded.lock, torch.inference_mode():
        if spec.kind == "encoder-decoder":
            target_ids = _target_ids(model, tok, enc, target)
            kwargs["decoder_input_ids"] = target_ids
        with recording(names) as calls:
            out = model(input_ids=ids, attention_mask=enc.get("attention_mask"), **kwargs)
    tokens, special = display_tokens(tok, ids[0])
    self_calls = [c for c in calls if _kind(c.module) == "self"]
    if spec.kind == "encoder-decoder":
        self_w, hidden = out.encoder_attentions, out.encoder_hidden_states
    else:
        self_w, hidden = out.attentions, out.hidden_states
    if not self_w:
        raise ValueError(f"{spec.name} returned no attention weights (its attention kernel does not expose them).")
    result = dict(
        model=spec.name, kind=spec.kind, tokens=tokens, token_ids=ids[0].numpy(), special=special,
        self_attn=_stack(self_w, self_calls), hidden=_np(torch.stack(hidden)[:, 0]),
        truncated=n_input > ids.shape[1], n_input_tokens=n_input,
        self_modules=tuple(c.module for c in self_calls),
    )
    if target_ids is not None:
        result["target_tokens"] = display_tokens(tok, target_ids[0])[0]
        result["target_ids"] = target_ids[0].numpy()
        result["decoder_attn"] = _stack(out.decoder_attentions, [c for c in calls if _kind(c.module) == "decoder"])
        result["cross_attn"] = _stack(out.cross_attentions, [c for c in calls if _kind(c.module) == "cross"])
    return ModelAttention(**result)


def _target_ids(model, tok, enc, target: str | None) -> torch.Tensor:
    """Decoder input: the given target text, else the model's own greedy output (a translation)."""
    start_id = next((x for x in (getattr(model.config, "decoder_start_token_id", None),
                                 getattr(model.generation_config, "decoder_start_token_id", None),
                                 getattr(model.config, "pad_token_id", None)) if x is not None), 0)
    start = torch.tensor([[start_id]])
    if target:
        t = tok(text_target=target, return_tensors="pt", truncation=True, max_length=128)["input_ids"]
        return torch.cat([start, t], dim=1)
    # Only ids and mask: a tokenizer's token_type_ids would make generate() refuse the call.
    return model.generate(input_ids=enc["input_ids"], attention_mask=enc.get("attention_mask"), max_new_tokens=64,
                          do_sample=False, num_beams=1)


def _kind(module_name: str) -> str:
    lower = module_name.lower()
    if "encoder_attn" in lower or "crossattention" in lower or "enc_dec" in lower or "encdec" in lower:
        return "cross"
    if "decoder" in lower:
        return "decoder"
    return "self"


def _stack(weights, calls) -> Stack:
    w = _np(torch.stack([a[0] for a in weights]))  # L x (1, H, n, m) -> (L, H, n, m)
    if len(calls) != w.shape[0]:
        raise RuntimeError(f"captured {len(calls)} attention calls for {w.shape[0]} layers")
    first = calls[0]
    return Stack(weights=w, q=np.stack([c.q for c in calls]), k=np.stack([c.k for c in calls]),
                 v=np.stack([c.v for c in calls]), mask=None if first.mask is None or first.mask.all() else first.mask,
                 scale=first.scale, bias=any(c.bias for c in calls))


def output_projections(model, module_names) -> np.ndarray | None:
    """W_O of each attention module in x @ W_O form, (L, H * d, D), or None if one is not found.

    A model constant: LoadedModel keeps it once instead of every cached ModelAttention holding a copy.
    """
    modules = dict(model.named_modules())
    mats = []
    for module in module_names:
        parent = module.rsplit(".", 1)[0] if module.endswith(".self") else module
        lin = None
        for name in (f"{module}.o_proj", f"{module}.out_proj", f"{module}.out_lin", f"{module}.c_proj",
                     f"{module}.o", f"{parent}.output.dense"):
            if name in modules and hasattr(modules[name], "weight"):
                lin = modules[name]
                break
        if lin is None:
            return None
        w = lin.weight.detach().to(torch.float32).numpy()
        mats.append(w if type(lin).__name__ == "Conv1D" else w.T)  # Conv1D (GPT-2) already stores (in, out)
    return np.stack(mats)


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(torch.float32).cpu().numpy()


def _read_only(record) -> None:
    for value in vars(record).values():
        if isinstance(value, np.ndarray):
            value.flags.writeable = False
