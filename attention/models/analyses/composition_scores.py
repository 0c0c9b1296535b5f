"""How heads compose, from their weights alone (Elhage et al. 2021, "A mathematical framework for
transformer circuits"): how much of what an earlier head writes a later head reads, through its query (Q),
its key (K) or its value (V).

With row vectors (x W), head h writes x W_OV^h, W_OV^h = W_V^h W_O^h (D x D), and scores queries against
keys with W_QK^h = W_Q^h W_K^h^T (D x D). For a writer h1 and a later reader h2:

    Q-composition   ||W_OV^h1 W_QK^h2||  / (||W_OV^h1|| ||W_QK^h2||)     what h1 writes shapes h2's queries
    K-composition   ||W_QK^h2 W_OV^h1ᵀ|| / (||W_QK^h2|| ||W_OV^h1||)     ... h2's keys (an induction head
                                                                          reads a previous-token head so)
    V-composition   ||W_OV^h1 W_OV^h2||  / (||W_OV^h1|| ||W_OV^h2||)     ... what h2 moves

(Frobenius norms.) Each product is D x D, but of rank d: its norm comes from d x d matrices,
||A1 A2 B1 B2||² = tr((A1ᵀA1)(A2 B1)(B2 B2ᵀ)(A2 B1)ᵀ), so every pair costs O(d² D), not O(D³). Weights are
the projections as they are: norms folded into them and rotary positions (which make W_QK depend on the
distance) are left out, as in the paper.

Shapes: L layers, H heads, d head size, D model size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attention.models.forward.anatomy import parameter
from attention.models.forward.capabilities import require
from attention.models.forward.model import LoadedModel

KINDS = ("Q", "K", "V")


@dataclass(frozen=True)
class Composition:
    """How much one reader head composes with every head of the earlier layers."""

    layer: int  # the reader, 0-based
    head: int
    q: np.ndarray  # (layer, H) Q-composition with each earlier head
    k: np.ndarray  # (layer, H)
    v: np.ndarray  # (layer, H)

    def strongest(self, kind: str, k: int = 5) -> list[tuple[int, int, float]]:
        """The k earlier (layer, head, score) with the largest `kind` ("Q", "K" or "V") composition."""
        scores = {"Q": self.q, "K": self.k, "V": self.v}[kind]
        order = np.argsort(-scores, axis=None, kind="stable")[:k]
        h = scores.shape[1]
        return [(int(i // h), int(i % h), float(scores.flat[i])) for i in order]


def head_matrices(loaded: LoadedModel, layer: int) -> dict[str, torch.Tensor]:
    """One layer's per-head factors, float64, x @ W form: W_Q, W_K, W_V (H, D, d) (grouped-query heads
    repeated to every query head) and W_O (H, d, D). ValueError when the family fuses q, k and v."""
    require(loaded, "composition")
    parts = loaded.anatomy
    block = parts.blocks[layer]
    try:
        q, k, v = (parameter(block.get_submodule(path)).detach().double().cpu().T
                   for path in parts.family.qkv)  # (D, out)
    except AttributeError:
        raise ValueError(f"{loaded.spec.name} ({parts.model_type}): its q, k, v projections are not at "
                         f"{', '.join(parts.family.qkv)} as this app's entry for its family says.") from None
    w_o = torch.from_numpy(parts.output_weight(layer)).double()  # (H * d, D)
    H = _n_heads(loaded)
    d = w_o.shape[0] // H
    group = H // (k.shape[1] // d)

    def per_head(w, heads):  # (D, heads * d) -> (H, D, d)
        w = w.reshape(w.shape[0], heads, d).permute(1, 0, 2)
        return w.repeat_interleave(H // heads, dim=0)

    return {"W_Q": per_head(q, H), "W_K": per_head(k, H // group), "W_V": per_head(v, H // group),
            "W_O": w_o.reshape(H, d, -1)}


def _n_heads(loaded: LoadedModel) -> int:
    config = loaded.network.config
    for name in ("num_attention_heads", "n_head", "n_heads", "num_heads"):
        if getattr(config, name, None):
            return int(getattr(config, name))
    raise ValueError(f"{loaded.spec.name}'s configuration does not say how many heads it has")


def _frobenius_of_products(a1, a2, b1, b2) -> torch.Tensor:
    """||a1 a2 b1 b2||_F for every pair (writer w, reader r): a1 (W, D, d), a2 (W, d, D), b1 (R, D, d),
    b2 (R, d, D) -> (W, R), through d x d matrices only (module docstring)."""
    g_a = a1.transpose(1, 2) @ a1  # (W, d, d)
    g_b = b2 @ b2.transpose(1, 2)  # (R, d, d)
    m = torch.einsum("wdD,rDe->wrde", a2, b1)  # (W, R, d, d)
    inner = torch.einsum("wab,wrbc,rce,wrae->wr", g_a, m, g_b, m)  # tr(G_a M G_b M^T)
    return inner.clamp(min=0).sqrt()


def _frobenius(f1, f2) -> torch.Tensor:
    """||f1 f2||_F per head: f1 (H, D, d), f2 (H, d, D) -> (H,)."""
    return torch.einsum("hab,hba->h", f1.transpose(1, 2) @ f1, f2 @ f2.transpose(1, 2)).clamp(min=0).sqrt()


def composition(loaded: LoadedModel, layer: int, head: int) -> Composition:
    """Q-, K- and V-composition of the reader (layer, head) with every head of every earlier layer."""
    reader = head_matrices(loaded, layer)
    r = {name: m[head:head + 1] for name, m in reader.items()}
    qk_norm = _frobenius(r["W_Q"], r["W_K"].transpose(1, 2))  # ||W_Q W_K^T||
    ov_r_norm = _frobenius(r["W_V"], r["W_O"])
    out = {kind: np.zeros((layer, reader["W_Q"].shape[0])) for kind in KINDS}
    for earlier in range(layer):
        w = head_matrices(loaded, earlier)
        ov_norm = _frobenius(w["W_V"], w["W_O"])  # (H,)
        q = _frobenius_of_products(w["W_V"], w["W_O"], r["W_Q"], r["W_K"].transpose(1, 2))[:, 0]
        # W_QK^r W_OV^wᵀ = W_Q^r (W_K^rᵀ W_O^wᵀ) W_V^wᵀ: writers and reader swap sides
        k = _frobenius_of_products(r["W_Q"], r["W_K"].transpose(1, 2), w["W_O"].transpose(1, 2),
                                   w["W_V"].transpose(1, 2))[0]
        v = _frobenius_of_products(w["W_V"], w["W_O"], r["W_V"], r["W_O"])[:, 0]
        out["Q"][earlier] = (q / (ov_norm * qk_norm)).numpy()
        out["K"][earlier] = (k / (ov_norm * qk_norm)).numpy()
        out["V"][earlier] = (v / (ov_norm * ov_r_norm)).numpy()
    return Composition(layer=layer, head=head, q=out["Q"], k=out["K"], v=out["V"])
