"""Two results of one text compared head by head: how far each head's weights moved.

For each head, the distance is the mean over query rows of the Jensen–Shannon divergence (base 2: 0 for the
same row, 1 for rows with no key in common) between the two results' weight rows. Same tokens and layout
(one model in two precisions, two checkpoints of one tokenizer): each head against the same head of the other.
Two models or tokenizers (`words=True`): rows and keys grouped into the text's words (attention.models.
word_level; special tokens left out and each row rescaled to sum to 1), and each head of A matched to its
nearest head of B.

    >>> from attention.models import compare_heads
    >>> cmp = compare_heads(att_float32, att_bfloat16)
    >>> cmp.largest(5)        # [(layer, head, distance)], 0-based, largest first
    >>> pair = head_pair(att_float32, att_bfloat16, cmp, 3, 5)   # the two heads and B − A, side by side

`head_change` sets any other measure of heads (role scores, direct shares, effects of removing a head) of A
beside its counterpart's in B: the same head, or for two tokenizers the head of B nearest to it (`match`). Where
the heads do not correspond (two models compared on words), `own_strongest` sets each model's own strongest
heads by the measure side by side instead: a head of one model set against the head of another nearest to it
on one short text says little about either (SmolLM2's induction heads against Gemma 3's nearest heads read as
if Gemma 3 had none, while Gemma 3's own probe finds strong ones).

`compare_results` picks the reading (tokens when both read the same tokens with the same heads, else
words); `comparison_npz` saves a comparison with both results in one file that `load_comparison` reopens
without either model.

Shapes: L layers, H heads (of A; B's are Lb, Hb), n rows, m keys.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass

import numpy as np
import torch

from attention.models.forward.model_attention import ModelAttention, shown_tokens
from attention.models.recorded.imported import NPZ_MAX_BYTES, export_npz, load_npz
from attention.models.recorded.views import MAX_SHOWN, MatrixView, block_labels, drop_tokens, pool_mask, pool_max
from attention.models.recorded.words import word_groups, word_level
from attention.naming import head_name, head_words

ROWS_AT_ONCE = 256  # query rows of one layer compared at a time (tokens): (H, 256, m) float64 in memory


@dataclass(frozen=True)
class HeadComparison:
    """How far each head of A is from B."""

    labels: tuple[str, ...]  # the tokens (or words) both results were compared on
    distance: np.ndarray  # (L, H) mean JSD of each head of A from the same head of B (or, matched, its nearest)
    words: bool  # compared on words (two models or tokenizers)
    match: np.ndarray | None = None  # (L, H, 2) int: B's (layer, head) nearest each head of A (words=True)
    match_distance: np.ndarray | None = None  # (L, H) its distance (words=True)

    def largest(self, k: int = 10) -> list[tuple[int, int, float]]:
        """The k heads that moved most: [(layer, head, distance)], 0-based, largest first."""
        flat = np.argsort(-self.distance, axis=None, kind="stable")[:k]
        return [(int(i), int(j), float(self.distance[i, j]))
                for i, j in zip(*np.unravel_index(flat, self.distance.shape), strict=True)]


def js_divergence(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Jensen–Shannon divergence in bits between rows of weights: H(m) - (H(p) + H(q)) / 2 with m = (p + q) / 2
    and H the entropy in bits, in float64 (equal to the mean of the two KL divergences from m; one logarithm
    per entry instead of two). Shapes: p, q (..., m), broadcast -> (...)."""
    p, q = _float64(p), _float64(q)
    return _jsd(p, q, _entropy(p), _entropy(q))


def _float64(x) -> torch.Tensor:
    return x.double() if isinstance(x, torch.Tensor) else torch.from_numpy(np.asarray(x, np.float64))


def _entropy(p: torch.Tensor) -> torch.Tensor:
    """Entropy in bits of each row. Shapes: (..., m) -> (...)."""
    return -torch.special.xlogy(p, p).sum(-1) / math.log(2)


def _jsd(p: torch.Tensor, q: torch.Tensor, hp: torch.Tensor, hq: torch.Tensor) -> np.ndarray:
    """The JSD of rows p and q whose entropies are hp and hq (computed once where a row meets many)."""
    return (_entropy((p + q) / 2) - (hp + hq) / 2).clamp(0.0, 1.0).numpy()


