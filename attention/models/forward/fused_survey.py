"""The head survey's sums of one layer in two fused passes on a GPU (Triton), from q and k where the model
left them: no layer's weights are ever written to memory.

The survey's sums (attention.models.forward.survey_sums.SurveySums) made from chunks of weights in torch ops
read and write each chunk a dozen times (softmax, its maxima, the entropy's product, the grid's block maxima,
column sums, the diagonal sums' skewed copy): at 32,768 tokens a 1B model's survey is ~10^12 bytes of
memory traffic, ~5 s on an H100, against ~0.3 s of arithmetic. Here each tile of weights lives in
registers only (the kernels are in attention.models.forward.fused_survey_kernels):

1. `lse_kernel`, one program per (head, block of query rows): each row's log-sum-exp of its scores, as a
   flash-attention forward pass makes it (running maximum and sum).
2. `sums_kernel`, one program per (head, diagonal band of tiles): for the tiles (query block b, key block
   b - band) it recomputes the scores, takes the weights exp(s - lse) and adds each row's sum of w * s
   (entropy = lse - sum w s), each key's column sum and count of w > 0.5 (sinks), the grid's block maxima
   (a tile meets at most 2 x 2 grid cells, as cells are at least a tile wide), and the tile itself into one
   (B, B) sum per band: every tile of a band holds the same offsets (query - key) at the same places, so the
   band's sum, skewed once afterwards in torch, gives attention by distance exactly per offset without a
   scattered write per weight.

Used where it gives the same numbers as the torch path (tests/test_cuda.py holds it to that): on a CUDA
device with Triton, for q and k in 16 bits (bfloat16, float16: their products are exact on the tensor cores;
float32's would run without them, and measured slower than the torch path), layers whose mask is none,
exactly causal or a causal sliding window, without a soft cap, from FUSED_MIN_TOKENS tokens (below, the
torch path takes milliseconds). On an H100, a 1B model's grid at 32,768 tokens went from 6.7 s to 0.93 s
(benchmarks/NOTES.md). On the CPU, Triton's interpreter runs the same kernels (TRITON_INTERPRET=1 from the
process's start: tests/test_fused_survey.py, small sizes).

Shapes: H query heads, H_kv key heads, n queries, m keys, d head size, B tile side (rows = keys).
"""

from __future__ import annotations

import contextlib
import functools
import os
import warnings

import numpy as np
import torch

from attention.models.forward.device_arrays import DeviceArray
from attention.models.forward.survey_sums import diagonal_sums

TILE = 64  # B: query rows and keys of one tile of the sums' pass (a band's tiles must be square)
WARPS = 2  # warps per program of the sums' pass (Triton's num_warps): measured on an H100 at 32,768 tokens
LSE_TILE, LSE_WARPS = (64, 64), 4  # query rows, keys of the log-sum-exp pass's tiles; its warps
FUSED_MIN_TOKENS = 2_048  # from this length on (grid cells are then at least a tile wide: block >= n / 32)


@functools.cache
def _triton():
    """(triton, the kernels' module), or None where Triton cannot be imported."""
    try:
        import triton

        from attention.models.forward import fused_survey_kernels
    except ImportError:
        return None
    return triton, fused_survey_kernels


def interpreted() -> bool:
    """Triton runs on the CPU, interpreted (TRITON_INTERPRET=1, set before Triton is first imported)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def available(device: torch.device) -> bool:
    """The fused passes can run on `device`: a GPU with Triton, or the CPU under Triton's interpreter."""
    if device.type == "cuda" or (device.type == "cpu" and interpreted()):
        return _triton() is not None
    return False


