"""What a live control shows at every step of its range, precomputed here so the browser only looks it up.

A page's live slider (pages/components/) redraws on every frame of a drag without a round trip to the
server; the rule that the browser does no attention math stays, because every number it draws comes from
these arrays, computed with `attention.toy.lookup.soft_lookup` at each slider step, the other controls held
where they are. When the drag ends, the value goes back to Python, which precomputes again around it.

Numbers travel as integers in thousandths (3 decimals, the precision on screen), packed as little-endian
uint16 (weights) or int32 (anything signed) and base64: 101 x 101 x 3 plane weights are 82 KB of text
instead of ~250 KB of JSON.

Two components use it: the lookup's sliders and query plane (lookup_payload, pages/components/
live_lookup.js), and a general sweep of bars and matrices, one frame per slider step (sweep_payload and
the *_frames functions, pages/components/live_sweep.js) for Step by step, Why scale, Multi-head,
Ambiguity and Inside one head.

Shapes: S slider steps (101: 0.00 to 1.00 for the lookup), m items, d_v value features.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

import numpy as np

from attention.toy.ambiguity import bank_attention, it_attention
from attention.toy.core import attention_from_embeddings, scaled_dot_product_attention, softmax
from attention.toy.lookup import soft_lookup
from attention.toy.multihead import toy_translation
from attention.toy.rounding import DECIMALS
from attention.toy.scaling import scaling_sample

STEPS = np.round(np.linspace(0.0, 1.0, 101), 2)  # the sliders' positions: 0.00, 0.01, ... 1.00


def thousandths(x) -> np.ndarray:
    """Values in [0, 65.535] as integer thousandths: the precision every toy page says a weight with
    (attention.toy.rounding.DECIMALS), so a live bar and the same weight in a sentence read alike."""
    return np.rint(np.asarray(x, dtype=np.float64) * 10 ** DECIMALS).astype(np.uint16)


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
    winners: np.ndarray  # (d_k, S) index of the item with the largest weight; m (one past the last) for a tie


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
            weights[f, s], outputs[f, s] = res.weights, res.output
            winners[f, s] = m if res.tie else res.winner_index
    return LookupSweeps(query=query, labels=tuple(labels), weights=weights, outputs=outputs, winners=winners)


@dataclass(frozen=True)
class LookupPlane:
    """Soft lookup on the 101 x 101 grid of two features' slider steps, the third held at `query`."""

    features: tuple[int, int]  # (x feature, y feature), indices into the query
    query: np.ndarray  # (d_k,)
    weights: np.ndarray  # (S, S, m): weights[i, j] with x feature at STEPS[i], y feature at STEPS[j]
    winners: np.ndarray  # (S, S) as LookupSweeps.winners: m for a tie


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
    return LookupPlane(features=(fx, fy), query=query, weights=weights, winners=winners_or_ties(weights))


def winners_or_ties(weights) -> np.ndarray:
    """The index of the largest weight in each row of the last axis, or m (one past the last item) where the two
    largest are equal to the page's 3 decimals (SoftLookup.tie). Shapes: weights (..., m) -> (...)."""
    w = np.asarray(weights, dtype=np.float64)
    if w.shape[-1] < 2:
        return w.argmax(-1)
    top = np.round(np.sort(w, axis=-1)[..., ::-1][..., :2], DECIMALS)
    return np.where(top[..., 0] == top[..., 1], w.shape[-1], w.argmax(-1))


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
        "sweeps": {"weights": packed(sweeps.weights),
                   "outputs": base64.b64encode(signed_thousandths(sweeps.outputs).tobytes()).decode("ascii"),
                   "winners": sweeps.winners.ravel().tolist()},
        "plane": {"features": list(plane.features), "weights": packed(plane.weights),
                  "winners": base64.b64encode(plane.winners.astype(np.uint8).tobytes()).decode("ascii")},
    }
    data["signature"] = str(hash((data["sweeps"]["weights"], data["plane"]["weights"], tuple(data["labels"]))))
    return data


# --- Any page: sliders swept through precomputed frames ---------------------------------------------------


@dataclass(frozen=True)
class Panel:
    """One chart of a live sweep: bars (one row) or a matrix, a frame per step of each slider.
    Shapes: frames (n_sliders, S, rows, cols)."""

    title: str
    chart: str  # "bars" or "matrix"
    row_labels: tuple[str, ...]
    col_labels: tuple[str, ...]
    frames: np.ndarray
    signed: bool = False  # signed numbers (red-blue around 0); else weights in [0, 1] (blue scale)

    @property
    def best(self) -> np.ndarray | None:
        """(n_sliders, S) the bar drawn darker in each frame: the largest weight. None for signed bars and
        matrices, which highlight nothing."""
        if self.chart != "bars" or self.signed:
            return None
        return self.frames[..., 0, :].argmax(-1)