def compare_heads(att_a: ModelAttention, att_b: ModelAttention, *, words: bool = False) -> HeadComparison:
    """Every head of `att_a` against `att_b` on the same text (module docstring). ValueError when the two
    cannot be compared: other tokens (words=False), other words (words=True)."""
    if not words:
        if tuple(att_a.tokens) != tuple(att_b.tokens):
            raise ValueError("the two results have different tokens: compare them on words (words=True)")
        if (att_a.n_layers, att_a.n_heads) != (att_b.n_layers, att_b.n_heads):
            raise ValueError(f"A has {att_a.n_layers} layers × {att_a.n_heads} heads and B {att_b.n_layers} × "
                             f"{att_b.n_heads}: compare them on words (words=True), each head matched")
        distance = np.stack([_layer_distance(att_a, att_b, layer) for layer in range(att_a.n_layers)])  # (L, H)
        return HeadComparison(tuple(att_a.tokens), distance, words=False)
    labels, wa = _words(att_a)
    labels_b, wb = _words(att_b)
    if [w.lower() for w in labels] != [w.lower() for w in labels_b]:
        raise ValueError(f"the two results read different words ({len(labels)} and {len(labels_b)}): they must "
                         "be of the same text")
    pair = np.empty(wa.shape[:2] + wb.shape[:2])  # (L, H, Lb, Hb): every head of A against every head of B
    wa, wb = _float64(wa), _float64(wb)
    ha, hb = _entropy(wa), _entropy(wb)  # each row's entropy, once
    for layer in range(wa.shape[0]):  # a head of A at a time: (Lb, Hb, W, W) in memory, not (L, H, Lb, Hb, W, W)
        for head in range(wa.shape[1]):
            pair[layer, head] = _jsd(wa[layer, head], wb, ha[layer, head], hb).mean(axis=-1)
    nearest = pair.reshape(*pair.shape[:2], -1).argmin(axis=-1)  # (L, H) into B's flat heads
    match = np.stack(np.unravel_index(nearest, pair.shape[2:]), axis=-1)  # (L, H, 2)
    match_distance = np.take_along_axis(pair.reshape(*pair.shape[:2], -1), nearest[..., None], -1)[..., 0]
    same = wa.shape[:2] == wb.shape[:2]
    distance = np.einsum("lhlh->lh", pair) if same else match_distance
    return HeadComparison(labels, distance, words=True, match=match, match_distance=match_distance)


def _layer_distance(att_a: ModelAttention, att_b: ModelAttention, layer: int) -> np.ndarray:
    """(H,) each head's mean JSD over the query rows of one layer, ROWS_AT_ONCE rows at a time."""
    n = len(att_a.tokens)
    total = np.zeros(att_a.n_heads)
    for start in range(0, n, ROWS_AT_ONCE):
        rows = slice(start, min(start + ROWS_AT_ONCE, n))
        wa, wb = (att.self_attn.layer_weights(layer, rows=rows) for att in (att_a, att_b))
        total += js_divergence(wa.cpu(), wb.cpu()).sum(axis=-1)
    return total / n


def same_layout(att_a: ModelAttention, att_b: ModelAttention) -> bool:
    """The two results read the same tokens with as many layers and heads: they compare head by head, token
    by token (one model in two precisions, two checkpoints of one model)."""
    return tuple(att_a.tokens) == tuple(att_b.tokens) and (att_a.n_layers, att_a.n_heads) == (
        att_b.n_layers, att_b.n_heads)


def compare_results(att_a: ModelAttention, att_b: ModelAttention) -> HeadComparison:
    """compare_heads on tokens where the two results share their layout (same_layout), else on words."""
    return compare_heads(att_a, att_b, words=not same_layout(att_a, att_b))