def band_window(s, layer: int) -> int | None:
    """How the layer's mask lets queries see keys, in the fused passes' terms: 0 for every key (no mask) or
    exactly causal (`s.causal` says which), W for a causal sliding window of W keys (query i sees
    i - W + 1 .. i), None for any other mask (the torch path then). Checked on the mask itself, on its
    device. `s` is an AttentionStack (attention.models.forward.model_attention)."""
    mask = s.mask_of(layer)
    if mask is None:
        return None if s.causal else 0
    if s.exactly_causal[layer]:  # the kernels read causality from the stack: a stack that is not causal
        return 0 if s.causal else None  # as a whole (another layer sees every key) goes the torch way
    n, m = s.n_queries, s.n_keys
    if not s.causal or n != m:
        return None
    visible = mask.tensor if isinstance(mask, DeviceArray) else torch.from_numpy(np.asarray(mask))
    window = int(visible[-1].sum())
    if window < 1:
        return None
    rows = torch.arange(n, device=visible.device)
    for start in range(0, n, 4096):  # (4096, m) bools at a time
        i = rows[start:start + 4096, None]
        band = (rows[None, :] <= i) & (i - rows[None, :] < window)
        if not torch.equal(band, visible[start:start + 4096]):
            return None
    return window


def supported(s, layer: int, block: int) -> int | None:
    """The layer's band_window when the fused passes can survey it (Triton on the device, q and k captured in
    16 bits, no soft cap, long enough that a grid cell is at least a tile wide), else None."""
    if s.q is None or s.own_weights is not None or s.softcap_of(layer) is not None or block < TILE:
        return None
    if s.n_queries < FUSED_MIN_TOKENS or not available(_device(s.q)):
        return None
    q = _layer(s.q, layer)
    if q.dtype == torch.float32 and not interpreted():
        return None  # full-precision products run without tensor cores: slower than the torch path (NOTES)
    if _failed.get(_variant(q)):
        return None
    return band_window(s, layer)


_failed: dict[tuple, str] = {}  # (device, dtype, head size) -> why the kernels could not run there


def _variant(q: torch.Tensor) -> tuple:
    return str(q.device), str(q.dtype), q.shape[-1]


def try_layer_sums(s, layer: int, block: int, window: int) -> dict[str, torch.Tensor] | None:
    """layer_sums, or None when the kernels cannot run on this device (a GPU with too little shared memory
    for the head size, a Triton that cannot compile them): said once, as a warning, and the torch path
    surveys this kind of layer from then on. The numbers are the same either way."""
    try:
        return layer_sums(s, layer, block, window)
    except Exception as err:  # noqa: BLE001 - any failure of the kernels: the torch path is exact
        q = _layer(s.q, layer)
        _failed[_variant(q)] = f"{type(err).__name__}: {err}"
        warnings.warn(f"the fused survey could not run on {q.device} ({q.dtype}, head size {q.shape[-1]}): "
                      f"{type(err).__name__}: {str(err)[:300]}; surveying with torch operations instead",
                      stacklevel=2)
        return None


def _device(a) -> torch.device:
    return a.tensor.device if isinstance(a, DeviceArray) else torch.device("cpu")


def _layer(a, layer: int) -> torch.Tensor:
    """One layer of q or k as the kernels read it: in place and in the model's dtype where it is kept."""
    t = a.tensor[layer] if isinstance(a, DeviceArray) else torch.from_numpy(np.asarray(a[layer]))
    return t if t.stride(-1) == 1 else t.contiguous()


