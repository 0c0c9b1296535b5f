"""Attention weights recomputed from the captured q and k, when a view needs them.

For long inputs the model runs with the fused kernel, which never builds the (heads, n, m) weights;
q and k grow only as n, and any head's weights follow from them the way the model's eager kernel
computes them:

    weights = softmax(cap((q * scale) @ k^T), masked keys at the most negative float32)     in float32

where cap(s) = c * tanh(s / c) for models that soft-cap their attention logits (Gemma-2), else s
(eager computes (q @ k^T) * scale: the same up to the last bit), so recomputed weights equal the
model's own output_attentions to ~1e-6 (tests check <= 1e-5). The
step-by-step trace of one head (ModelAttention.head_trace) is the toy kernel in float64 on the same q, k.

Work runs on compute_device() (attention.models.forward.device).
Shapes for one layer: q (H, n, d), k (H_kv, m, d), mask (n, m) bool; weights (H, r, m) for r query rows.
Query head h reads key head h // (H / H_kv) (grouped-query attention).
"""

from __future__ import annotations

import collections
import threading
import warnings
import weakref

import numpy as np
import torch

from attention.models.forward.device import compute_device
from attention.models.forward.device_arrays import DeviceArray

# q, k and masks are read-only numpy arrays shared by every session; torch.from_numpy views them without a
# copy and warns that they are not writable. Nothing here writes to them.
warnings.filterwarnings("ignore", message="The given NumPy array is not writable")


DEVICE_COPIES = 4  # arrays kept on a GPU between calls: one layer's q, k, v and mask


_copies: collections.OrderedDict = collections.OrderedDict()
_copies_lock = threading.Lock()


def on_device(a: np.ndarray | DeviceArray, device: torch.device) -> torch.Tensor:
    """`a` as a float32 (or bool) tensor on `device`: a view on the CPU (no copy); a DeviceArray already there
    in float32 as itself; otherwise a copy made once and kept for the next DEVICE_COPIES calls, so that a
    layer's chunks of rows do not each send its q, k and mask again (at 32,768 tokens a 1B model's k is 67 MB
    a layer), nor cast a bfloat16 layer to float32 again. A copy is found by the array's memory (address,
    shape, strides, dtype) and holds a reference to it, so that memory cannot be reused while the copy is
    kept; the arrays are never written (module docstring)."""
    if isinstance(a, DeviceArray):
        t = a.tensor
        if t.device == device and t.dtype in (torch.float32, torch.bool):
            return t
        # A part of a result's q or k (device_arrays.part): found by the whole array and the part, and held
        # by a weak reference to that array, so that a result dropped from the caches frees its memory there.
        whole, where = a.origin
        key = ("part", id(whole), where, str(device))
        holder = weakref.ref(whole, _forget)
    elif device.type == "cpu":
        return torch.from_numpy(a)
    else:
        key = (a.__array_interface__["data"][0], a.shape, a.strides, a.dtype.str, str(device))
        holder = a
    with _copies_lock:
        kept = _copies.get(key)
        if kept is not None:
            _copies.move_to_end(key)
            return kept[1]
    if isinstance(a, DeviceArray):
        copy = a.tensor.to(device, torch.bool if a.tensor.dtype == torch.bool else torch.float32)
    else:
        copy = torch.from_numpy(np.ascontiguousarray(a)).to(device)
    with _copies_lock:
        _copies[key] = (holder, copy)
        while len(_copies) > DEVICE_COPIES:
            _copies.popitem(last=False)
    return copy


def _forget(gone: weakref.ref) -> None:
    """Drop the copies made of an array that no longer exists (its id may now be another's)."""
    with _copies_lock:
        for key in [key for key, (holder, _) in _copies.items() if holder is gone]:
            del _copies[key]