@dataclass(frozen=True)
class Slider:
    """A live slider: the value at each step (what it shows), the step it starts at, and the page widget
    that takes the value when the slider is let go."""

    label: str
    values: tuple  # of the widget's own type (`kind`)
    index: int
    widget: str  # the key of the page's widget (bound to the URL) that the released value goes to
    kind: type = float  # the type the page's widget keeps: int for an integer input, float otherwise

    def value_at(self, step) -> int | float:
        """The value at a step the component hands back, as the page's widget keeps it: the one conversion
        where a released value enters the page. The component's numbers arrive as JSON (a step may come as
        3.0), and an integer input handed 84.0 made numpy refuse it (Why scale, every release: issue 68)."""
        return self.kind(self.values[int(step)])


def slider(label: str, values, value, widget: str) -> Slider:
    """A Slider over `values`, starting at the step nearest `value`, the widget's current value: its type
    (int or float) is the type every step is kept in, whatever type the grid was built in."""
    kind = int if isinstance(value, int | np.integer) and not isinstance(value, bool) else float
    values = tuple(kind(v) for v in values)
    return Slider(label, values, step_of(values, value), widget, kind)


def signed_thousandths(x) -> np.ndarray:
    """Any values as integer thousandths (int32): scores and outputs can be negative."""
    return np.rint(np.asarray(x, dtype=np.float64) * 10 ** DECIMALS).astype("<i4")


def sweep_payload(sliders: list[Slider], panels: list[Panel], *, key: str) -> dict:
    """JSON-ready data for the live sweep component (pages/components/live_sweep.js): frames as base64
    little-endian int32 thousandths, read with Int32Array, and the bar to highlight in each frame
    (Panel.best), so the browser picks nothing itself. Names travel as text."""
    for p in panels:
        if p.frames.shape[:2] != (len(sliders), max(len(s.values) for s in sliders)):
            raise ValueError(f"panel {p.title!r}: frames {p.frames.shape} do not match the sliders")
    data = {
        "key": key,
        "sliders": [{"label": str(s.label), "values": [float(v) for v in s.values], "index": int(s.index)}
                    for s in sliders],
        "panels": [{"title": str(p.title), "chart": p.chart, "rows": [str(x) for x in p.row_labels],
                    "cols": [str(x) for x in p.col_labels], "signed": bool(p.signed),
                    "scale": float(max(1e-9, np.abs(p.frames).max())) if p.signed else 1.0,
                    "frames": base64.b64encode(signed_thousandths(p.frames).tobytes()).decode("ascii"),
                    "best": None if p.best is None else p.best.ravel().tolist()}
                   for p in panels],
    }
    data["signature"] = str(hash(tuple(p["frames"] for p in data["panels"])))
    return data


def slider_values(grid, value: float) -> np.ndarray:
    """A slider's steps: the grid, plus the current value when it was typed between two steps, so the
    slider starts exactly where the page's numbers are. Shapes: grid (S,) -> (S,) or (S + 1,), sorted."""
    grid = np.asarray(grid, dtype=np.float64)
    if np.any(np.isclose(grid, float(value), rtol=0, atol=1e-9)):
        return grid
    return np.sort(np.append(grid, float(value)))


def step_of(values, value: float) -> int:
    """The index of the slider step nearest `value`."""
    return int(np.argmin(np.abs(np.asarray(values, dtype=np.float64) - float(value))))


QUERY_STEP = 0.05
QUERY_VALUES = np.round(np.arange(-3.0, 3.0 + QUERY_STEP / 2, QUERY_STEP), 2)  # a query coordinate's slider


def with_query(x, w_q, w_k, w_v, token: int, query):
    """Scaled dot-product attention of one token whose query is replaced by `query` (keys and values as
    the sentence gives them). Shapes: query (d_k,) -> AttentionTrace with weights (1, n)."""
    base = attention_from_embeddings(x, w_q, w_k, w_v)
    if not 0 <= token < len(base.q):
        raise ValueError(f"token {token} is outside the {len(base.q)} tokens")
    return scaled_dot_product_attention(np.asarray(query, dtype=np.float64)[None, :], base.k, base.v)