@dataclass(frozen=True)
class HeadPair:
    """One head of A beside its counterpart in B (the same head, or on words its nearest), and how they differ."""

    layer: int  # A's head, 0-based
    head: int
    b_layer: int  # B's head it is compared with
    b_head: int
    a: MatrixView  # A's weights (tokens or words; block maxima past MAX_SHOWN)
    b: MatrixView  # B's, on the same rows and columns
    difference: MatrixView  # B − A (signed; in blocks, the largest change of each block, with its sign)
    row_distance: np.ndarray  # (rows,) each query row's JSD between A and B, bits (their mean: `distance`)
    labels: tuple[str, ...]  # the rows' tokens or words (all of them, not pooled)

    @property
    def distance(self) -> float:
        """The mean of row_distance over the query rows (bits)."""
        return float(self.row_distance.mean())


def head_pair(att_a: ModelAttention, att_b: ModelAttention, comparison: HeadComparison, layer: int,
              head: int, *, max_shown: int = MAX_SHOWN) -> HeadPair:
    """Head (layer, head) of A and its counterpart in B (`comparison.match` on words), side by side."""
    att_a.check_head(layer, head)
    if comparison.words:
        b_layer, b_head = (int(x) for x in comparison.match[layer, head])
        labels, wa, mask_a = _word_head(att_a, layer, head)
        labels_b, wb, mask_b = _word_head(att_b, b_layer, b_head)
        if [w.lower() for w in labels] != [w.lower() for w in labels_b]:
            raise ValueError("the two results read different words: they must be of the same text")
        mask = mask_a if mask_b is None else mask_b if mask_a is None else mask_a | mask_b  # seen by A or B
    else:
        b_layer, b_head = layer, head
        labels = shown_tokens(att_a)
        wa, wb = (att.head_weights(layer, head).astype(np.float64) for att in (att_a, att_b))
        mask = att_a.self_attn.mask_of(layer)
    row_distance = js_divergence(wa, wb)
    b_label = f"{head_words(b_layer, b_head)}"
    shown_a, block = pool_max(wa, max_shown)
    shown_b, _ = pool_max(wb, max_shown)
    shown_mask = None if mask is None else pool_mask(mask, max_shown)
    names = block_labels(labels, block)
    unit = "words" if comparison.words else "tokens"
    suffix = f" (block maxima of {block}×{block})" if block > 1 else ""

    def view(matrix, title, value_name="weight", zmax=1.0):
        return MatrixView(matrix=matrix, row_labels=names, col_labels=names, mask=shown_mask, title=title + suffix,
                          value_name=value_name, zmax=zmax, block=block)

    return HeadPair(
        layer, head, b_layer, b_head,
        a=view(shown_a, f"A: {head_words(layer, head)}"),
        b=view(shown_b, f"B: {b_label}" + (" (nearest on words)" if comparison.words else "")),
        difference=view(_pool_signed(wb - wa, max_shown), f"B − A, on {unit}", "change in weight", None),
        row_distance=row_distance, labels=labels)


def _word_head(att: ModelAttention, layer: int, head: int):
    """One head between the text's words without special tokens, rows rescaled to 1 (as _words), and which
    word pairs its mask lets it see (None: all). Shapes: -> (words, (W, W) float64, (W, W) bool | None)."""
    groups = word_groups(att)
    keep = ~np.asarray(groups.special, bool)
    merged = drop_tokens(groups.merge(att.head_weights(layer, head)).astype(np.float64), keep)
    mask = groups.merge_mask(att.self_attn.mask_of(layer))
    return (tuple(word for word, k in zip(groups.words, keep, strict=True) if k), merged,
            None if mask is None else mask[keep][:, keep])


def _pool_signed(d: np.ndarray, size: int) -> np.ndarray:
    """Blocks of a signed matrix, each the value of largest magnitude in it (its sign kept). (n, m) -> pooled."""
    top, _ = pool_max(d, size)
    bottom, _ = pool_max(-d, size)
    return np.where(top >= bottom, top, -bottom)


def _words(att: ModelAttention) -> tuple[tuple[str, ...], np.ndarray]:
    """The text's words without special tokens, and (L, H, W, W) weights between them, rows rescaled to 1."""
    w = word_level(att)
    keep = ~np.asarray(w.special, bool)
    weights = drop_tokens(w.weights.astype(np.float64), keep)
    return tuple(word for word, k in zip(w.words, keep, strict=True) if k), weights


