"""The captured calls of one forward pass, turned into the result's AttentionStacks and hidden states.

attention.models.forward.capture records each attention call (q, k, v, mask, scale); attend() hands them
here, where they are sorted into stacks (self-attention; an encoder-decoder's decoder and cross attention)
and copied into arrays made once, each call's own copy dropped as soon as it is taken.

Shapes: L layers, H heads, H_kv KV heads, n queries, m keys, d head size, D model size.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from attention.models.forward.attention_stack import AttentionStack
from attention.models.forward.capture import CapturedCall
from attention.models.forward.device_arrays import DeviceArray, resident_device


def stack_of(module_name: str, encoder_decoder: bool) -> str:
    """Which attention stack an attention module belongs to: every one is "self" in an encoder-only or
    decoder-only model (OPT's layers are "model.decoder.layers"); an encoder-decoder model's are told apart
    by name ("self", "decoder" or "cross")."""
    if not encoder_decoder:
        return "self"
    lower = module_name.lower()
    if "encoder_attn" in lower or "crossattention" in lower or "enc_dec" in lower or "encdec" in lower:
        return "cross"
    return "decoder" if "decoder" in lower else "self"


def calls_of(calls: list[CapturedCall], stack: str, encoder_decoder: bool) -> list[CapturedCall]:
    """The captured calls of one attention stack (stack_of), in the order they were made."""
    return [c for c in calls if stack_of(c.module, encoder_decoder) == stack]


def attention_stack(calls: list[CapturedCall], w_o, own_weights=None, *, causal: bool) -> AttentionStack:
    """One stack from its captured calls; `own_weights` (the model's output_attentions) when the scores carry
    a bias that q and k cannot reproduce, or when nothing was captured (then `causal` says whether the
    model's own mask hides later keys).

    q, k, v are copied layer by layer into arrays made once, and each call's own copy is dropped as soon
    as it is taken: at 4,096 tokens they are ~0.5 GB, and stacking them at the end would hold it twice.
    """
    own = None if own_weights is None else as_numpy(torch.stack([a[0] for a in own_weights]))
    if not calls:  # the model's own weights only
        L, _, n, m = own.shape
        mask = np.tri(n, m, dtype=bool) if causal else None
        if mask is not None:
            mask.flags.writeable = False
        return AttentionStack(q=None, k=None, v=None, masks=(mask,) * L, exactly_causal=(causal,) * L,
                              causal=causal, scale=float("nan"), bias=False,
                              modules=tuple(f"layer {i + 1}" for i in range(L)), w_o=None, own_weights=own)
    first = calls[0]
    modules_of = tuple(c.module for c in calls)
    q, k, v = (_empty(len(calls), getattr(first, name)) for name in "qkv")
    for i, call in enumerate(calls):
        for into, part in ((q, call.q), (k, call.k), (v, call.v)):
            if isinstance(into, DeviceArray):
                into.tensor[i] = part.tensor
            else:
                into[i] = part
        calls[i] = replace(call, q=None, k=None, v=None)
    distinct = {id(c.mask): c for c in calls}  # each mask checked once (an exactly causal one sees all only at n = 1)
    full = {key: c.mask is None or (c.mask.shape[0] == 1 if c.causal else bool(c.mask.all()))
            for key, c in distinct.items()}
    masks = tuple(None if full[id(c.mask)] else c.mask for c in calls)
    causal_of = {id(c.mask): c.causal for c in calls}
    scales, softcaps = tuple(c.scale for c in calls), tuple(c.softcap for c in calls)
    return AttentionStack(
        q=q, k=k, v=v, masks=masks, exactly_causal=tuple(c.causal for c in calls),
        causal=all(m is not None and (causal_of[id(m)] or _no_later_keys(m))
                   for m in {id(m): m for m in masks}.values()),
        scale=first.scale, bias=any(c.bias for c in calls), modules=modules_of,
        w_o=w_o if w_o is not None and len(w_o) == len(calls) else None, own_weights=own,
        softcap=first.softcap, layer_scales=None if len(set(scales)) == 1 else scales,
        layer_softcaps=None if len(set(softcaps)) == 1 else softcaps,
    )


def _empty(n_layers: int, first) -> np.ndarray | DeviceArray:
    """Room for every layer's copy of an array shaped like `first` (one layer's), where `first` is: a
    DeviceArray on its device in its dtype, else float32 numpy."""
    if isinstance(first, DeviceArray):
        t = first.tensor
        return DeviceArray(torch.empty((n_layers, *t.shape), dtype=t.dtype, device=t.device))
    return np.empty((n_layers, *first.shape), np.float32)


def _no_later_keys(mask) -> bool:
    """No query sees a key after it (causal, or a causal sliding window). Shapes: mask (n, m), n == m."""
    if isinstance(mask, DeviceArray):
        return mask.shape[0] == mask.shape[1] and not bool(torch.triu(mask.tensor, 1).any())
    return mask.shape[0] == mask.shape[1] and not np.triu(mask, 1).any()


def hidden_states_of(states: list) -> np.ndarray | DeviceArray:
    """(L + 1, n, D) from the model's per-layer hidden states, each dropped from `states` once copied: at
    4,096 tokens they are ~0.3 GB, and the model's copy and ours need not coexist. float32 numpy, or on a
    GPU (attention.models.forward.device_arrays) a DeviceArray there in the model's dtype."""
    device = resident_device()
    if device is not None:
        first = states[0][0]
        out = torch.empty((len(states), *first.shape), dtype=first.dtype, device=device)
        for i in range(len(states)):
            out[i] = states[i][0]
            states[i] = None
        return DeviceArray(out)
    out = np.empty((len(states), *states[0].shape[1:]), np.float32)
    for i in range(len(states)):
        out[i] = as_numpy(states[i][0])
        states[i] = None
    return out


def as_numpy(t: torch.Tensor) -> np.ndarray:
    """A tensor of the pass as a float32 numpy array in memory (whatever its dtype and device)."""
    return t.detach().to(torch.float32).cpu().numpy()

