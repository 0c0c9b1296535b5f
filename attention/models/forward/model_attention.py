"""What one forward pass of a real model recorded: tokens, hidden states, and its attention stacks.

A model has one to three attention stacks, each named by `stack`:
    "self"     the (encoder's) self-attention: queries and keys are the input tokens
    "decoder"  an encoder-decoder model's decoder self-attention over the target tokens
    "cross"    the decoder's queries (target tokens) reading the encoder's keys (input tokens)

A stack stores q, k and v, which grow as n, not the weights, which grow as n²: any head's weights are
recomputed from q and k when a view needs them (attention.models.forward.recompute), with everything the
family's kernel applies to the scores: the scale, a soft cap (Gemma-2) and each layer's own mask (a
sliding window differs from a full layer's). Two kinds of family keep the model's own weights instead
(`own_weights`, L x H x n x m floats, so their inputs are kept short): those whose scores carry a
learned position bias (T5), and those whose attention never goes through transformers' attention
interface (BLOOM, Falcon, GPT-J, DeBERTa-v2: their q, k and v are not captured, `q` is None).

Shapes (L layers, H query heads, H_kv key/value heads, n query tokens, m key tokens, d head size,
D model size):
    AttentionStack: q (L, H, n, d)   k, v (L, H_kv, m, d)   masks L x (n, m)   w_o L x (H * d, D)
    ModelAttention: hidden (L + 1, n, D)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
import torch

from attention.models.forward.device_arrays import part
from attention.models.forward.recompute import layer_scores, layer_weights
from attention.toy.core import scaled_dot_product_attention
from attention.toy.trace import AttentionTrace

if TYPE_CHECKING:  # the survey imports this module
    from attention.models.forward.head_survey import HeadSurvey
    from attention.models.forward.images import ImagePatches

STACKS = ("self", "decoder", "cross")


@dataclass
class Derived:
    """What is computed from a stack once and kept with it (the stack itself is frozen; this is its cache)."""

    survey: HeadSurvey | None = None  # every head's summaries (attention.models.forward.head_survey): set by attend()
    # when our kernel ran the pass, else by the first survey() of the result
    majority_share: dict[int, np.ndarray] = field(default_factory=dict)  # layer -> (H, m) share of query rows in
    # which key j holds over half the weight (attention.models.forward.sinks): the sink rule's counts

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.survey, *self.majority_share.values()) if a is not None)


@dataclass(frozen=True)
class AttentionStack:
    """Every layer of one kind of attention, with what each head computed."""

    q: np.ndarray | None  # (L, H, n, d) queries as the kernel saw them (after rotary embeddings); None when
    # the family's attention could not be captured (own_weights then)
    k: np.ndarray | None  # (L, H_kv, m, d) keys (grouped-query models share each among H / H_kv query heads)
    v: np.ndarray | None  # (L, H_kv, m, d) values
    masks: tuple[np.ndarray | None, ...]  # per layer (n, m) bool, True = may attend, None = every key visible;
    # layers given the same mask share one array
    exactly_causal: tuple[bool, ...]  # per layer: the mask is exactly causal (query i sees keys 0..i)
    causal: bool  # no layer lets a query see a later key (causal, sliding windows): later keys can be skipped
    scale: float  # the model's score scaling (1/sqrt(d) for most; 1.0 for T5; Gemma's query_pre_attn_scalar): the
    # first layer's, and every layer's unless layer_scales says otherwise (read a layer's with scale_of)
    bias: bool  # the model adds a position bias to the scores (T5): weights cannot come from q and k alone
    modules: tuple[str, ...]  # the attention modules' names, layer by layer
    w_o: tuple[np.ndarray, ...] | None  # per layer (H * d, D): the output projection in x @ W_O form, a
    # read-only view of the model's own parameters (no copy); None when it was not found
    own_weights: np.ndarray | None = None  # (L, H, n, m) the model's output_attentions, kept when `bias` or
    # when q is None
    softcap: float | None = None  # scores -> softcap * tanh(scores / softcap) before the mask (Gemma-2): the
    # first layer's, and every layer's unless layer_softcaps says otherwise (read a layer's with softcap_of)
    layer_scales: tuple[float, ...] | None = None  # per layer, where layers scale their scores differently
    # (GPT-2's scale_attn_by_inverse_layer_idx divides layer l's by l + 1); None: every layer uses `scale`
    layer_softcaps: tuple[float | None, ...] | None = None  # per layer, where layers cap differently
    derived: Derived = field(default_factory=Derived, repr=False, compare=False)  # computed once, kept with it

    def __post_init__(self):
        _read_only(self)
        if len(self.masks) != len(self.modules) or len(self.exactly_causal) != len(self.modules):
            raise ValueError("one mask and one causal flag per layer")

    def scale_of(self, layer: int) -> float:
        """The score scaling of one layer."""
        return self.scale if self.layer_scales is None else self.layer_scales[layer]

    def softcap_of(self, layer: int) -> float | None:
        """The soft cap of one layer's scores (None: none)."""
        return self.softcap if self.layer_softcaps is None else self.layer_softcaps[layer]

    @property
    def captured(self) -> bool:
        """q, k and v were captured: a head can be rebuilt step by step, its values read."""
        return self.q is not None

    @property
    def n_layers(self) -> int:
        return len(self.modules)

    @property
    def n_heads(self) -> int:
        return (self.q if self.captured else self.own_weights).shape[1]

    @property
    def n_queries(self) -> int:
        return (self.q if self.captured else self.own_weights).shape[2]

    @property
    def n_keys(self) -> int:
        return self.k.shape[2] if self.captured else self.own_weights.shape[3]

    def mask_of(self, layer: int) -> np.ndarray | None:
        """(n, m) bool: what each query of `layer` may see (None: every key)."""
        return self.masks[layer]

    def kv_head(self, head: int) -> int:
        """The key/value head that query head `head` reads (grouped-query attention shares them)."""
        if not self.captured:
            raise ValueError(NOT_CAPTURED)
        return head // (self.n_heads // self.k.shape[1])

    def layer_weights(self, layer: int, *, rows: slice = slice(None), keys: int | None = None, heads=None):
        """Weights of some query rows of one layer (the first `keys` keys; `heads` picks query heads),
        recomputed from q and k, or read from own_weights when the scores carry a bias.
        Shapes: -> torch (h, r, keys) float32."""
        if self.own_weights is not None:
            w = self.own_weights[layer] if heads is None else self.own_weights[layer][list(heads)]
            return torch.from_numpy(np.ascontiguousarray(w[:, rows, :keys]))
        return layer_weights(part(self.q, layer), part(self.k, layer), scale=self.scale_of(layer),
                             mask=self.masks[layer], causal=self.exactly_causal[layer], rows=rows, keys=keys,
                             heads=heads, softcap=self.softcap_of(layer))

    def layer_scores(self, layer: int, *, rows: slice = slice(None), keys: int | None = None, heads=None,
                     out: torch.Tensor | None = None):
        """Scaled, capped, masked scores of some query rows of one layer (attention.models.forward.recompute.
        layer_scores, written into `out` when given); with own_weights, their logarithm, which softmax maps
        back to the same weights. Shapes: -> torch (h, r, keys) float32."""
        if self.own_weights is not None:
            w = self.layer_weights(layer, rows=rows, keys=keys, heads=heads).float()
            return torch.log(w).clamp(min=torch.finfo(torch.float32).min)
        return layer_scores(part(self.q, layer), part(self.k, layer), scale=self.scale_of(layer),
                            mask=self.masks[layer], causal=self.exactly_causal[layer], rows=rows, keys=keys,
                            heads=heads, softcap=self.softcap_of(layer), out=out)

    def keys_seen(self, rows: slice) -> int:
        """How many leading keys a chunk of query rows can see: all, or for a causal mask up to its last row."""
        return rows.indices(self.n_queries)[1] if self.causal else self.n_keys

    def head_weights(self, layer: int, head: int, rows: slice = slice(None)) -> np.ndarray:
        """One head's weights (some query rows of it). Shapes: -> (r, m) float32."""
        return self.layer_weights(layer, rows=rows, heads=[head])[0].cpu().numpy()

    def query_rows(self, token: int) -> np.ndarray:
        """What one query token attends to in every layer and head. Shapes: -> (L, H, m) float32."""
        rows = slice(token, token + 1)
        return np.stack([self.layer_weights(layer, rows=rows)[:, 0].cpu().numpy() for layer in range(self.n_layers)])

    @cached_property
    def weights(self) -> np.ndarray:
        """(L, H, n, m) float32: every head's weights, materialised on first access (L * H * n * m floats:
        fine for notebooks and short inputs; the pages' views never need all of them at once)."""
        if self.own_weights is not None:
            return self.own_weights
        w = np.stack([self.layer_weights(layer).cpu().numpy() for layer in range(self.n_layers)])
        w.flags.writeable = False
        return w

    def rebuild_gap(self, layer: int, own_layer: np.ndarray, *, head: int | None = None) -> float:
        """max |weights recomputed from q and k - the model's own| over one layer (or one head of it): the gap
        the guard holds every model to and the pages state. Shapes: own_layer (H, n, m) float."""
        rebuilt = self.layer_weights(layer).cpu().numpy() if head is None else self.head_weights(layer, head)
        return float(np.abs(rebuilt - (own_layer if head is None else own_layer[head])).max())

    @property
    def nbytes(self) -> int:
        """Bytes this stack stores (q, k, v, masks, own weights, what was derived; W_O is the model's and not
        counted; a mask shared by layers counts once)."""
        masks = {id(m): m for m in self.masks if m is not None}
        arrays = (self.q, self.k, self.v, self.own_weights, *masks.values())
        return sum(a.nbytes for a in arrays if a is not None) + self.derived.nbytes