def layer_scores(q: np.ndarray, k: np.ndarray, *, scale: float, mask: np.ndarray | None, causal: bool = False,
                 rows: slice = slice(None), keys: int | None = None, heads=None, softcap: float | None = None,
                 out: torch.Tensor | None = None) -> torch.Tensor:
    """Scaled, masked scores q @ k^T * scale of some query rows of one layer (masked: the most negative
    float32, as the eager kernel adds it, so softmax gives exactly 0 and 0 * score stays 0).

    `keys` keeps only the first keys (a causal chunk never sees later ones: their weights are 0 and the
    caller knows it); `causal` says the mask is exactly causal, so only the chunk's diagonal block needs
    masking; `heads` picks query heads (default all); `softcap` c maps scores to c * tanh(s / c) before
    the mask, as Gemma-2's kernel does; `out`, a flat float32 buffer at least h * r * keys
    long, receives the scores (long loops reuse one buffer instead of allocating one per chunk).
    Shapes: q (H, n, d), k (H_kv, m, d), mask (n, m) -> (h, r, keys) float32 on compute_device().
    """
    device = compute_device()
    n_heads, n_kv = q.shape[0], k.shape[0]
    group = n_heads // n_kv
    keys = k.shape[1] if keys is None else keys
    start, stop, _ = rows.indices(q.shape[1])
    # The scale multiplies q (r x d values) rather than the scores (r x keys): one pass fewer over the
    # largest array, and the same math as the eager kernel's (q k^T) * scale up to the last bit.
    q_all, k_all = on_device(q, device), on_device(k, device)
    if heads is None:  # all heads, grouped by the KV head they share: k is read in place, never repeated
        qg = torch.mul(q_all[:, start:stop], scale).reshape(n_kv, group * (stop - start), -1)
        kg = k_all[:, :keys]  # (H_kv, keys, d)
        shape = (n_heads, stop - start, keys)
    else:
        heads = torch.from_numpy(np.asarray(heads).reshape(-1)).to(device)
        qg = torch.mul(q_all[heads, start:stop], scale)  # (h, r, d)
        kg = k_all[heads // group, :keys]  # (h, keys, d)
        shape = (len(heads), stop - start, keys)
    scores = None if out is None else out[:int(np.prod(shape))].view(qg.shape[0], qg.shape[1], keys)
    scores = torch.matmul(qg, kg.transpose(-1, -2), out=scores).view(shape)  # (h, r, d) @ (h, d, keys)
    if softcap is not None:
        scores.div_(softcap).tanh_().mul_(softcap)
    if mask is None:
        return scores
    first = start if causal else 0  # causal: every key before the chunk's first row is visible to all its rows
    visible = on_device(mask, device)[start:stop, first:keys]  # (r, keys - first)
    scores[..., first:].masked_fill_(~visible, torch.finfo(torch.float32).min)
    return scores


def layer_weights(q: np.ndarray, k: np.ndarray, *, scale: float, mask: np.ndarray | None, causal: bool = False,
                  rows: slice = slice(None), keys: int | None = None, heads=None,
                  softcap: float | None = None) -> torch.Tensor:
    """softmax(layer_scores(...)): the weights of some query rows of one layer, as the model's eager kernel
    computes them. Shapes: -> (h, r, keys) float32 on compute_device()."""
    return torch.softmax(layer_scores(q, k, scale=scale, mask=mask, causal=causal, rows=rows, keys=keys,
                                      heads=heads, softcap=softcap), dim=-1)


def row_chunks(n: int, rows_per_chunk: int):
    """Slices of query rows, `rows_per_chunk` at a time: bounded memory at any length."""
    for start in range(0, n, rows_per_chunk):
        yield slice(start, min(n, start + rows_per_chunk))


VIEW_CHUNK_FLOATS = {"cpu": 4_000_000, "cuda": 64_000_000}  # a view's chunk: 16 MB on a CPU (below glibc's
# largest mmap threshold, 32 MB, and small enough to stay in cache longer), 256 MB on a GPU (a 32,768-token
# layer of 32 heads in 61 chunks, not 9,000: each chunk waits for its copy back)


def chunk_rows(n_heads: int, n_keys: int, budget_floats: int | None = None, multiple: int = 1) -> int:
    """How many query rows fit in one chunk of (heads, rows, keys) float32 within the budget (default
    VIEW_CHUNK_FLOATS on the compute device), rounded down to a multiple of `multiple` (a pooling block)."""
    if budget_floats is None:
        budget_floats = VIEW_CHUNK_FLOATS.get(compute_device().type, VIEW_CHUNK_FLOATS["cpu"])
    rows = max(1, budget_floats // max(1, n_heads * n_keys))
    return max(multiple, rows // multiple * multiple)


def block_max(w: torch.Tensor, b: int, *, rows: bool = True) -> torch.Tensor:
    """Maxima over b x b blocks of the last two axes (partial blocks at the edges), from reshaped views:
    over the keys, then the rows (rows=False: over the keys only).
    Shapes: (..., r, k) -> (..., ceil(r / b), ceil(k / b)), or (..., r, ceil(k / b))."""
    def along(x: torch.Tensor, dim: int) -> torch.Tensor:
        size = x.shape[dim]
        whole = size // b * b
        parts = [] if whole == 0 else [x.narrow(dim, 0, whole).unflatten(dim, (whole // b, b)).amax(dim + 1)]
        if whole < size:
            parts.append(x.narrow(dim, whole, size - whole).amax(dim, keepdim=True))
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim)
    by_keys = along(w, w.ndim - 1)
    return along(by_keys, w.ndim - 2) if rows else by_keys
