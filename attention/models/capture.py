"""Capture Q, K, V inside a Hugging Face model while it runs, after rotary embeddings, for every layer.

transformers 5 routes every attention layer through one function chosen by `attn_implementation`, and
calls it with the tensors the kernel sees: query (B, H, n, d) and key/value (B, H_kv, m, d) after
rotary position embeddings (llama) and before KV heads are repeated (grouped-query attention), plus
the additive mask and the scaling. Models load with `attn_implementation=CAPTURE`: our function
records those inputs when a `recording()` block is open on this thread, then runs the architecture's
own eager kernel, so outputs and `output_attentions` are exactly the eager ones.

This does what forward hooks on q_proj/k_proj/v_proj would, without re-implementing each model's
rotary embedding: the captured q, k are the ones the model multiplies.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from dataclasses import dataclass

import numpy as np
import torch
from transformers import AttentionInterface, AttentionMaskInterface
from transformers.masking_utils import eager_mask

CAPTURE = "explorer_capture"


@dataclass(frozen=True)
class CapturedCall:
    """One attention call. Shapes: q (H, n, d), k and v (H_kv, m, d), mask (n, m) bool or None."""

    module: str  # the attention module's qualified name, e.g. "encoder.layer.3.attention.self"
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    mask: np.ndarray | None  # True = may attend (from the additive mask: 0 kept, very negative masked)
    bias: bool  # the additive mask held finite non-zero values (a position bias, as in T5)
    scale: float


_local = threading.local()


@contextlib.contextmanager
def recording(names: dict[int, str]):
    """Collect the CapturedCalls of the forward passes run inside the block, on this thread.

    `names` maps id(attention module) -> its qualified name. Yields the list being filled.
    """
    calls: list[CapturedCall] = []
    _local.active = (names, calls)
    try:
        yield calls
    finally:
        _local.active = None


def _capture_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    active = getattr(_local, "active", None)
    if active is not None:
        names, calls = active
        mask, bias = _bool_mask(attention_mask, query.shape[-2], key.shape[-2])
        extra = kwargs.get("position_bias")  # T5 passes its learned relative bias separately
        bias = bias or (isinstance(extra, torch.Tensor) and bool(torch.any(extra != 0)))
        scale = float(scaling) if scaling is not None else float(query.shape[-1]) ** -0.5
        calls.append(CapturedCall(
            module=names.get(id(module), type(module).__name__),
            q=_np(query[0]), k=_np(key[0]), v=_np(value[0]), mask=mask, bias=bias, scale=scale,
        ))
    eager = importlib.import_module(type(module).__module__).eager_attention_forward
    return eager(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(torch.float32).cpu().numpy()


def _bool_mask(mask, n: int, m: int) -> tuple[np.ndarray | None, bool]:
    """(B, 1, n, m) additive float mask -> ((n, m) bool with True = may attend, has a finite bias)."""
    if mask is None:
        return None, False
    a = mask[0, 0, -n:, -m:].detach()
    if a.dtype == torch.bool:
        return a.cpu().numpy(), False
    a = a.to(torch.float32)
    blocked = a <= torch.finfo(torch.float32).min / 2
    bias = bool(torch.any((a != 0) & ~blocked))
    return (~blocked).cpu().numpy(), bias


AttentionInterface.register(CAPTURE, _capture_attention)
AttentionMaskInterface.register(CAPTURE, eager_mask)  # the same explicit masks eager attention gets
