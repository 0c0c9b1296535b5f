"""Reads of an image model's result: where a patch looks, every head at once, attention rollout, high-norm tokens.

An image model's result is a ModelAttention whose `image` (attention.models.forward.images.ImagePatches) says
which token is which patch; these functions lay a head's numbers out as the image is, so a page or a notebook
draws them over the picture (attention.figures: picture, heads_over_image, norms_chart).

    patch_looks(att, layer, head, token)   one query token's weights: over the patches (rows, cols) and the prefix
    heads_looking(att, layer, token)       the same for every head of a layer: (H, rows, cols)
    attention_rollout(att)                 Abnar and Zuidema's attention rollout (aggregations.rollout)
    token_norms(att)                       every token's hidden-state norm after each layer: (L + 1, n)
    high_norm_tokens(att, layer)           tokens whose norm stands out there (Darcet et al. 2024)

Attention rollout (Abnar and Zuidema 2020, "Quantifying attention flow in transformers") follows attention
down through the layers: each layer's weights are averaged over its heads, the residual connection is
added as an identity (Â = (1 - r) A + r I, r = ROLLOUT_RESIDUAL) and the rows made to sum to 1 again, and
the layers multiplied, R_l = Â_l ... Â_1 (the Model heads page offers it as one of its aggregations). Its
caveats, which the page states: it assumes the residual stream carries exactly half of each layer's input,
treats heads as equal, ignores the values (a head may attend to a token and write nothing from it), the MLPs
and the norms, and says nothing about any one class.

Shapes: L layers, H heads, n tokens, rows x cols patches.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention.models.forward.images import ImagePatches
from attention.models.forward.model_attention import ModelAttention
from attention.models.recorded.aggregations import ROLLOUT_RESIDUAL, mean_over_heads, rollout

HIGH_NORM_FACTOR = 3.0  # a token is high-norm where its norm exceeds this many times the median patch's


def patches(att: ModelAttention) -> ImagePatches:
    """The result's ImagePatches; ValueError for a text model's result."""
    if att.image is None:
        raise ValueError(f"{att.model_name} read a text, not an image: it has no patches")
    return att.image


@dataclass(frozen=True)
class PatchLooks:
    """Where one query token looks in one head: its weights over the patches, laid out as the image, and
    over the prefix tokens ([CLS], registers), which have no place on it. The two sum to 1."""

    token: int  # the query token, 0-based
    layer: int
    head: int | None  # None: the heads' mean
    on_image: np.ndarray  # (rows, cols) float32
    prefix: np.ndarray  # (len(prefix),) float32

    @property
    def top(self) -> tuple[tuple[int, int], float]:
        """The patch that gets the most weight, (row, col) from 0, and its weight."""
        row, col = np.unravel_index(int(np.argmax(self.on_image)), self.on_image.shape)
        return (int(row), int(col)), float(self.on_image[row, col])

    @property
    def prefix_share(self) -> float:
        """The share of the row that goes to tokens that are not patches."""
        return float(self.prefix.sum())


def patch_looks(att: ModelAttention, layer: int, head: int | None, token: int) -> PatchLooks:
    """One query token's weights in one head (None: the mean of the layer's heads), over the image and the
    prefix. Shapes: -> PatchLooks with on_image (rows, cols)."""
    grid = patches(att)
    if not 0 <= token < len(att.tokens):
        raise ValueError(f"token {token + 1} is outside the {len(att.tokens)} tokens")
    if head is not None:
        att.check_head(layer, head)
    rows = att.self_attn.layer_weights(layer, rows=slice(token, token + 1)).cpu().numpy()[:, 0]  # (H, n)
    row = rows.mean(axis=0) if head is None else rows[head]
    return PatchLooks(token=token, layer=layer, head=head, on_image=grid.on_grid(row),
                      prefix=row[:grid.first_patch].astype(np.float32))


def heads_looking(att: ModelAttention, layer: int, token: int) -> np.ndarray:
    """Every head's weights of one query token over the image. Shapes: -> (H, rows, cols) float32."""
    grid = patches(att)
    att.check_head(layer, 0)
    rows = att.self_attn.layer_weights(layer, rows=slice(token, token + 1)).cpu().numpy()[:, 0]  # (H, n)
    return grid.on_grid(rows)


def attention_rollout(att: ModelAttention, *, residual: float = ROLLOUT_RESIDUAL) -> np.ndarray:
    """Attention rollout after every layer of an image model's result (attention.models.recorded.aggregations.
    rollout, the formula in the module docstring). Shapes: -> (L, n, n) float64; row i of layer l: how token i
    after layer l traces back to the input tokens (rows sum to 1)."""
    patches(att)
    s = att.self_attn
    return rollout(np.stack([mean_over_heads(s, layer) for layer in range(s.n_layers)]), residual)


def token_norms(att: ModelAttention) -> np.ndarray:
    """Every token's hidden-state L2 norm: the embeddings (row 0), then after each layer.
    Shapes: -> (L + 1, n) float32."""
    if att.hidden.shape[-1] == 0:
        raise ValueError("this result holds no hidden states (a saved file or given attentions): norms need the "
                         "model's own pass")
    return np.linalg.norm(att.hidden, axis=-1).astype(np.float32)


def high_norm_tokens(att: ModelAttention, layer: int, *, factor: float = HIGH_NORM_FACTOR) -> np.ndarray:
    """Tokens whose hidden-state norm after layer `layer` (0-based; -1: the last) exceeds `factor` times the
    median patch's: the outliers Darcet et al. (2024) found in large ViTs, patches of little content that the
    model uses as scratch space, and that registers take over. Shapes: -> (k,) int token indices."""
    grid = patches(att)
    norms = token_norms(att)[layer + 1 if layer >= 0 else layer]
    median = float(np.median(norms[grid.first_patch:]))
    return np.flatnonzero(norms > factor * median)
