"""The sums a survey adds up, a chunk of query rows at a time, from each chunk's weights (SurveySums).

Both the survey's own pass (attention.models.forward.survey_pass) and our attention kernel inside the forward pass
(attention.models.forward.kernel) feed each chunk's scores to SurveySums.add, which takes the softmax into its
own buffer and adds: each row's entropy, the block maxima of the all-heads grid, each key's column mass and
majority count (sinks), and the summed weight at every offset query - key (attention by distance).

Shapes: L layers, H heads, n queries, m keys, r rows in a chunk, c tile size.
"""

from __future__ import annotations

import math
from functools import cached_property

import numpy as np
import torch

from attention.models.forward.device import compute_device
from attention.models.forward.recompute import block_max, chunk_rows, on_device, row_chunks

GRID_CELLS = 120_000  # values in the all-heads grid: bounds its payload (~0.5 MB) whatever the length
GPU_CHUNK_FLOATS = 256_000_000  # on a GPU: 1 GB a buffer, so that a layer takes a few chunks, not hundreds
# (at 8,192 tokens SmolLM2's survey in 2 M-float chunks took 42x its forward pass on an H100: 9,000 chunks)
SURVEY_CHUNK_FLOATS = 2_000_000  # scores per chunk (8 MB, 54 rows of 9 heads at 4,096 tokens). Chunks need
# not be whole rows of tiles (at 4,096 tokens those are 205 rows: 30 MB). Measured at 4,096 tokens on 2 threads,
# one layer's scores took 181 ms in 1 M-float chunks (the matmuls too thin), 108 ms in 2 M and 127 ms in 4 M.


def tile_size(n: int, n_heads_total: int, max_cells: int | None = None) -> int:
    """Cells per side of one head's tile, so that the whole grid holds at most max_cells values (default
    GRID_CELLS)."""
    max_cells = GRID_CELLS if max_cells is None else max_cells
    return int(max(1, min(32, n, max(4, math.sqrt(max_cells / n_heads_total) - 1))))



