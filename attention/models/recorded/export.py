"""Export, offline: the matrix on screen as CSV, everything about a sentence as .npz, and safe file names.

The .npz loads back with numpy alone (`np.load(path)`, no pickle): strings are stored as unicode arrays.
"""

from __future__ import annotations

import csv
import io
import re

import numpy as np

from attention.focus import ModelChoice
from attention.models.forward.model_attention import ModelAttention
from attention.models.recorded.views import MatrixView

NPZ_MAX_WEIGHTS = 20_000_000  # floats (80 MB) of weights per stack; above, q, k, v are stored to recompute them
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # a spreadsheet would run a cell starting so as a formula


def _cell_text(label: str) -> str:
    """A label as a CSV cell that a spreadsheet shows literally: a leading ' before =, +, -, @ (OWASP's
    advice against formula injection); the csv module quotes commas, quotes and newlines."""
    label = str(label)
    return "'" + label if label.startswith(FORMULA_START) else label


def matrix_csv(view: MatrixView, *, digits: int = 6) -> str:
    """One row per query (row label first), one column per key; masked cells are empty."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["query \\ key", *(_cell_text(c) for c in view.col_labels)])
    visible = np.ones(view.matrix.shape, bool) if view.mask is None else np.broadcast_to(view.mask, view.matrix.shape)
    for label, row, seen in zip(view.row_labels, view.matrix, visible, strict=True):
        writer.writerow([_cell_text(label), *(f"{v:.{digits}g}" if s else "" for v, s in zip(row, seen, strict=True))])
    return out.getvalue()


def sentence_npz(att: ModelAttention) -> bytes:
    """Everything for one sentence, compressed: text, model_name, tokens, token_ids, special, word_ids and
    offsets (when the tokenizer gave them), windows (each layer's sliding window, 0 for global), an image
    model's image_pixels (h, w, 3) uint8, image_pixel_values (C, h, w), image_grid (rows, cols, patch pixels),
    image_prefix (the tokens before the patches), image_labels and image_class_logits (a classifier's), and per
    attention stack (self; decoder and cross for an encoder-decoder model) `<stack>_weights` (L, H, n, m)
    float32; for inputs too long for that, `<stack>_q`, `_k`, `_v`, `_scale`, `_softcap` (0: none) and the
    masks: `_masks` (k, n, m), the distinct ones, with `_mask_of_layer` (L,) naming each layer's (-1: every
    key visible); weights = softmax(cap(q k^T * scale)), masked, with cap(s) = softcap * tanh(s / softcap)."""
    arrays = {
        "text": np.array(att.text), "model_name": np.array(att.model_name), "tokens": np.array(att.tokens, dtype=str),
        "token_ids": np.asarray(att.token_ids), "special": np.asarray(att.special),
    }
    if att.word_ids is not None:
        arrays["word_ids"], arrays["offsets"] = np.asarray(att.word_ids), np.asarray(att.offsets)
    if att.windows is not None:  # each layer's sliding window, 0 for a global layer
        arrays["windows"] = np.array([w or 0 for w in att.windows], dtype=np.int64)
    if att.image is not None:  # an image model's: the pixels, what the model read, the grid and its prefix
        im = att.image
        arrays.update(image_pixels=im.pixels, image_pixel_values=im.pixel_values,
                      image_grid=np.array([im.rows, im.cols, im.patch]), image_prefix=np.array(im.prefix, dtype=str),
                      image_labels=np.array(im.labels, dtype=str))
        if im.class_logits is not None:
            arrays["image_class_logits"] = im.class_logits
    if att.target_tokens is not None:
        arrays["target_tokens"] = np.array(att.target_tokens, dtype=str)
        arrays["target_ids"] = np.asarray(att.target_ids)
    for stack in ("self", "decoder", "cross"):
        s = getattr(att, f"{stack}_attn", None)
        if s is None:
            continue
        if s.n_layers * s.n_heads * s.n_queries * s.n_keys <= NPZ_MAX_WEIGHTS:
            arrays[f"{stack}_weights"] = np.stack([s.layer_weights(layer).cpu().numpy()
                                                   for layer in range(s.n_layers)]).astype(np.float32)
        else:
            distinct = {id(m): m for m in s.masks if m is not None}
            index = {key: i for i, key in enumerate(distinct)}
            arrays.update({f"{stack}_q": s.q, f"{stack}_k": s.k, f"{stack}_v": s.v,
                           f"{stack}_scale": np.array([s.scale_of(layer) for layer in range(s.n_layers)]),
                           f"{stack}_softcap": np.array([s.softcap_of(layer) or 0.0 for layer in range(s.n_layers)]),
                           f"{stack}_mask_of_layer": np.array([-1 if m is None else index[id(m)] for m in s.masks])})
            if distinct:
                arrays[f"{stack}_masks"] = np.stack(list(distinct.values()))
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def file_stem(*parts) -> str:
    """A file name from parts ("smollm2", "layer 3", "head 5" -> "smollm2_layer-3_head-5"): each part's runs
    of anything but ASCII letters and digits become one "-", parts are joined by "_", at most 100
    characters, so a model id or a token can never make a path, a hidden file or a header. A ModelChoice
    part is its model's name (and its precision when not "auto")."""
    named = (f"{p.name} {'' if p.dtype == 'auto' else p.dtype}" if isinstance(p, ModelChoice) else p for p in parts)
    cleaned = (re.sub(r"[^A-Za-z0-9]+", "-", str(p)).strip("-") for p in named if p is not None)
    stem = "_".join(c for c in cleaned if c)
    return stem[:100] or "attention"