def query_sweeps(x, w_q, w_k, w_v, token: int, values, *, query=None) -> dict[str, np.ndarray]:
    """Self-attention of one token while one coordinate of its query is swept (the others held at `query`,
    default the token's own q): the Step by step page's live sliders. Shapes: x (n, d_model) -> scaled,
    weights (d_k, S, n), output (d_k, S, d_v); values (S,) the slider steps."""
    base = attention_from_embeddings(x, w_q, w_k, w_v)
    q = base.q[token] if query is None else np.asarray(query, dtype=np.float64)
    d_k, steps = len(q), len(values)
    grid = np.broadcast_to(q, (d_k, steps, d_k)).copy()  # (d_k, S, d_k)
    for f in range(d_k):
        grid[f, :, f] = values
    t = scaled_dot_product_attention(grid.reshape(-1, d_k), base.k, base.v)
    return {"scaled": t.scaled.reshape(d_k, steps, -1), "weights": t.weights.reshape(d_k, steps, -1),
            "output": t.output.reshape(d_k, steps, -1), "query": q}


def temperature_sweep(scaled_row, temperatures) -> np.ndarray:
    """softmax(scaled / T) at each temperature. Shapes: scaled_row (m,), temperatures (S,) -> (S, m)."""
    scaled_row = np.asarray(scaled_row, dtype=np.float64)
    return softmax(scaled_row[None, :] / np.asarray(temperatures, dtype=np.float64)[:, None], axis=-1)


def frames_of(values, frame) -> np.ndarray:
    """One slider's frames: frame(value) at every step, stacked. frame returns (rows, cols).
    Shapes: values (S,) -> (1, S, rows, cols)."""
    return np.stack([np.atleast_2d(frame(float(v))) for v in values])[None]


SHARPNESS_VALUES = np.round(np.arange(0.0, 6.0 + 0.25, 0.5), 2)  # the Multi-head page's cross-attention slider
PULL_VALUES = np.round(np.arange(0.0, 10.0 + 0.25, 0.5), 2)  # Ambiguity in a toy model
TEMPERATURE_VALUES = np.round(np.arange(0.1, 5.0 + 0.05, 0.1), 2)  # softmax temperature sliders
DIM_VALUES = np.unique(np.rint(np.geomspace(1, 1024, 120)).astype(int))  # Why scale: d, denser where it is small


def cross_attention_frames(values) -> np.ndarray:
    """The Multi-head page's toy translation at each sharpness. Shapes: -> (1, S, 7 target, 6 source)."""
    return frames_of(values, lambda s: toy_translation(s).heads[0].weights)


def scaling_frames(d: int, temperature: float, n_keys: int, dims, temperatures) -> dict[str, np.ndarray]:
    """Why scale by √d_k: one random q and its keys' weights, without and with ÷√d, swept along d
    (`dims`, T held) and along T (`temperatures`, d held). Shapes: -> each (2, S, 1, n_keys) with
    S = the longer slider; the shorter one's frames fill its first steps."""
    steps = max(len(dims), len(temperatures))
    out = {"unscaled": np.zeros((2, steps, 1, n_keys)), "scaled": np.zeros((2, steps, 1, n_keys))}
    for s, value in enumerate(dims):
        sample = scaling_sample(int(value), n_keys=n_keys, temperature=temperature)
        out["unscaled"][0, s, 0], out["scaled"][0, s, 0] = sample.weights_unscaled, sample.weights_scaled
    for s, value in enumerate(temperatures):
        sample = scaling_sample(d, n_keys=n_keys, temperature=float(value))
        out["unscaled"][1, s, 0], out["scaled"][1, s, 0] = sample.weights_unscaled, sample.weights_scaled
    return out


def pull_frames(sentence: str, word: str, values) -> tuple[tuple[str, ...], np.ndarray]:
    """Ambiguity in a toy model: what `word` ("bank" or "it", layer 2) attends to at each pull.
    Shapes: -> (the sentence's n tokens, frames (1, S, 1, n)). ValueError for a sentence the toy
    vocabulary cannot read."""
    tokens = (bank_attention if word == "bank" else it_attention)(sentence).tokens

    def row(pull: float) -> np.ndarray:
        if word == "bank":
            r = bank_attention(sentence, pull)
            return r.trace.weights[r.focus]
        r = it_attention(sentence, pull)
        return r.layer2.weights[r.focus]

    return tokens, frames_of(values, row)


def temperature_frames(scaled_row, values) -> np.ndarray:
    """A real head's weights for one query at each softmax temperature (Inside one head). Masked keys
    (-inf scores) stay at 0. Shapes: scaled_row (m,) -> (1, S, 1, m)."""
    return temperature_sweep(scaled_row, values)[None, :, None, :]
