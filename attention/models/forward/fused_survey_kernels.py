"""The fused survey's two Triton kernels (attention.models.forward.fused_survey says what they add up).

Imported only where Triton is: a GPU, or the CPU under Triton's interpreter (TRITON_INTERPRET=1).
Shapes: one layer's q (H, n, d) and k (H_kv, m, d) in the model's dtype; tiles of BM query rows by BN keys.
"""

import triton
import triton.language as tl


@triton.jit
def _load_q(Q, h, qb, n, d, sqh, sqn, MASKED: tl.constexpr, BM: tl.constexpr, D: tl.constexpr,
            PAD: tl.constexpr):
    """A block of BM query rows (BM, D): bounds checked where MASKED (the last block) or PAD (D > d)."""
    rows = qb * BM + tl.arange(0, BM)
    dims = tl.arange(0, D)
    at = Q + h * sqh + rows[:, None] * sqn + dims[None, :]
    if MASKED or PAD:
        q = tl.load(at, mask=(rows[:, None] < n) & (dims[None, :] < d), other=0.0)
    else:
        q = tl.load(at)
    return q


@triton.jit
def _scores(q, K, kv_head, qb, kb, n, m, d, scale, skh, skm,
            MASKED: tl.constexpr, CAUSAL: tl.constexpr, WINDOW: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
            D: tl.constexpr, PAD: tl.constexpr):
    """Scaled scores of one tile (BM, BN) float32 from its query rows q (BM, D), and where each may be seen
    (weight 0 elsewhere): meaningful only for a MASKED tile; any other lies inside the text and its mask, and
    reads k without bounds."""
    rows = qb * BM + tl.arange(0, BM)
    cols = kb * BN + tl.arange(0, BN)
    dims = tl.arange(0, D)
    at = K + kv_head * skh + cols[None, :] * skm + dims[:, None]
    if MASKED or PAD:
        kt = tl.load(at, mask=(cols[None, :] < m) & (dims[:, None] < d), other=0.0)
    else:
        kt = tl.load(at)
    s = tl.dot(q, kt) * scale  # 16-bit q and k: products exact, sums in float32
    seen = (rows[:, None] < n) & (cols[None, :] < m)
    if CAUSAL:
        seen = seen & (cols[None, :] <= rows[:, None])
    if WINDOW > 0:
        seen = seen & (rows[:, None] - cols[None, :] < WINDOW)
    return s, seen, rows, cols


@triton.jit
def _lse_step(best, total, q, K, kv_head, qb, kb, n, m, d, scale, skh, skm,
              MASKED: tl.constexpr, CAUSAL: tl.constexpr, WINDOW: tl.constexpr, BM: tl.constexpr,
              BN: tl.constexpr, D: tl.constexpr, PAD: tl.constexpr):
    """The running maximum and sum of exponentials of a block's rows, after one more tile of keys."""
    s, seen, rows, cols = _scores(q, K, kv_head, qb, kb, n, m, d, scale, skh, skm,
                                  MASKED, CAUSAL, WINDOW, BM, BN, D, PAD)
    if MASKED:
        s = tl.where(seen, s, -1.0e30)
    new = tl.maximum(best, tl.max(s, 1))
    p = tl.exp(s - new[:, None])
    if MASKED:  # a row with nothing seen yet has new = -1e30: exp(0) where it must be 0
        p = tl.where(seen, p, 0.0)
    return new, total * tl.exp(best - new) + tl.sum(p, 1)


