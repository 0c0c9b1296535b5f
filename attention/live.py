"""What a live control shows at every step of its range, precomputed here so the browser only looks it up.

A page's live slider (pages/components/) redraws on every frame of a drag without a round trip to the
server; the rule that the browser does no attention math stays, because every number it draws comes from
these arrays, computed with `attention.lookup.soft_lookup` at each slider step, the other controls held
where they are. When the drag ends, the value goes back to Python, which precomputes again around it.

Numbers travel as integers in thousandths (3 decimals, the precision on screen), packed as little-endian
uint16 and base64: 101 x 101 x 3 plane weights are 82 KB of text instead of ~250 KB of JSON.

Shapes: S slider steps (101: 0.00 to 1.00), m items, d_v value features.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

import numpy as np

from attention.lookup import soft_lookup

STEPS = np.round(np.linspace(0.0, 1.0, 101), 2)  # the sliders' positions: 0.00, 0.01, ... 1.00


def thousandths(x) -> np.ndarray:
    """Values in [0, 65.535] as integer thousandths (what the page prints with 3 decimals)."""
    return np.rint(np.asarray(x, dtype=np.float64) * 1000).astype(np.uint16)


def packed(x) -> str:
    """Integer thousandths as base64 of little-endian uint16, row-major: the browser reads them with
    Uint16Array and divides by 1000."""
    return base64.b64encode(thousandths(x).astype("<u2").tobytes()).decode("ascii")


@dataclass(frozen=True)
class LookupSweeps:
    """Soft lookup along each query feature's slider, the other two held at `query`."""

    query: np.ndarray  # (d_k,) the query the sweeps are taken around
    labels: tuple[str, ...]  # m
    weights: np.ndarray  # (d_k, S, m): weights[f, s] with feature f at STEPS[s]
    outputs: np.ndarray  # (d_k, S, d_v): the blended values
    winners: np.ndarray  # (d_k, S) index of the item with the largest weight


def lookup_sweeps(query, keys, values, labels, *, scaled: bool = True) -> LookupSweeps:
    """Run soft_lookup at every step of every feature's slider. Shapes: query (d_k,), keys (m, d_k),
    values (m, d_v)."""
    query = np.asarray(query, dtype=np.float64)
    d_k, m, d_v = len(query), len(labels), np.asarray(values).shape[1]
    weights = np.empty((d_k, len(STEPS), m))
    outputs = np.empty((d_k, len(STEPS), d_v))
    winners = np.empty((d_k, len(STEPS)), dtype=np.int64)
    for f in range(d_k):
        for s, value in enumerate(STEPS):
            q = query.copy()
            q[f] = value
            res = soft_lookup(q, keys, values, labels, scaled=scaled)
            weights[f, s], outputs[f, s], winners[f, s] = res.weights, res.output, res.winner_index
    return LookupSweeps(query=query, labels=tuple(labels), weights=weights, outputs=outputs, winners=winners)


@dataclass(frozen=True)
class LookupPlane:
    """Soft lookup on the 101 x 101 grid of two features' slider steps, the third held at `query`."""

    features: tuple[int, int]  # (x feature, y feature), indices into the query
    query: np.ndarray  # (d_k,)
    weights: np.ndarray  # (S, S, m): weights[i, j] with x feature at STEPS[i], y feature at STEPS[j]
    winners: np.ndarray  # (S, S)


def lookup_plane(query, keys, values, labels, features: tuple[int, int], *, scaled: bool = True) -> LookupPlane:
    """soft_lookup on a grid, all S x S queries at once (its trace broadcasts over a batch of queries)."""
    fx, fy = features
    if fx == fy:
        raise ValueError("the plane needs two different features")
    query = np.asarray(query, dtype=np.float64)
    grid = np.broadcast_to(query, (len(STEPS), len(STEPS), len(query))).copy()  # (S, S, d_k)
    grid[:, :, fx] = STEPS[:, None]
    grid[:, :, fy] = STEPS[None, :]
    res = soft_lookup(grid.reshape(-1, len(query)), keys, values, labels, scaled=scaled)
    weights = res.trace.weights.reshape(len(STEPS), len(STEPS), -1)
    return LookupPlane(features=(fx, fy), query=query, weights=weights, winners=weights.argmax(-1))


PLANE_PAIRS = ((0, 1), (0, 2), (1, 2))  # the query plane's choices of (across, up) features


def slider_step(value: float) -> int:
    """A slider value in [0, 1] -> its step index 0..100."""
    return int(np.clip(np.rint(float(value) * 100), 0, len(STEPS) - 1))


def lookup_payload(query, keys, values, labels, key_features, value_features, *, scaled: bool = True,
                   pair: int = 0, key: str = "live") -> dict:
    """Everything the live lookup component draws, as JSON-ready data: the sweeps and the plane around
    `query` (snapped to slider steps), the keys as points of the plane, and the names (shown as text)."""
    steps = [slider_step(v) for v in query]
    snapped = STEPS[steps]
    sweeps = lookup_sweeps(snapped, keys, values, labels, scaled=scaled)
    plane = lookup_plane(snapped, keys, values, labels, PLANE_PAIRS[pair], scaled=scaled)
    data = {
        "key": key,
        "labels": [str(x) for x in labels],
        "features": [str(x) for x in key_features],
        "value_features": [str(x) for x in value_features],
        "query_steps": steps,
        "keys": np.clip(np.asarray(keys, dtype=np.float64), 0, 1).round(3).tolist(),
        "pairs": [list(p) for p in PLANE_PAIRS],
        "sweeps": {"weights": packed(sweeps.weights), "outputs": packed(np.clip(sweeps.outputs, 0, 65))},
        "plane": {"features": list(plane.features), "weights": packed(plane.weights)},
    }
    data["signature"] = str(hash((data["sweeps"]["weights"], data["plane"]["weights"], tuple(data["labels"]))))
    return data