def layer_sums(s, layer: int, block: int, window: int) -> dict[str, torch.Tensor]:
    """One layer's survey sums from the fused passes, on q's device: "tiles" (H, ceil(n / block),
    ceil(m / block)) block maxima, "entropy" (H,) summed row entropies, "column_mass" (H, m) and
    "column_majority" (H, m) column sums of the weights and of w > 0.5, "offset_mass" (H, n + m - 1) summed
    weight at each offset query - key from -(m - 1) up: SurveySums's names and meanings, float64 but the
    tiles. `window` is band_window's answer (0: causal or full, as s.causal says)."""
    triton, kernels = _triton()
    q, k = _layer(s.q, layer), _layer(s.k, layer)
    (H, n, d), (h_kv, m, _) = q.shape, k.shape
    device, B = q.device, TILE
    if q.dtype == torch.float32 and not interpreted():  # tl.dot would round float32 to TF32 (supported())
        raise ValueError("the fused survey takes 16-bit q and k on a GPU")
    causal = bool(s.causal)
    n_qb, n_kb = -(-n // B), -(-m // B)
    if causal:  # bands (query block - key block) 0.., as far as the window reaches
        first = 0
        last = n_qb - 1 if window == 0 else min(n_qb - 1, -(-(window - 1) // B))
    else:
        first, last = -(n_kb - 1), n_qb - 1
    d_pad = max(16, triton.next_power_of_2(d))
    common = dict(CAUSAL=causal, WINDOW=window, D=d_pad, PAD=d_pad != d)
    args = (q, k, n, m, d, H // h_kv, float(s.scale_of(layer)), q.stride(0), q.stride(1), k.stride(0), k.stride(1))

    with torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext():  # Triton launches
        return _launch(kernels, q, k, device, args, common, first, last, n_qb, n_kb, block)  # on the current GPU


def _launch(kernels, q, k, device, args, common, first, last, n_qb, n_kb, block) -> dict[str, torch.Tensor]:
    """layer_sums's two kernels and the offsets' skew, on `device` (the current GPU)."""
    (H, n, _), m, B = q.shape, k.shape[1], TILE
    n_bands = last - first + 1
    lse = torch.empty(H, n, dtype=torch.float32, device=device)
    rows, keys = LSE_TILE
    kernels.lse_kernel[(H, -(-n // rows))](*args, lse, **common, BM=rows, BN=keys, num_warps=LSE_WARPS)

    n_tr, n_tc = -(-n // block), -(-m // block)
    tiles = torch.zeros(H, n_tr, n_tc, dtype=torch.float32, device=device)
    ws = torch.zeros(H, dtype=torch.float64, device=device)
    column_mass = torch.zeros(H, m, dtype=torch.float32, device=device)
    column_majority = torch.zeros(H, m, dtype=torch.float32, device=device)
    bands = torch.zeros(H, n_bands, B, B, dtype=torch.float32, device=device)
    order = _longest_first(first, last, n_qb, n_kb).to(device)
    kernels.sums_kernel[(H, n_bands)](*args, lse, order, first, tiles, ws, column_mass, column_majority, bands,
                                      block, n_tr, n_tc, n_qb, n_kb, **common, BM=B, BN=B, num_warps=WARPS)

    _, diagonals = diagonal_sums(bands.view(H * n_bands, B, B), 0, False)  # (H * bands, 2B - 1): r - c from -(B - 1)
    at = (torch.arange(first, last + 1, device=device)[:, None] * B
          + torch.arange(-(B - 1), B, device=device)[None, :] + m - 1)  # (bands, 2B - 1) into offset_mass
    inside = (at >= 0) & (at < n + m - 1)  # tiles' padding rows and keys hold no weight
    offset_mass = torch.zeros(H, n + m - 1, dtype=torch.float64, device=device)
    offset_mass.index_add_(1, at[inside], diagonals.view(H, n_bands, 2 * B - 1)[:, inside].double())
    return {"tiles": tiles, "entropy": lse.double().sum(-1) - ws, "column_mass": column_mass.double(),
            "column_majority": column_majority.double(), "offset_mass": offset_mass}


def _longest_first(first: int, last: int, n_qb: int, n_kb: int) -> torch.Tensor:
    """The bands first..last ordered by how many tiles they hold, most first: programs start in launch
    order, so the longest ones do not start last and hold up the end. Shapes: -> (bands,) int32."""
    bands = np.arange(first, last + 1)
    length = np.minimum(n_qb, n_kb + bands) - np.maximum(0, bands)
    return torch.from_numpy(bands[np.argsort(-length, kind="stable")].astype(np.int32))
