"""What a weight does not say (issue 74): how much each key token contributes to a query's output, by published
measures beside the attention weight α, from what attend() recorded (q, k, v, W_O, the residual stream).

    value_norms(att, layer)               (H, m)        ||f_h(x_j)||, f_h(x_j) = v_j^h W_O^h (v has its bias)
    weighted_value_norms(att, layer)      (H, n, m)     ||α_ij^h f_h(x_j)|| = α_ij^h ||f_h(x_j)||
                                                        (Kobayashi et al. 2020, "Attention is Not Only a Weight",
                                                        arXiv 2004.10102); attention.models.aggregate's "norm" is
                                                        the norm of the sum over heads
    norm_row(att, layer, token, head)     (m,)          one query's row of either (head None: the sum over heads)
    row_contributions(att, layer, head, token)          one query's α_j, ||f_h(x_j)||, their product and its
                                                        shares, side by side (Inside one head's step)
    first_token_shares(att)               (L, H) twice  each head's share of weight and of weighted norm on the first
                                                        token (the sink), averaged over queries; most_parked says
                                                        where the two part most
    alti(loaded, att)                     Alti          ALTI (Ferrando et al. 2022, arXiv 2203.04212): each layer's
                                                        token-to-token contributions through the residual (and a
                                                        post-norm block's LayerNorm), and their product over layers;
                                                        with each term's norm, Kobayashi et al. 2021's measure

ALTI, as the paper defines it: the attention block's output for token i is a sum over input tokens j of
T_i(x_j) = Σ_h α_ij^h f_h(x_j) + [i = j] x_i (the residual), a post-norm block's LayerNorm decomposed over that
sum (each term centred and scaled by the sum's σ, times γ); c_ij ∝ max(0, ||y_i||₁ − ||y_i − T_i(x_j)||₁) with
y_i = Σ_j T_i(x_j), each row normalised to 1; across layers the rows are composed as attention rollout composes
weights (C^(l) ... C^(1)). Choices: biases (b_O, the LayerNorm's β) are left out of y_i and of every T_i, as
constants no token owns (the LayerNorm's σ, one number per row, cancels when the row is normalised); a pre-norm
block's value path reads its own norm of x_j, so T_i(x_j) stays a function of x_j alone and no norm is decomposed.
Families whose attention output is normalised before the residual (Gemma 2 and 3, OLMo-2) and those without a
known W_O are refused with the reason. Value zeroing (Mohebbi et al. 2023) needs a forward pass per token and
layer: not computed here.

Shapes: L layers, H heads, n queries, m keys (n = m), D model size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attention.models.forward.attention_stack import NOT_CAPTURED
from attention.models.forward.model import LoadedModel
from attention.models.forward.model_attention import ModelAttention
from attention.models.forward.recompute import row_chunks

MAX_TOKENS = 1024  # ALTI's n x n per layer (made a chunk of rows at a time); the weighted norms n x n per head
ALTI_ROWS = 16  # query rows per chunk: (16, n, D) floats at a time


def transformed(att: ModelAttention, layer: int) -> torch.Tensor:
    """(H, m, D): f_h(x_j) = v_j^h W_O^h for every head and key, float32 (KV heads repeated for their queries)."""
    s = att.self_attn
    _transformed_check(att)
    n_heads, n_kv, d = s.n_heads, s.v.shape[1], s.v.shape[-1]
    w_o = torch.from_numpy(np.ascontiguousarray(s.w_o[layer], dtype=np.float32)).reshape(n_heads, d, -1)  # (H, d, D)
    v = torch.from_numpy(np.repeat(s.v[layer], n_heads // n_kv, axis=0).astype(np.float32))  # (H, m, d)
    return torch.einsum("hjd,hdD->hjD", v, w_o)


def value_norms(att: ModelAttention, layer: int) -> np.ndarray:
    """(H, m): ||v_j^h W_O^h||, what head h would hand over from key j with all of its weight: through the d x d
    Gram matrix W_O^h W_O^h^T (||v W||² = v (W W^T) v^T), without making the (H, m, D) vectors."""
    s = att.self_attn
    _transformed_check(att)
    n_heads, n_kv, d = s.n_heads, s.v.shape[1], s.v.shape[-1]
    gram = _gram(s.w_o[layer], n_heads, d)  # (H, d, d)
    v = torch.from_numpy(np.asarray(s.v[layer], dtype=np.float32)).repeat_interleave(n_heads // n_kv, dim=0)
    squared = ((v @ gram) * v).sum(-1)  # (H, m)
    return squared.clamp_min(0).sqrt().numpy()


_GRAMS: dict[int, tuple[np.ndarray, torch.Tensor]] = {}  # id(a layer's W_O array) -> (the array, its heads' Grams)


def _gram(w_o: np.ndarray, n_heads: int, d: int) -> torch.Tensor:
    """(H, d, d): W_O^h W_O^h^T of one layer, made once per W_O array (a model's weights do not change)."""
    kept = _GRAMS.get(id(w_o))
    if kept is not None and kept[0] is w_o:
        return kept[1]
    w = torch.from_numpy(np.ascontiguousarray(w_o, dtype=np.float32)).reshape(n_heads, d, -1)  # (H, d, D)
    gram = w @ w.transpose(1, 2)
    if len(_GRAMS) > 512:  # a few models' layers
        _GRAMS.clear()
    _GRAMS[id(w_o)] = (w_o, gram)
    return gram


def _transformed_check(att: ModelAttention) -> None:
    s = att.self_attn
    if not s.captured:
        raise ValueError(f"value norms need each head's values: {NOT_CAPTURED}")
    if s.w_o is None:
        raise ValueError("this model's output projection W_O is not known (this app has no entry for its family's "
                         "parts), so what each head hands over cannot be measured")


def weighted_value_norms(att: ModelAttention, layer: int) -> np.ndarray:
    """(H, n, m): ||α_ij^h v_j^h W_O^h|| = α_ij^h ||v_j^h W_O^h|| (Kobayashi et al. 2020), every head of one layer."""
    s = att.self_attn
    if s.n_queries > MAX_TOKENS:
        raise ValueError(f"weighted norms are computed for up to {MAX_TOKENS:,} tokens here; this text has "
                         f"{s.n_queries:,}")
    alpha = s.layer_weights(layer).cpu().float().numpy()  # (H, n, m)
    return alpha * value_norms(att, layer)[:, None, :]


def norm_row(att: ModelAttention, layer: int, token: int, head: int | None = None) -> np.ndarray:
    """(m,) one query's weighted norms: α_ij ||f_h(x_j)|| for one head, or (head None) ||Σ_h α_ij^h f_h(x_j)||, what
    the layer as a whole adds to the query from each key (aggregate's "norm", one row of it)."""
    s = att.self_attn
    att.check_head(layer, 0 if head is None else head)
    if head is not None:
        return s.head_weights(layer, head)[token] * value_norms(att, layer)[head]
    keys = s.keys_seen(slice(token, token + 1))
    alpha = s.layer_weights(layer, rows=slice(token, token + 1), keys=keys).cpu().float()  # (H, 1, keys)
    row = np.zeros(s.n_keys, np.float32)
    row[:keys] = torch.linalg.norm(torch.einsum("hij,hjD->jD", alpha, transformed(att, layer)[:, :keys]), dim=-1)
    return row


@dataclass(frozen=True)
class RowContributions:
    """One query's row in one head, each key's weight beside what it hands over: (m,) each, keys in order."""

    weights: np.ndarray  # α_j, the softmax weight
    value_norms: np.ndarray  # ||v_j W_O^h||: what the key would hand over with all of the weight
    weighted: np.ndarray  # α_j ||v_j W_O^h|| = ||α_j v_j W_O^h||, what it hands over (Kobayashi et al. 2020)

    @property
    def shares(self) -> np.ndarray:
        """(m,) each key's share of the weighted norms, to set beside its weight (both sum to 1)."""
        return self.weighted / max(float(self.weighted.sum()), 1e-30)

    @property
    def strongest(self) -> int:
        """The key with the largest weight (the first on a tie)."""
        return int(np.argmax(self.weights))


def row_contributions(att: ModelAttention, layer: int, head: int, token: int) -> RowContributions:
    """The weight and the weighted norm of every key for query `token` in one head (layer, head from 0)."""
    att.check_head(layer, head)
    alpha = np.asarray(att.self_attn.head_weights(layer, head)[token], dtype=np.float64)
    norms = value_norms(att, layer)[head].astype(np.float64)
    return RowContributions(alpha, norms, alpha * norms)


def first_token_shares(att: ModelAttention) -> tuple[np.ndarray, np.ndarray]:
    """((L, H) weight share, (L, H) norm share): for each head, the first token's share of each query's weights
    and of its weighted norms (α_i0 ||f(x_0)|| / Σ_j α_ij ||f(x_j)||), averaged over the queries. Where the two
    part most (a large weight, a small norm) the head parks weight it does not use."""
    s = att.self_attn
    weight, norm = np.zeros((s.n_layers, s.n_heads)), np.zeros((s.n_layers, s.n_heads))
    for layer in range(s.n_layers):
        w = weighted_value_norms(att, layer)  # (H, n, m)
        alpha = s.layer_weights(layer).cpu().float().numpy()
        weight[layer] = alpha[..., 0].mean(-1)
        norm[layer] = (w[..., 0] / np.maximum(w.sum(-1), 1e-30)).mean(-1)
    return weight, norm


def most_parked(weight: np.ndarray, norm: np.ndarray) -> tuple[int, int]:
    """(layer, head), from 0: where first_token_shares' two readings part most, the weight share less the norm
    share (the head that parks the most weight it does not use on the first token)."""
    gap = np.asarray(weight) - np.asarray(norm)
    layer, head = np.unravel_index(int(np.argmax(gap)), gap.shape)
    return int(layer), int(head)


def head_shares(att: ModelAttention, layer: int, head: int, keys: np.ndarray) -> tuple[float, float]:
    """(weight share, norm share) of the keys `keys` ((m,) bool: a head's sinks, the first token) in one head,
    averaged over queries: Σ_{j in keys} α_ij and Σ_{j in keys} α_ij ||f(x_j)|| / Σ_j α_ij ||f(x_j)||."""
    s = att.self_attn
    if s.n_queries > MAX_TOKENS:
        raise ValueError(f"weighted norms are computed for up to {MAX_TOKENS:,} tokens here")
    alpha = s.head_weights(layer, head)  # (n, m)
    w = alpha * value_norms(att, layer)[head][None, :]
    return float(alpha[:, keys].sum(-1).mean()), float((w[:, keys].sum(-1) / np.maximum(w.sum(-1), 1e-30)).mean())


def parked_weight(att: ModelAttention, layer: int, head: int, *, least: float = 0.3) -> tuple[tuple[str, ...], float,
                                                                                           float] | None:
    """Where a head's weight and what it takes part most: (its sink tokens, or the first token where it has none;
    their weight share; their norm share) when the weight share is at least `least` and the norm share under half
    of it (a head parking weight it does not use), else None; None too where the norms cannot be measured."""
    sinks = att.head_sinks(layer, head)
    keys = sinks if sinks.any() else np.arange(len(att.tokens)) == 0
    try:
        weight, norm = head_shares(att, layer, head, keys)
    except ValueError:
        return None
    if weight < least or norm > weight / 2:
        return None
    return tuple(att.tokens[j] for j in np.nonzero(keys)[0]), weight, norm


@dataclass(frozen=True)
class Alti:
    """ALTI's contributions (module docstring): `layers` (L, n, n), row i of layer l how much each input token of
    that layer makes token i's output there (rows sum to 1); `rolled` (L, n, n), the same composed from the
    embeddings up to layer l; `norms` (L, n, n), ||T_i(x_j)||, the size of each token's term through the
    attention, the residual and (post-norm) the LayerNorm: Kobayashi et al. 2021's "ATB + RES + LN" norm
    (arXiv 2109.07152; "ATB + RES" for a pre-norm block, which has no norm after the sum)."""

    layers: np.ndarray
    rolled: np.ndarray
    norms: np.ndarray


def alti(loaded: LoadedModel, att: ModelAttention) -> Alti:
    """ALTI on one result of `loaded` (attend(loaded, text)): each layer's contributions and their composition."""
    parts = loaded.anatomy
    family, kind = parts.family, parts.model_type
    post = not family.linear_heads and not isinstance(family.qk, str) and family.qk.residual == "post"
    if not (family.linear_heads or post):
        raise ValueError(f"ALTI is computed here for blocks that add each head's write to the residual stream as it "
                         f"is (pre-norm) or normalise the sum with a LayerNorm (BERT-like); {kind} normalises "
                         "attention's output before the residual, which is not decomposed here yet")
    n = att.self_attn.n_queries
    if n > MAX_TOKENS:
        raise ValueError(f"ALTI is computed for up to {MAX_TOKENS:,} tokens here; this text has {n:,}")
    layers, norms = [], []
    for layer in range(att.n_layers):
        f = transformed(att, layer)  # (H, n, D)
        x = torch.from_numpy(np.asarray(att.hidden[layer], dtype=np.float32))  # (n, D): the block's input
        norm = parts.blocks[layer].get_submodule(family.qk.post_norms[0]) if post else None
        bias = getattr(parts.outputs[layer], "bias", None) if post else None
        c, sizes = np.zeros((n, n), np.float32), np.zeros((n, n), np.float32)
        for rows in row_chunks(n, ALTI_ROWS):  # a chunk of queries at a time: (r, keys, D), not (n, n, D)
            keys = att.self_attn.keys_seen(rows)  # a causal query reads no later key
            alpha = att.self_attn.layer_weights(layer, rows=rows, keys=keys).cpu().float()  # (H, r, keys)
            terms = torch.einsum("hij,hjD->ijD", alpha, f[:, :keys])  # (r, keys, D): Σ_h α f_h(x_j)
            own = torch.arange(rows.start, rows.stop)
            terms[own - rows.start, own] += x[own]  # the residual: token i keeps its own x_i
            if post:  # LN(Σ_j T_i(x_j) + b_O): each term centred and scaled by the LayerNorm's σ, times γ
                total = terms.sum(1) + (0 if bias is None else bias.detach().float().cpu())  # what it normalises
                sigma = torch.sqrt(total.var(-1, unbiased=False) + norm.eps)  # (r,)
                terms = norm.weight.detach().float().cpu() * (terms - terms.mean(-1, keepdim=True)) / sigma[:, None,
                                                                                                              None]
            sizes[rows, :keys] = torch.linalg.norm(terms, dim=-1).numpy()  # Kobayashi et al. 2021's norms
            y = terms.sum(1, keepdim=True)  # (r, 1, D)
            part = torch.clamp(y.abs().sum(-1) - (y - terms).abs().sum(-1), min=0)  # (r, keys)
            c[rows, :keys] = (part / part.sum(-1, keepdim=True).clamp_min(1e-30)).numpy()
        layers.append(c)
        norms.append(sizes)
    layers = np.stack(layers)
    rolled, acc = np.empty_like(layers), np.eye(n)
    for layer in range(len(layers)):
        acc = layers[layer] @ acc
        rolled[layer] = acc
    return Alti(layers, rolled, np.stack(norms))
