"""What one forward pass of a real model recorded: tokens, hidden states, and its attention stacks.

A model has one to three attention stacks, each named by `stack`:
    "self"     the (encoder's) self-attention: queries and keys are the input tokens
    "decoder"  an encoder-decoder model's decoder self-attention over the target tokens
    "cross"    the decoder's queries (target tokens) reading the encoder's keys (input tokens)

Shapes (L layers, H query heads, H_kv key/value heads, n query tokens, m key tokens, d head size,
D model size):
    AttentionStack: weights (L, H, n, m)   q (L, H, n, d)   k, v (L, H_kv, m, d)   w_o L x (H * d, D)
    ModelAttention: hidden (L + 1, n, D)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention.core import scaled_dot_product_attention
from attention.trace import AttentionTrace

STACKS = ("self", "decoder", "cross")


@dataclass(frozen=True)
class AttentionStack:
    """Every layer of one kind of attention, with what each head computed."""

    weights: np.ndarray  # (L, H, n, m) float32, the model's own output_attentions
    q: np.ndarray  # (L, H, n, d) queries as the kernel saw them (after rotary embeddings)
    k: np.ndarray  # (L, H_kv, m, d) keys (grouped-query models share each among H / H_kv query heads)
    v: np.ndarray  # (L, H_kv, m, d) values
    mask: np.ndarray | None  # (n, m) bool, True = may attend; None = every key visible
    scale: float  # the model's score scaling (1/sqrt(d) for most; 1.0 for T5)
    bias: bool  # the model adds a position bias to the scores (T5): head_trace cannot rebuild it
    modules: tuple[str, ...]  # the attention modules' names, layer by layer
    w_o: tuple[np.ndarray, ...] | None  # per layer (H * d, D): the output projection in x @ W_O form, a
    # read-only view of the model's own parameters (no copy); None when it was not found

    def __post_init__(self):
        _read_only(self)

    @property
    def n_layers(self) -> int:
        return self.weights.shape[0]

    @property
    def n_heads(self) -> int:
        return self.weights.shape[1]

    def kv_head(self, head: int) -> int:
        """The key/value head that query head `head` reads (grouped-query attention shares them)."""
        return head // (self.n_heads // self.k.shape[1])


@dataclass(frozen=True)
class ModelAttention:
    """A model's attention on one text. Shared read-only between sessions by the app's cache."""

    model_name: str  # registry key or hub id (attention.models.registry)
    kind: str  # "encoder", "decoder", "encoder-decoder"
    tokens: tuple[str, ...]  # display strings, sub-word markers removed
    token_ids: np.ndarray  # (n,)
    special: np.ndarray  # (n,) bool: [CLS], [SEP], <s>, BOS...
    self_attn: AttentionStack  # the (encoder's) self-attention
    hidden: np.ndarray  # (L + 1, n, D) float32: embeddings, then the output of each layer
    truncated: bool  # the text was longer than the model's limit
    n_input_tokens: int  # tokens before truncation
    target_tokens: tuple[str, ...] | None = None  # decoder side of an encoder-decoder model
    target_ids: np.ndarray | None = None  # (t,) decoder input ids, starting with the decoder start token
    decoder_attn: AttentionStack | None = None  # (L, H, t, t)
    cross_attn: AttentionStack | None = None  # (L, H, t, n): target queries attend to source keys

    def __post_init__(self):
        _read_only(self)  # results are shared between sessions by the app's cache: nobody may write to them

    @property
    def weights(self) -> np.ndarray:
        """(L, H, n, n): the self-attention weights of every layer and head."""
        return self.self_attn.weights

    @property
    def n_layers(self) -> int:
        return self.self_attn.n_layers

    @property
    def n_heads(self) -> int:
        return self.self_attn.n_heads

    def attention_stack(self, stack: str = "self") -> AttentionStack:
        """The "self", "decoder" or "cross" attention stack; ValueError if this model has none."""
        if stack not in STACKS:
            raise ValueError(f"unknown attention stack {stack!r}; choose one of {', '.join(STACKS)}")
        found = {"self": self.self_attn, "decoder": self.decoder_attn, "cross": self.cross_attn}[stack]
        if found is None:
            raise ValueError(f"this model has no {stack} attention")
        return found

    def query_tokens(self, stack: str = "self") -> tuple[str, ...]:
        """The tokens on the query side of a stack: the input, or the target for "decoder" and "cross"."""
        return self.tokens if stack == "self" else self.target_tokens

    def key_tokens(self, stack: str = "self") -> tuple[str, ...]:
        """The tokens on the key side: the target for "decoder", the input otherwise."""
        return self.target_tokens if stack == "decoder" else self.tokens

    def check_head(self, layer: int, head: int, stack: str = "self") -> None:
        """ValueError naming the model's size when (layer, head) is outside it (0-based)."""
        s = self.attention_stack(stack)
        if not (0 <= layer < s.n_layers and 0 <= head < s.n_heads):
            raise ValueError(f"layer {layer + 1}, head {head + 1} is outside {s.n_layers} layers x {s.n_heads} heads")

    def head_trace(self, layer: int, head: int, *, stack: str = "self") -> AttentionTrace:
        """One head's attention rebuilt from the captured Q, K, V: scores, scaling, mask, softmax, output.

        Query head h reads key/value head h // (H / H_kv) (grouped-query attention shares KV heads).
        Shapes: -> AttentionTrace with q (n, d), k (m, d), v (m, d), weights (n, m).
        """
        self.check_head(layer, head, stack)
        s = self.attention_stack(stack)
        if s.bias:
            raise ValueError("this model adds a learned position bias to the scores (as T5 does); "
                             "its weights are shown, but a head cannot be rebuilt from Q and K alone")
        kv = s.kv_head(head)
        return scaled_dot_product_attention(s.q[layer, head], s.k[layer, kv], s.v[layer, kv], mask=s.mask,
                                            scale=s.scale)

    def rebuild_gap(self, layer: int, head: int, *, stack: str = "self") -> float:
        """max |rebuilt weights - the model's own weights| for one head: how exactly head_trace matches."""
        rebuilt = self.head_trace(layer, head, stack=stack).weights
        return float(np.abs(rebuilt - self.attention_stack(stack).weights[layer, head]).max())


def _read_only(record) -> None:
    for value in vars(record).values():
        arrays = value if isinstance(value, tuple) else (value,)
        for a in arrays:
            if isinstance(a, np.ndarray):
                a.flags.writeable = False