COMPARISON_FORMAT = 1  # the version comparison_npz writes


@dataclass(frozen=True)
class SavedComparison:
    """A comparison reopened from its file: both results as they were saved, and the comparison itself."""

    a: ModelAttention
    b: ModelAttention
    comparison: HeadComparison
    label_a: str  # what the two were, in words ("SmolLM2-135M in float32")
    label_b: str


def comparison_npz(att_a: ModelAttention, att_b: ModelAttention, comparison: HeadComparison, *,
                   label_a: str = "", label_b: str = "") -> bytes:
    """One file (an .npz: numpy reads it) holding a comparison and both results, each as export_npz writes
    it (`a_npz`, `b_npz`, bytes), with `distance` (L, H), `words`, `labels`, and on words `match` (L, H, 2)
    and `match_distance` (L, H). load_comparison reopens it without either model."""
    arrays = {"format": np.array(COMPARISON_FORMAT), "a_npz": np.frombuffer(export_npz(att_a), np.uint8),
              "b_npz": np.frombuffer(export_npz(att_b), np.uint8), "distance": comparison.distance,
              "words": np.array(comparison.words), "labels": np.array(comparison.labels, dtype=str),
              "label_a": np.array(label_a or att_a.model_name), "label_b": np.array(label_b or att_b.model_name)}
    if comparison.words:
        arrays.update(match=comparison.match, match_distance=comparison.match_distance)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # the two results inside are compressed already
    return buffer.getvalue()


def load_comparison(data: bytes, *, max_bytes: int = 2 * NPZ_MAX_BYTES) -> SavedComparison:
    """A comparison from the file comparison_npz wrote; no pickle is read. ValueError, saying what is wrong, for
    a file too large, not such a file, or whose parts do not fit together (each result is checked as load_npz
    checks a result)."""
    if len(data) > max_bytes:
        raise ValueError(f"The file has {len(data) / 1e6:,.0f} MB; comparisons up to {max_bytes / 1e6:,.0f} MB "
                         "open here.")
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
    except Exception as err:  # not a zip, cut short, pickled objects: all unreadable here
        raise ValueError(f"This is not a comparison this app wrote ({type(err).__name__}).") from None
    missing = [k for k in ("format", "a_npz", "b_npz", "distance", "words", "labels") if k not in arrays]
    if missing:
        raise ValueError(f"This is not a comparison this app wrote: it has no {', '.join(missing)}.")
    if int(arrays["format"]) != COMPARISON_FORMAT:
        raise ValueError(f"This comparison's format is {int(arrays['format'])}; this app reads {COMPARISON_FORMAT}.")
    a, b = (load_npz(arrays[k].astype(np.uint8).tobytes()) for k in ("a_npz", "b_npz"))
    words = bool(arrays["words"])
    distance = np.asarray(arrays["distance"], np.float64)
    if distance.shape != (a.n_layers, a.n_heads):
        raise ValueError(f"distance is {distance.shape}, not A's {a.n_layers} layers × {a.n_heads} heads")
    match = match_distance = None
    if words:
        match, match_distance = np.asarray(arrays["match"], np.int64), np.asarray(arrays["match_distance"])
        if match.shape != (*distance.shape, 2) or (match < 0).any() or (match[..., 0] >= b.n_layers).any() \
                or (match[..., 1] >= b.n_heads).any():
            raise ValueError("match must name a head of B for each head of A")
    elif not same_layout(a, b):
        raise ValueError("a comparison on tokens needs two results with the same tokens, layers and heads")
    comparison = HeadComparison(tuple(str(t) for t in arrays["labels"]), distance, words, match, match_distance)
    return SavedComparison(a, b, comparison, str(arrays.get("label_a", a.model_name)),
                           str(arrays.get("label_b", b.model_name)))


# --- Any measure of heads, A beside B ---------------------------------------------------------------------

HEAD_MEASURES = {  # what Compare two models measures in both: key -> (label, what it is)
    "roles": ("Head roles", "Role scores on the induction probe (the Head atlas's), 0 to 1."),
    "direct": ("Direct share of the logit difference", "What each head writes straight into logit(target) − "
               "logit(foil) at the last position, through the final norm and the unembedding (What heads do)."),
    "ablation": ("Effect of removing the head", "How much logit(target) − logit(foil) changes when the head's "
                 "output is zeroed, the rest of the model run again (Predictions and head effects)."),
}