class SurveySums:
    """The sums the pass adds up, chunk by chunk (see HeadSurvey for what each becomes), and the three
    buffers every chunk is computed in: allocated once per survey, not once per chunk (a fresh 16 MB
    tensor per chunk is a fresh mmap, and its page faults doubled the survey's time in the server)."""

    def __init__(self, L: int, H: int, n: int, m: int):
        self.n, self.m = n, m
        self.block = -(-max(n, m) // tile_size(n, L * H))
        device = compute_device()
        self.rows_per_chunk = chunk_rows(H, m, SURVEY_CHUNK_FLOATS if device.type == "cpu" else GPU_CHUNK_FLOATS)
        self.tiles = np.zeros((L, H, -(-n // self.block), -(-m // self.block)), np.float32)
        self.entropy = np.zeros((L, H))
        self.column_mass, self.column_majority = np.zeros((L, H, m)), np.zeros((L, H, m))
        self.offset_mass = np.zeros((L, H, n + m - 1))
        r = min(self.rows_per_chunk, n)
        self._buffer_floats = (H * r * m, H * r * (m + r + 1))  # scores and weights, the skewed copy
        self._device = device
        # One layer's sums, kept where the weights are (a GPU's chunks then never wait on a copy to the
        # CPU); moved into the arrays above when the next layer starts, and by flush().
        self._layer: int | None = None
        self._sums = {"tiles": torch.zeros(self.tiles.shape[1:], device=device),
                      "entropy": torch.zeros(H, dtype=torch.float64, device=device),
                      "column_mass": torch.zeros(H, m, dtype=torch.float64, device=device),
                      "column_majority": torch.zeros(H, m, dtype=torch.float64, device=device),
                      "offset_mass": torch.zeros(H, n + m - 1, dtype=torch.float64, device=device)}

    # The chunks' buffers, made when the first chunk comes (a survey made by the fused passes needs none).
    @cached_property
    def scores(self) -> torch.Tensor:
        """A chunk's scores, written in place (one buffer for the whole survey)."""
        return torch.empty(self._buffer_floats[0], device=self._device)

    @cached_property
    def weights(self) -> torch.Tensor:
        """A chunk's weights, written in place."""
        return torch.empty(self._buffer_floats[0], device=self._device)

    @cached_property
    def skew(self) -> torch.Tensor:
        """The chunk's weights by offset (query - key), for attention by distance."""
        return torch.empty(self._buffer_floats[1], device=self._device)

    def flush(self) -> None:
        """Move the current layer's sums into the arrays (finish_survey calls it; add() when a layer starts)."""
        if self._layer is None:
            return
        for name, kept in self._sums.items():
            into = getattr(self, name)[self._layer]
            if name == "tiles":  # maxima
                np.maximum(into, kept.cpu().numpy(), out=into)
            else:
                into += kept.cpu().numpy()
            # a fresh zero, not kept.zero_(): sums made in the forward pass's inference mode cannot be
            # written outside it
            self._sums[name] = torch.zeros_like(kept)
        self._layer = None

    def add_layer(self, layer: int, sums: dict[str, torch.Tensor]) -> None:
        """A whole layer's sums made at once (attention.models.forward.fused_survey.layer_sums), on this
        object's device, named and shaped as `_sums`."""
        if layer != self._layer:
            self.flush()
            self._layer = layer
        for name, value in sums.items():
            kept = self._sums[name]
            if name == "tiles":
                torch.maximum(kept, value, out=kept)
            else:
                kept += value

    def add(self, layer: int, rows: slice, scores: torch.Tensor, causal: bool) -> torch.Tensor:
        """One chunk of query rows of one layer, from its masked scores (H, r, keys) (`causal`: no row sees a
        key after the chunk's last row, and the scores stop there). Returns the weights, (H, r, keys) in
        this object's buffer: valid until the next chunk."""
        h, r, keys = scores.shape
        if layer != self._layer:
            self.flush()
            self._layer = layer
        sums = self._sums
        w = self.weights[:h * r * keys].view(h, r, keys)
        torch._softmax(scores, -1, False, out=w)  # torch.softmax, as the eager kernel runs it, into our buffer
        row_max = scores.amax(-1)  # (H, r)
        top = w.amax(-1)  # (H, r) the top key's weight: exp(0) / Z = 1 / Z
        # Entropy without a log over every weight: H = log Z + max - sum_j w_j s_j (the scores are not needed
        # after this, so the product is taken in their buffer; a masked score times its weight 0 is 0).
        entropy = row_max - torch.log(top) - scores.mul_(w).sum(-1)
        sums["entropy"] += entropy.sum(-1)
        sums["column_majority"][:, :keys] += _majority_counts(w, top)
        _pool_into(sums["tiles"], w, rows.start, self.block)
        sums["column_mass"][:, :keys] += w.sum(1)
        lowest, diagonals = diagonal_sums(w, rows.start, causal, self.skew)
        at = lowest + self.m - 1
        sums["offset_mass"][:, at:at + diagonals.shape[1]] += diagonals
        return w


def _pool_into(tiles: torch.Tensor, w: torch.Tensor, first_row: int, block: int) -> None:
    """Raise the tiles (block maxima of one layer's weights) to the maxima of one chunk of its rows, which
    need not start or end at a tile's edge: over the keys first, then over the chunk's rows tile by tile.
    Shapes: tiles (H, ceil(n / b), ceil(m / b)), w (H, r, keys) for rows first_row...first_row + r - 1."""
    by_keys = block_max(w, block, rows=False)  # (H, r, ceil(keys / b))
    r, width = by_keys.shape[1], by_keys.shape[2]
    start = 0
    while start < r:
        tile = (first_row + start) // block
        stop = min(r, (tile + 1) * block - first_row)
        part = by_keys[:, start:stop].amax(1)  # (H, ceil(keys / b))
        torch.maximum(tiles[:, tile, :width], part, out=tiles[:, tile, :width])
        start = stop


def _majority_counts(w: torch.Tensor, top: torch.Tensor) -> torch.Tensor:
    """In how many rows each key holds over half the weight (at most one key per row can).

    Most such rows put it on the first token (a sink): those are counted from one column; the key of any
    other row is found by argmax over that row alone (an argmax over every row costs more than the softmax).
    Shapes: w (H, r, keys), top (H, r) each row's largest weight -> (H, keys) float32.
    """
    h, _, keys = w.shape
    counts = torch.zeros(h, keys, device=w.device)
    on_first = w[..., 0] > 0.5
    counts[:, 0] = on_first.sum(-1)
    heads, rows = ((top > 0.5) & ~on_first).nonzero(as_tuple=True)
    if len(heads):
        counts.index_put_((heads, w[heads, rows].argmax(-1)), torch.ones(len(heads), device=w.device), accumulate=True)
    return counts


def band_pairs(n: int, m: int, causal: bool, window: int) -> tuple[np.ndarray, float]:
    """visible_pairs of a mask known by its shape (attention.models.forward.fused_survey.band_window): every
    key visible (not causal), exactly causal (window 0) or a causal sliding window of `window` keys; counted,
    not read from the mask (a 32,768-token mask is 10^9 values)."""
    offsets = np.arange(-(m - 1), n)
    if causal:
        pairs = np.where(offsets >= 0, n - offsets, 0)
        if window:
            pairs = np.where(offsets < window, pairs, 0)
        seen = np.arange(1, n + 1) if not window else np.minimum(np.arange(1, n + 1), window)
        return pairs.astype(np.float64), float(np.mean(np.log(seen)))
    pairs = np.minimum(n - 1, offsets + m - 1) - np.maximum(0, offsets) + 1
    return np.maximum(pairs, 0).astype(np.float64), float(np.log(max(m, 1)))


def visible_pairs(s, mask: np.ndarray | None, rows_per_chunk: int) -> tuple[np.ndarray, float]:
    """For one mask: the visible (query, key) pairs at each offset, (n + m - 1,) from the most negative up,
    and the mean over rows of log(visible keys), the entropy of uniform attention."""
    n, m = s.n_queries, s.n_keys
    device = compute_device()
    visible = torch.ones(n, m, dtype=torch.bool, device=device) if mask is None else on_device(mask, device)
    out = torch.zeros(n + m - 1, dtype=torch.float64, device=device)
    for rows in row_chunks(n, rows_per_chunk):
        chunk = visible[rows, :s.keys_seen(rows)].to(torch.float32).contiguous()
        lowest, pairs = diagonal_sums(chunk[None], rows.start, s.causal)
        at = lowest + m - 1
        out[at:at + pairs.shape[1]] += pairs[0]
    seen = visible.sum(-1).cpu().numpy()  # (n,) visible keys per row: the log and mean in numpy, as before
    return out.cpu().numpy(), float(np.mean(np.log(np.maximum(seen, 1))))


def diagonal_sums(w: torch.Tensor, first_row: int, causal: bool,
                   buffer: torch.Tensor | None = None) -> tuple[int, torch.Tensor]:
    """Sums of a chunk of rows along its diagonals (constant offset query - key), without a loop.

    For rows i = first_row + r and keys j < K: lay each row out after R zeros, in rows one longer than
    that (R + K + 1), so that reading them R + K + 1 apart moves row r right by r places and column c
    holds offset first_row + R - c in every row; summing the columns gives the diagonal sums. A causal
    chunk has no key after its rows: columns 1..K suffice (offsets >= 0). `buffer` (at least
    H * R * (K + R + 1) floats) is reused between calls. A causal chunk whose keys stop at its last row
    needs no copy at all (_causal_diagonal_sums).
    Shapes: w (H, R, K) -> (the smallest offset, (H, count) sums from the smallest offset up).
    """
    h, r, k = w.shape
    if causal and k == first_row + r and r > 1 and w.is_contiguous():
        return 0, _causal_diagonal_sums(w, first_row)
    size = h * r * (k + r + 1)
    flat = torch.empty(size, device=w.device) if buffer is None else buffer[:size]
    rows = flat.view(h, r * (k + r + 1))[:, :r * (k + r)].view(h, r, k + r)  # row i: R zeros, then w[i]
    rows[..., :r] = 0
    rows[..., r:] = w
    flat.view(h, r * (k + r + 1))[:, r * (k + r):] = 0  # R more zeros after the last row
    if causal:  # offsets first_row + R - 1 down to first_row + R - K, all >= 0
        skewed = flat.as_strided((h, r, k + 1), (r * (k + r + 1), k + r + 1, 1))
        return first_row + r - k, skewed.sum(1)[:, 1:].flip(-1)
    skewed = flat.view(h, r, k + r + 1)
    return first_row - (k - 1), skewed.sum(1)[:, 1:k + r].flip(-1)


def _causal_diagonal_sums(w: torch.Tensor, first_row: int) -> torch.Tensor:
    """diagonal_sums of a causal chunk whose keys stop at its last row (K = first_row + R), read in place.

    Row t's key j sits at t * K + j of each head's block: stepping K + 1 along it keeps j - t, so a view
    with strides (K + 1, 1) over rows t >= 1 and u = j - t from -(R - 1) to first_row holds, in column u,
    offset first_row - u in every row. Where j would be negative the view reads the end of row t - 1,
    keys after that row's own position: weights 0 in a causal chunk. Row 0 (offsets 0..first_row) is
    added on its own. Shapes: w (H, R, K) contiguous, zero after each row's position -> (H, K) sums for
    offsets 0..K - 1.
    """
    h, r, k = w.shape
    span = k  # u from -(R - 1) up to first_row: K values
    rest = w.as_strided((h, r - 1, span), (r * k, k + 1, 1), w.storage_offset() + k + 1 - (r - 1)).sum(1)
    rest[:, r - 1:] += w[:, 0, :first_row + 1]  # row 0: u = j from 0 to first_row
    return rest.flip(-1)  # column u holds offset first_row - u: from offset 0 up