@triton.jit
def lse_kernel(Q, K, n, m, d, group, scale, sqh, sqn, skh, skm, LSE,
               CAUSAL: tl.constexpr, WINDOW: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
               D: tl.constexpr, PAD: tl.constexpr):
    """Each row's log-sum-exp of its scores. One program per (head, block of BM query rows), over its key
    blocks: the ones seen whole in a loop of their own (no masks, so Triton pipelines its loads), then those
    a mask cuts (before: beyond a sliding window; after: the diagonal, the last, ragged block)."""
    h = tl.program_id(0)
    qb = tl.program_id(1)
    n_qb = (n + BM - 1) // BM
    n_kb = (m + BN - 1) // BN
    kb_lo = 0
    kb_hi = n_kb
    whole_lo = 0
    whole_hi = n_kb - 1  # the last key block may be ragged
    if CAUSAL:
        kb_hi = tl.minimum(kb_hi, ((qb + 1) * BM + BN - 1) // BN)
        whole_hi = tl.minimum(whole_hi, (qb * BM + 1) // BN)  # no key after the block's first row
    if WINDOW > 0:
        kb_lo = tl.maximum(0, qb * BM - WINDOW + 1) // BN
        reach = qb * BM + BM - 1 - WINDOW  # key blocks starting at or before it hold a key beyond some window
        whole_lo = tl.where(reach >= 0, reach // BN + 1, 0)
    whole_lo = tl.minimum(tl.maximum(whole_lo, kb_lo), kb_hi)
    whole_hi = tl.where(qb == n_qb - 1, whole_lo, tl.maximum(whole_lo, whole_hi))  # the last, ragged row block
    kv_head = h // group
    best = tl.full((BM,), -1.0e30, tl.float32)
    total = tl.zeros((BM,), tl.float32)
    q = _load_q(Q, h, qb, n, d, sqh, sqn, True, BM, D, PAD)
    for kb in range(whole_lo, whole_hi):
        best, total = _lse_step(best, total, q, K, kv_head, qb, kb, n, m, d, scale, skh, skm,
                                False, CAUSAL, WINDOW, BM, BN, D, PAD)
    for kb in range(kb_lo, whole_lo):
        best, total = _lse_step(best, total, q, K, kv_head, qb, kb, n, m, d, scale, skh, skm,
                                True, CAUSAL, WINDOW, BM, BN, D, PAD)
    for kb in range(whole_hi, kb_hi):
        best, total = _lse_step(best, total, q, K, kv_head, qb, kb, n, m, d, scale, skh, skm,
                                True, CAUSAL, WINDOW, BM, BN, D, PAD)
    rows = qb * BM + tl.arange(0, BM)
    tl.store(LSE + h * n + rows, best + tl.log(tl.maximum(total, 1.0e-30)), mask=rows < n)  # padding rows: 0


@triton.jit
def _sums_step(acc, ws, Q, K, h, kv_head, qb, kb, n, m, d, scale, sqh, sqn, skh, skm, LSE,
               TILES, COLUMN_MASS, COLUMN_MAJORITY, block, n_tr, n_tc,
               MASKED: tl.constexpr, CAUSAL: tl.constexpr, WINDOW: tl.constexpr, BM: tl.constexpr,
               BN: tl.constexpr, D: tl.constexpr, PAD: tl.constexpr):
    """One tile's weights added to the sums: the band's (BM, BN) sum and per-row sums of w * s (returned),
    the keys' column sums and counts of w > 0.5, and the grid cells' maxima (atomically, in memory)."""
    q = _load_q(Q, h, qb, n, d, sqh, sqn, MASKED, BM, D, PAD)
    s, seen, rows, cols = _scores(q, K, kv_head, qb, kb, n, m, d, scale, skh, skm,
                                  MASKED, CAUSAL, WINDOW, BM, BN, D, PAD)
    if MASKED:
        lse = tl.load(LSE + h * n + rows, mask=rows < n, other=0.0)
        w = tl.where(seen, tl.exp(s - lse[:, None]), 0.0)
        ws += tl.sum(tl.where(seen, w * s, 0.0), 1)
        keys = cols < m
    else:
        lse = tl.load(LSE + h * n + rows)
        w = tl.exp(s - lse[:, None])
        ws += tl.sum(w * s, 1)
        keys = None  # every key
    acc += w
    tl.atomic_add(COLUMN_MASS + h * m + cols, tl.sum(w, 0), mask=keys, sem="relaxed")
    peak = tl.max(tl.max(w, 1), 0)
    if peak > 0.5:  # a key holds over half of some row's weight (sinks: few tiles)
        tl.atomic_add(COLUMN_MAJORITY + h * m + cols, tl.sum((w > 0.5).to(tl.float32), 0), mask=keys,
                      sem="relaxed")
    # The grid's cells the tile meets (a cell is at least a tile wide): most tiles lie in one, cell (r0, c0);
    # the others' rows before the cell row's end go to r0, the rest to r0 + 1, and keys likewise.
    r0 = (qb * BM) // block
    c0 = (kb * BN) // block
    at = TILES + h * n_tr * n_tc + r0 * n_tc + c0
    if ((qb * BM + BM - 1) // block == r0) & ((kb * BN + BN - 1) // block == c0):
        tl.atomic_max(at, peak, sem="relaxed")
    else:
        top = tl.arange(0, BM) < (r0 + 1) * block - qb * BM
        left = tl.arange(0, BN) < (c0 + 1) * block - kb * BN
        by_key_top = tl.max(tl.where(top[:, None], w, 0.0), 0)  # (BN,)
        by_key_low = tl.max(tl.where(top[:, None], 0.0, w), 0)
        tl.atomic_max(at, tl.max(tl.where(left, by_key_top, 0.0), 0), sem="relaxed")
        tl.atomic_max(at + 1, tl.max(tl.where(left, 0.0, by_key_top), 0), mask=c0 + 1 < n_tc, sem="relaxed")
        tl.atomic_max(at + n_tc, tl.max(tl.where(left, by_key_low, 0.0), 0), mask=r0 + 1 < n_tr,
                      sem="relaxed")
        tl.atomic_max(at + n_tc + 1, tl.max(tl.where(left, 0.0, by_key_low), 0),
                      mask=(r0 + 1 < n_tr) & (c0 + 1 < n_tc), sem="relaxed")
    return acc, ws


@triton.jit
def sums_kernel(Q, K, n, m, d, group, scale, sqh, sqn, skh, skm, LSE, ORDER, first,
                TILES, WS, COLUMN_MASS, COLUMN_MAJORITY, BANDS, block, n_tr, n_tc, n_qb, n_kb,
                CAUSAL: tl.constexpr, WINDOW: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                D: tl.constexpr, PAD: tl.constexpr):
    """The survey's sums from the weights exp(s - lse). One program per (head, band: query block - key block
    constant, ORDER[program] - first its place in BANDS), over the band's tiles."""
    h = tl.program_id(0)
    band = tl.load(ORDER + tl.program_id(1))
    kv_head = h // group
    qb_lo = tl.maximum(0, band)
    qb_hi = tl.minimum(n_qb, n_kb + band)
    # A band's tiles share their offsets: all need the mask (the diagonal band, one a sliding window cuts) or
    # only the last (the text's ragged end), which the second loop takes.
    masked = band < 1 - n_kb  # False: no band starts there
    if WINDOW > 0:
        masked = band * BM + BM - 1 >= WINDOW
    if CAUSAL:
        masked = masked | (band == 0)
    split = tl.where(masked, qb_lo, qb_hi - 1)
    acc = tl.zeros((BM, BN), tl.float32)
    ws = tl.zeros((BM,), tl.float32)
    for qb in range(qb_lo, split):
        acc, ws = _sums_step(acc, ws, Q, K, h, kv_head, qb, qb - band, n, m, d, scale, sqh, sqn, skh, skm, LSE,
                             TILES, COLUMN_MASS, COLUMN_MAJORITY, block, n_tr, n_tc,
                             False, CAUSAL, WINDOW, BM, BN, D, PAD)
    for qb in range(split, qb_hi):
        acc, ws = _sums_step(acc, ws, Q, K, h, kv_head, qb, qb - band, n, m, d, scale, sqh, sqn, skh, skm, LSE,
                             TILES, COLUMN_MASS, COLUMN_MAJORITY, block, n_tr, n_tc,
                             True, CAUSAL, WINDOW, BM, BN, D, PAD)
    out = BANDS + (h * tl.num_programs(1) + (band - first)) * BM * BN
    tl.store(out + tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :], acc)
    tl.atomic_add(WS + h, tl.sum(ws, 0).to(tl.float64), sem="relaxed")