@dataclass(frozen=True)
class HeadChange:
    """One measure of each head of A beside its counterpart's in B. Shapes: (L, H) of A's heads."""

    a: np.ndarray  # (L, H) A's values
    b: np.ndarray  # (L, H) the value of each A head's counterpart in B
    counterpart: np.ndarray  # (L, H, 2) int: B's (layer, head) for each head of A

    @property
    def change(self) -> np.ndarray:
        """(L, H) B's value minus A's."""
        return self.b - self.a

    def largest(self, k: int = 10) -> list[tuple[int, int, float]]:
        """The k heads whose value changed most (either way): [(layer, head, B − A)], 0-based."""
        change = self.change
        flat = np.argsort(-np.abs(change), axis=None, kind="stable")[:k]
        return [(int(i), int(j), float(change[i, j]))
                for i, j in zip(*np.unravel_index(flat, change.shape), strict=True)]


@dataclass(frozen=True)
class OwnStrongest:
    """Each model's own strongest heads by one measure, side by side: what a comparison shows where the two
    models' heads do not correspond (other shapes or other tokens: compared on words), so that no head of A
    is the same head in B and a head-by-head difference would set unrelated heads against each other."""

    a: tuple[tuple[int, int, float], ...]  # (layer, head, value) of A's strongest heads, 0-based, strongest first
    b: tuple[tuple[int, int, float], ...]  # B's, by B's own values
    signed: bool  # ranked by size, either sign (shares, effects); else by value (role scores)

    def rows(self) -> list[dict]:
        """One table row per rank: A's head and value beside B's ("L6H2", from 1)."""
        rows = []
        for rank in range(max(len(self.a), len(self.b))):
            row = {"rank": rank + 1}
            for side, found in (("A", self.a), ("B", self.b)):
                layer, head, value = found[rank] if rank < len(found) else (None, None, None)
                row[f"head of {side}"] = "" if layer is None else head_name(layer, head)
                row[f"{side}'s value"] = value
            rows.append(row)
        return rows


def own_strongest(values_a, values_b, k: int = 5, *, signed: bool = False) -> OwnStrongest:
    """The k strongest heads of A by A's values and of B by B's, each model's own: the largest values
    (signed=False: role scores, 0 to 1), or the largest in size, either sign (signed=True: direct shares,
    effects of removing a head). Shapes: values_a (L, H), values_b (Lb, Hb): any two shapes."""
    def strongest(values) -> tuple[tuple[int, int, float], ...]:
        values = np.asarray(values, dtype=np.float64)
        order = np.argsort(-(np.abs(values) if signed else values), axis=None, kind="stable")[:k]
        return tuple((int(i), int(j), float(values[i, j])) for i, j in zip(*np.unravel_index(order, values.shape),
                                                                            strict=True))
    return OwnStrongest(strongest(values_a), strongest(values_b), signed)


def head_change(values_a, values_b, match: np.ndarray | None = None) -> HeadChange:
    """Each head of A's value beside its counterpart's in B: the same head (`match` None: both (L, H) alike),
    else B's head match[layer, head]. ValueError when neither says which head of B to read."""
    a, b = np.asarray(values_a, dtype=np.float64), np.asarray(values_b, dtype=np.float64)
    if match is None:
        if a.shape != b.shape:
            raise ValueError(f"A has {a.shape[0]} × {a.shape[1]} heads and B {b.shape[0]} × {b.shape[1]}: give each "
                             "head of A its counterpart in B (match)")
        layers, heads = np.indices(a.shape)
        match = np.stack([layers, heads], axis=-1)
    match = np.asarray(match, dtype=np.int64)
    if match.shape != (*a.shape, 2):
        raise ValueError(f"match must be (L, H, 2) for A's {a.shape[0]} × {a.shape[1]} heads, not {match.shape}")
    return HeadChange(a, b[match[..., 0], match[..., 1]], match)
