"""One kind of attention across every layer of a forward pass: q, k, v, masks, and each head's weights from them.

A stack stores q, k and v, which grow as n, not the weights, which grow as n²: any head's weights are
recomputed from q and k when a view needs them (attention.models.forward.recompute), with everything the
family's kernel applies to the scores: the scale, a soft cap (Gemma-2) and each layer's own mask (a
sliding window differs from a full layer's). Two kinds of family keep the model's own weights instead
(`own_weights`, L x H x n x m floats, so their inputs are kept short): those whose scores carry a
learned position bias (T5), and those whose attention never goes through transformers' attention
interface (BLOOM, Falcon, GPT-J, DeBERTa-v2: their q, k and v are not captured, `q` is None).
What is computed from a stack once (the survey, the sink rule's counts) is kept beside it in `derived`.

Shapes (L layers, H query heads, H_kv key/value heads, n query tokens, m key tokens, d head size,
D model size): q (L, H, n, d)   k, v (L, H_kv, m, d)   masks L x (n, m)   w_o L x (H * d, D)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import torch

from attention.models.forward.device_arrays import part
from attention.models.forward.head_survey import HeadSurvey
from attention.models.forward.recompute import chunk_rows, layer_scores, layer_weights, row_chunks

NOT_CAPTURED = ("this model's attention does not go through transformers' attention interface, so its q, k and "
                "v were not captured: its weights are the model's own, but a head cannot be rebuilt step by step "
                "and its values cannot be read")


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
        read_only(self)
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

    def majority_share(self, layer: int) -> np.ndarray:
        """(H, m) for each head of one layer, the share of query rows in which key j holds over half the
        weight: the sink rule's counts (attention.models.forward.sinks). Counted once per layer, a chunk of
        rows at a time, unless the survey's pass counted it (keep_majority_share); kept in derived."""
        if layer not in self.derived.majority_share:
            count = np.zeros((self.n_heads, self.n_keys))
            for rows in row_chunks(self.n_queries, chunk_rows(self.n_heads, self.n_keys)):
                keys = self.keys_seen(rows)
                count[:, :keys] += (self.layer_weights(layer, rows=rows, keys=keys) > 0.5).sum(1).cpu().numpy()
            self.keep_majority_share(layer, count / self.n_queries)
        return self.derived.majority_share[layer]

    def keep_majority_share(self, layer: int, share: np.ndarray) -> None:
        """Keep a layer's majority shares, counted elsewhere (the survey's pass), for majority_share."""
        share = np.array(share, dtype=np.float32)
        share.flags.writeable = False
        self.derived.majority_share[layer] = share

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


def read_only(record) -> None:
    """Make every numpy array among a record's fields (and in its tuples) read-only: results are shared."""
    for value in vars(record).values():
        arrays = value if isinstance(value, tuple) else (value,)
        for a in arrays:
            if isinstance(a, np.ndarray):
                a.flags.writeable = False
