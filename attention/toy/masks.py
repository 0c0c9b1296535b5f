"""Boolean attention masks. Convention (as torch's SDPA): True = this query may attend to this key.

    causal_mask(4)            padding_mask([1, 1, 0])
    [[T F F F]                [[T T F]      every query row sees only the real (non-pad) keys
     [T T F F]                 [T T F]
     [T T T F]                 [T T F]]
     [T T T T]]
"""

from __future__ import annotations

import numpy as np


def causal_mask(n: int, m: int | None = None) -> np.ndarray:
    """Query i may attend to keys 0..i (no peeking at later tokens), as in a decoder.

    With m > n the queries are taken to be the last n of the m positions (a cached prefix).
    Shapes: -> (n, m) bool
    """
    m = n if m is None else m
    if n < 0 or m < 0:
        raise ValueError(f"mask sizes must be >= 0, got n={n}, m={m}")
    return np.tril(np.ones((n, m), dtype=bool), k=m - n)


def padding_mask(key_is_real, n_queries: int | None = None) -> np.ndarray:
    """Hide padding keys from every query.

    Shapes: key_is_real (..., m) truthy for real tokens -> (..., 1, m) bool, or (..., n, m) with n_queries.
    """
    real = np.asarray(key_is_real).astype(bool)
    mask = real[..., None, :]
    if n_queries is not None:
        mask = np.broadcast_to(mask, real.shape[:-1] + (n_queries, real.shape[-1]))
    return mask


def combine_masks(*masks) -> np.ndarray | None:
    """A key is visible only if every mask allows it (logical AND, broadcasting); None masks are skipped."""
    present = [np.asarray(m, dtype=bool) for m in masks if m is not None]
    if not present:
        return None
    out = present[0]
    for m in present[1:]:
        out = np.logical_and(out, m)
    return out