NOT_CAPTURED = ("this model's attention does not go through transformers' attention interface, so its q, k and "
                "v were not captured: its weights are the model's own, but a head cannot be rebuilt step by step "
                "and its values cannot be read")


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

    def __post_init__(self):
        _read_only(self)  # results are shared between sessions by the app's cache: nobody may write to them

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
        """(L, H, n, n): the self-attention weights of every layer and head (materialised on first use)."""
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
            raise ValueError(f"layer {layer + 1}, head {head + 1} is outside {s.n_layers} layers x {s.n_heads} heads")

    def head_weights(self, layer: int, head: int, *, stack: str = "self") -> np.ndarray:
        """One head's weights, recomputed from q and k. Shapes: -> (n, m) float32."""
        self.check_head(layer, head, stack)
        return self.attention_stack(stack).head_weights(layer, head)

    def rebuild_gap(self, layer: int, head: int, own_layer: np.ndarray, *, stack: str = "self") -> float:
        """AttentionStack.rebuild_gap of one head: how exactly q and k give the model's weights. `own_layer`
        (H, n, m) comes from attention.models.forward.running.own_attention."""
        self.check_head(layer, head, stack)
        return self.attention_stack(stack).rebuild_gap(layer, own_layer, head=head)

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
    from attention.models.forward.device_arrays import DeviceArray

    found = {}
    for value in vars(record).values():
        for a in value if isinstance(value, tuple) else (value,):
            if isinstance(a, DeviceArray):
                found[id(a)] = a.nbytes
    return sum(found.values())


def _read_only(record) -> None:
    for value in vars(record).values():
        arrays = value if isinstance(value, tuple) else (value,)
        for a in arrays:
            if isinstance(a, np.ndarray):
                a.flags.writeable = False
