"""What one forward pass of a real model recorded: tokens, hidden states, and its attention stacks.

A model has one to three attention stacks (attention.models.forward.attention_stack), each named by `stack`:
    "self"     the (encoder's) self-attention: queries and keys are the input tokens
    "decoder"  an encoder-decoder model's decoder self-attention over the target tokens
    "cross"    the decoder's queries (target tokens) reading the encoder's keys (input tokens)

Shapes (L layers, H heads, n tokens, m keys, D model size): hidden (L + 1, n, D); a layer's sinks (H, m).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from attention.models.forward.attention_stack import NOT_CAPTURED, AttentionStack, read_only
from attention.models.forward.device_arrays import DeviceArray
from attention.models.forward.sinks import sink_candidates, sink_rule
from attention.models.forward.tokens import spaced_labels
from attention.naming import head_words
from attention.toy.core import scaled_dot_product_attention
from attention.toy.trace import AttentionTrace

if TYPE_CHECKING:  # images imports torch's image stack only where an image model is used
    from attention.models.forward.images import ImagePatches

STACKS = ("self", "decoder", "cross")
_SERIALS = itertools.count(1)  # each result made in this process gets the next


@dataclass(frozen=True)
class ModelAttention:
    """A model's attention on one text. Shared read-only between sessions by the app's cache."""

    model_name: str  # registry key or hub id (attention.models.forward.registry)
    text: str  # the text the model read (before its token limit cut it; see truncated)
    architecture: str  # "encoder-only", "decoder-only" or "encoder-decoder" (attention.models.forward.registry)
    tokens: tuple[str, ...]  # display strings, sub-word markers removed
    token_ids: np.ndarray  # (n,)
    special: np.ndarray  # (n,) bool: [CLS], [SEP], <s>, BOS...
    self_attn: AttentionStack  # the (encoder's) self-attention
    hidden: np.ndarray  # (L + 1, n, D) float32: embeddings, then the output of each layer
    truncated: bool  # the text was longer than the model's limit
    n_input_tokens: int  # tokens before truncation
    next_logits: np.ndarray | None = None  # (V,) a causal LM's logits for the token after the text, else None
    decoder_text: str | None = None  # what an encoder-decoder model's decoder read (None: its own translation)
    target_tokens: tuple[str, ...] | None = None  # decoder side of an encoder-decoder model
    target_ids: np.ndarray | None = None  # (t,) decoder input ids, starting with the decoder start token
    decoder_attn: AttentionStack | None = None  # (L, H, t, t)
    cross_attn: AttentionStack | None = None  # (L, H, t, n): target queries attend to source keys
    word_ids: np.ndarray | None = None  # (n,) the tokenizer's word index per token, -1 for none (special);
    # None when the tokenizer cannot say (attention.models.recorded.words)
    offsets: np.ndarray | None = None  # (n, 2) each token's character span in `text` ((0, 0) for special tokens)
    windows: tuple[int | None, ...] | None = None  # per self-attention layer: its sliding window in tokens (a
    # local layer: a query sees itself and window - 1 keys before it), None for a global layer; None: not known
    image: ImagePatches | None = None  # an image model's input: which token is which patch, the pixels it saw
    serial: int = field(default_factory=lambda: next(_SERIALS), compare=False, repr=False)  # this result's number
    # in this process: what the app's caches know it by (the same text read in two precisions gives two)

    def __post_init__(self):
        read_only(self)  # results are shared between sessions by the app's cache: nobody may write to them

    def window(self, layer: int) -> int | None:
        """The sliding window of self-attention layer `layer` in tokens, None for a global layer (or unknown)."""
        return None if self.windows is None else self.windows[layer]

    def layer_kind(self, layer: int) -> str:
        """How a page names layer `layer` where the model has local and global layers ("local, window 512",
        "global"); "" where every layer is of one kind."""
        if self.windows is None or len(set(self.windows)) < 2:
            return ""
        window = self.windows[layer]
        return "global" if window is None else f"local, window {window:,}"

    def windows_note(self) -> str:
        """What the local layers' windows mean for this text, where the model has local and global layers: ""
        otherwise."""
        local = [w for w in (self.windows or ()) if w is not None]
        if not local or len(set(self.windows)) < 2:
            return ""
        n, window = len(self.tokens), min(local)
        if n <= window:
            return (f"All {n:,} tokens fit in the local layers' window of {window:,}: here they see every earlier "
                    "token, as the global layers do. From a longer text on they see only the last "
                    f"{window:,}, and their heatmaps draw the window's edge.")
        return (f"This text has {n:,} tokens: past token {window:,}, a local layer sees only the last {window:,} "
                "(the dashed line on its heatmap); a global layer sees every earlier token.")

    @property
    def weights(self) -> np.ndarray:
        """(L, H, n, n): the self-attention weights of every layer and head (materialised on first use), float32
        recomputed from q and k (attend() says how to get a 16-bit model's own)."""
        return self.self_attn.weights

    @property
    def n_layers(self) -> int:
        return self.self_attn.n_layers

    @property
    def n_heads(self) -> int:
        return self.self_attn.n_heads

    @property
    def nbytes(self) -> int:
        """Bytes this result stores: the stacks, the hidden states and the token arrays."""
        stacks = (self.self_attn, self.decoder_attn, self.cross_attn)
        arrays = (self.hidden, self.token_ids, self.special, self.target_ids, self.next_logits)
        if self.image is not None:
            arrays += (self.image.pixels, self.image.pixel_values)
        return sum(s.nbytes for s in stacks if s is not None) + sum(a.nbytes for a in arrays if a is not None)

    @property
    def device_nbytes(self) -> int:
        """Bytes of `nbytes` that a GPU's pass kept there (attention.models.forward.device_arrays); 0 on a CPU."""
        return sum(_device_bytes(s) for s in (self.self_attn, self.decoder_attn, self.cross_attn)
                   if s is not None) + _device_bytes(self)

    @property
    def host_nbytes(self) -> int:
        """Bytes of `nbytes` in the process's memory: all of it but device_nbytes."""
        return self.nbytes - self.device_nbytes

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
            raise ValueError(f"{head_words(layer, head)} is outside {s.n_layers} layers x {s.n_heads} heads")

    def head_weights(self, layer: int, head: int, *, stack: str = "self") -> np.ndarray:
        """One head's weights, recomputed from q and k. Shapes: -> (n, m) float32."""
        self.check_head(layer, head, stack)
        return self.attention_stack(stack).head_weights(layer, head)

    def rebuild_gap(self, layer: int, head: int, own_layer: np.ndarray, *, stack: str = "self") -> float:
        """AttentionStack.rebuild_gap of one head: how exactly q and k give the model's weights. `own_layer`
        (H, n, m) comes from attention.models.forward.running.own_attention."""
        self.check_head(layer, head, stack)
        return self.attention_stack(stack).rebuild_gap(layer, own_layer, head=head)

    def layer_sinks(self, layer: int) -> np.ndarray:
        """(H, n) bool: each head's sinks in one layer of the self-attention (attention.models.forward.sinks)."""
        return sink_rule(sink_candidates(self.special), self.self_attn.majority_share(layer))

    def head_sinks(self, layer: int, head: int | None = None) -> np.ndarray:
        """(n,) bool: one head's sinks, or (head None) those of any head of the layer, what a view over all
        the layer's heads (the mean, the max) removes."""
        sinks = self.layer_sinks(layer)
        return sinks.any(0) if head is None else sinks[head]

    def head_trace(self, layer: int, head: int, *, stack: str = "self", query: int | None = None) -> AttentionTrace:
        """One head's attention rebuilt from the captured Q, K, V with the toy kernel (float64): scores,
        scaling, mask, softmax, output. With `query`, only that query row (cheap at any length).

        Shapes: -> AttentionTrace with q (n, d) or (1, d), k (m, d), v (m, d), weights (n, m) or (1, m).
        """
        self.check_head(layer, head, stack)
        s = self.attention_stack(stack)
        if not s.captured:
            raise ValueError(NOT_CAPTURED)
        if s.bias:
            raise ValueError("this model adds a learned position bias to the scores (as T5 does); "
                             "its weights are shown, but a head cannot be rebuilt from Q and K alone")
        rows = slice(None) if query is None else slice(query, query + 1)
        kv = s.kv_head(head)
        mask = None if s.masks[layer] is None else s.masks[layer][rows]
        return scaled_dot_product_attention(s.q[layer, head, rows], s.k[layer, kv], s.v[layer, kv], mask=mask,
                                            scale=s.scale_of(layer), softcap=s.softcap_of(layer))


def _device_bytes(record) -> int:
    """Bytes of the DeviceArrays among a record's fields (a mask shared by layers counts once)."""
    found = {}
    for value in vars(record).values():
        for a in value if isinstance(value, tuple) else (value,):
            if isinstance(a, DeviceArray):
                found[id(a)] = a.nbytes
    return sum(found.values())


def shown_tokens(att: ModelAttention) -> tuple[str, ...]:
    """Each token of `att`'s text as every page labels it (attention.models.forward.tokens.spaced_labels):
    " bank" as "␣bank", "bank" as it is. A result without offsets (a slow tokenizer, ids given) shows its
    tokens as they are. Pickers, axes, titles, tables and the analyses' labels read this, never att.tokens bare."""
    return tuple(att.tokens) if att.offsets is None else spaced_labels(att.tokens, att.text, att.offsets)
