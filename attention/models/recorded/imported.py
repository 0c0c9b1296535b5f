"""Results made elsewhere: a model's own `output_attentions` (`from_attentions`), and the .npz the app and
`export_npz` write (`load_npz`). Both give the ModelAttention the package's own models give, so every
view and figure works on them, without the model.

    >>> out = model(**batch, output_attentions=True)                  # any transformers model, any machine
    >>> att = from_attentions(tokens, out.attentions, attention_mask=batch["attention_mask"])
    >>> figures.grid(att)

A result read this way holds the weights themselves (L x H x n x m floats), not q and k: what needs q, k
and v (one head step by step, the norm view) says so. A .npz written for a long input holds q, k, v and
the masks instead, and is rebuilt exactly as the app rebuilds it.

Shapes: L layers, H heads, n query tokens, m key tokens, B batch.
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib

import numpy as np
from numpy.lib import format as npy

from attention.models.forward.attention_stack import AttentionStack
from attention.models.forward.images import ImagePatches, token_names
from attention.models.forward.model_attention import ModelAttention
from attention.models.recorded.export import sentence_npz

NPZ_MAX_BYTES = 200_000_000  # a file larger than this is refused before it is read
NPZ_MAX_FLOATS = 400_000_000  # and arrays holding more values than this (1.6 GB of float32) once read
UNREADABLE = (zipfile.BadZipFile, OSError, EOFError, ValueError, zlib.error, struct.error, NotImplementedError,
              RuntimeError, KeyError)  # what zipfile and numpy raise on a damaged or odd zip (an encrypted member:
# RuntimeError; an unknown compression: NotImplementedError; bad deflate data: zlib.error)
NPZ_MAX_UNPACKED = 4 * NPZ_MAX_FLOATS + 100_000_000  # bytes its members may claim unpacked (their headers, text)
SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[PAD]", "[MASK]", "<s>", "</s>", "<pad>", "<|endoftext|>", "<|im_start|>",
                  "<|im_end|>", "<bos>", "<eos>", "<unk>", "[UNK]")


def export_npz(att: ModelAttention) -> bytes:
    """The .npz the app's download button gives (attention.models.recorded.export.sentence_npz): np.load reads it
    with numpy alone, load_npz (and the app's model pages) open it."""
    return sentence_npz(att)


def _array(a) -> np.ndarray:
    """A tensor (torch, on any device) or an array as float32 numpy."""
    if hasattr(a, "detach"):
        a = a.detach().float().cpu().numpy()
    return np.asarray(a, dtype=np.float32)


def _display(token: str) -> str:
    """BertViz's prettify_tokens: no Ġ / ▁ / ## markers."""
    text = str(token)
    if text.startswith("##"):
        return text[2:]
    return text.replace("Ġ", " ").replace("▁", " ").replace("Ċ", "⏎").strip() or "␣"


def _stack(layers, keep: np.ndarray | None, batch_index: int) -> AttentionStack:
    """A stack holding the given weights. Shapes: layers L x (B, H, n, m) or (H, n, m)."""
    weights = []
    for a in layers:
        a = _array(a)
        if a.ndim == 4:
            a = a[batch_index]
        if a.ndim != 3:
            raise ValueError(f"each layer's attention must be (batch, heads, queries, keys) or (heads, queries, keys); "
                             f"got shape {a.shape}")
        if keep is not None:
            a = a[:, keep][:, :, keep] if a.shape[1] == a.shape[2] else a[:, :, keep]
        weights.append(a)
    shapes = {w.shape for w in weights}
    if len(shapes) != 1:
        raise ValueError(f"every layer's attention must have the same shape; got {sorted(shapes)}")
    own = np.stack(weights)  # (L, H, n, m)
    if not np.isfinite(own).all():
        raise ValueError("the attention weights hold NaN or infinite values")
    L, _, n, m = own.shape
    causal = n == m and not np.triu(own, 1).any()  # no weight on a later key in any head: a causal model
    mask = np.tri(n, dtype=bool) if causal else None
    if mask is not None:
        mask.flags.writeable = False
    return AttentionStack(q=None, k=None, v=None, masks=(mask,) * L, exactly_causal=(causal,) * L, causal=causal,
                          scale=float("nan"), bias=False, modules=tuple(f"layer {i + 1}" for i in range(L)),
                          w_o=None, own_weights=own)


def from_attentions(tokens, attentions, *, model_name: str | None = None, attention_mask=None,
                    batch_index: int = 0, special=None, decoder_tokens=None, decoder_attentions=None,
                    cross_attentions=None, prettify: bool = True, image: ImagePatches | None = None) -> ModelAttention:
    """A ModelAttention from what transformers returns with output_attentions=True: `attentions` (the
    encoder's, or a decoder-only model's self-attention) as L tensors or arrays of (batch, heads, n, n);
    `tokens` the strings of the sequence `batch_index` (or of every sequence: a list of lists).
    `attention_mask` (batch, n) drops that sequence's padding. An encoder-decoder model also gives
    `decoder_attentions` and `cross_attentions`, with `decoder_tokens`. `special` (n,) flags special tokens
    (default: the usual [CLS], <s>, <|endoftext|>...). `prettify` drops the Ġ, ▁ and ## of sub-word pieces.
    An image model's attentions come with `image` (attention.models.forward.images.image_patches(config,
    processor, pixel_values[0], n_tokens)): `tokens` may then be None, and are named by their patches."""
    shown = _display if prettify else str
    if image is not None:
        names = token_names(image.prefix, image.rows, image.cols)
        tokens = names if tokens is None else tokens
        special = np.arange(len(names)) < image.first_patch if special is None else special
        prettify, shown = False, str
    if tokens and isinstance(tokens[0], list | tuple):
        tokens = tokens[batch_index]
        decoder_tokens = decoder_tokens[batch_index] if decoder_tokens and isinstance(decoder_tokens[0], list | tuple) \
            else decoder_tokens
    keep = None
    if attention_mask is not None:
        row = _array(attention_mask)
        keep = (row[batch_index] if row.ndim == 2 else row) > 0
        tokens = [t for t, k in zip(tokens, keep, strict=True) if k]
    stack = _stack(attentions, keep, batch_index)
    n = stack.n_queries
    if len(tokens) != n:
        raise ValueError(f"{len(tokens)} tokens for attention over {n} positions")
    flags = np.array([str(t) in SPECIAL_TOKENS for t in tokens] if special is None else special, dtype=bool)
    result = dict(
        model_name=model_name or "given attentions", text=" ".join(shown(t) for t in tokens),
        architecture="decoder-only" if stack.causal else "encoder-only", tokens=tuple(shown(t) for t in tokens),
        token_ids=np.full(n, -1), special=flags, self_attn=stack,
        hidden=np.zeros((stack.n_layers + 1, n, 0), np.float32), truncated=False, n_input_tokens=n, image=image,
    )
    if image is not None:
        result["text"] = model_name or "an image"
    if decoder_attentions is not None:
        if decoder_tokens is None or cross_attentions is None:
            raise ValueError("an encoder-decoder model needs decoder_tokens, decoder_attentions and cross_attentions")
        result.update(architecture="encoder-decoder", target_tokens=tuple(shown(t) for t in decoder_tokens),
                      target_ids=np.full(len(decoder_tokens), -1), decoder_attn=_stack(decoder_attentions, None,
                                                                                         batch_index),
                      cross_attn=_stack(cross_attentions, keep, batch_index))
    return ModelAttention(**result)


def load_npz(data: bytes, *, max_bytes: int = NPZ_MAX_BYTES) -> ModelAttention:
    """A result from the .npz that export_npz (or the app's download) wrote; no pickle is ever read.
    ValueError, saying what is wrong, for a file too large, not an .npz, truncated, missing a field, with
    shapes that do not fit together, or with weights that are not finite."""
    if len(data) > max_bytes:
        raise ValueError(f"The file has {len(data) / 1e6:,.0f} MB; results up to {max_bytes / 1e6:,.0f} MB open here.")
    if not data.startswith(b"PK\x03\x04"):
        raise ValueError("This is not an .npz file (a zip of .npy arrays, as the .npz download writes).")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        claimed = sum(member.file_size for member in archive.infolist())
        if claimed <= NPZ_MAX_UNPACKED:  # else a zip bomb: a small file whose members claim gigabytes, unread
            archive.testzip()  # reads every member's checksum: a file cut short fails here
    except UNREADABLE as err:
        raise ValueError(f"This is not a readable .npz file ({type(err).__name__}): was it cut short?") from None
    if claimed > NPZ_MAX_UNPACKED:
        raise ValueError(f"The file claims to unpack to {claimed / 1e6:,.0f} MB; up to "
                         f"{NPZ_MAX_UNPACKED / 1e6:,.0f} MB open here.")
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            sizes = {name: _size_of(npz, name) for name in npz.files}
            if sum(sizes.values()) > NPZ_MAX_FLOATS:
                raise ValueError(f"The file unpacks to {sum(sizes.values()):,} values; up to {NPZ_MAX_FLOATS:,} "
                                 "open here.")
            arrays = {name: npz[name] for name in npz.files}
    except ValueError as err:
        if "pickle" in str(err).lower() or "object arrays" in str(err).lower():
            raise ValueError("The file holds Python objects (pickled data): only plain arrays are read.") from None
        if "unpacks to" in str(err):
            raise
        raise ValueError(f"This is not a result this app wrote: {err}") from None
    except UNREADABLE as err:
        raise ValueError(f"This is not a readable .npz file ({type(err).__name__}): was it cut short?") from None
    try:
        return _result_of(arrays)
    except (TypeError, IndexError, KeyError, AttributeError, OverflowError) as err:  # a field of the wrong kind
        raise ValueError(f"This is not a result this app wrote: a field cannot be read ({type(err).__name__}: "
                         f"{str(err)[:200]}).") from None


def _size_of(npz, name: str) -> int:
    """How many values one member holds, read from its header without loading it."""
    with npz.zip.open(f"{name}.npy") as f:
        version = npy.read_magic(f)
        readers = {(1, 0): npy.read_array_header_1_0, (2, 0): npy.read_array_header_2_0}
        if version not in readers:
            raise ValueError(f"{name}: .npy format {version} is not read here")
        shape, _, dtype = readers[version](f)
    if dtype.hasobject:
        raise ValueError("object arrays: pickled data")
    return int(np.prod(shape))


def _result_of(a: dict) -> ModelAttention:
    needed = ("text", "model_name", "tokens", "token_ids", "special")
    missing = [k for k in needed if k not in a]
    if missing:
        raise ValueError(f"This is not a result this app wrote: it has no {', '.join(missing)}.")
    tokens = tuple(str(t) for t in a["tokens"])
    n = len(tokens)
    stacks = {}
    for stack in ("self", "decoder", "cross"):
        if f"{stack}_weights" in a:
            w = np.asarray(a[f"{stack}_weights"], dtype=np.float32)
            if w.ndim != 4:
                raise ValueError(f"{stack}_weights must be (layers, heads, queries, keys), not {w.shape}")
            stacks[stack] = _stack(list(w), None, 0)
        elif f"{stack}_q" in a:
            stacks[stack] = _captured_stack(a, stack)
    if "self" not in stacks:
        raise ValueError("This is not a result this app wrote: it holds no self-attention.")
    s = stacks["self"]
    if s.n_queries != n or s.n_keys != n:
        raise ValueError(f"{n} tokens but self-attention over {s.n_queries} x {s.n_keys} positions")
    for name, arr in (("token_ids", a["token_ids"]), ("special", a["special"])):
        if np.asarray(arr).shape != (n,):
            raise ValueError(f"{name} must hold one value per token ({n}), not {np.asarray(arr).shape}")
    result = dict(
        model_name=str(a["model_name"]), text=str(a["text"]),
        architecture="encoder-decoder" if "cross" in stacks else "decoder-only" if s.causal else "encoder-only",
        tokens=tokens, token_ids=np.asarray(a["token_ids"]), special=np.asarray(a["special"], dtype=bool),
        self_attn=s, hidden=np.zeros((s.n_layers + 1, n, 0), np.float32), truncated=False, n_input_tokens=n,
        word_ids=np.asarray(a["word_ids"]) if "word_ids" in a else None,
        offsets=np.asarray(a["offsets"]) if "offsets" in a else None,
        windows=tuple(int(w) or None for w in np.asarray(a["windows"]).reshape(-1)) if "windows" in a else None,
    )
    if "image_pixel_values" in a:
        result["image"] = _image_of(a, n)
    if result["windows"] is not None and len(result["windows"]) != s.n_layers:
        raise ValueError(f"windows must hold one value per layer ({s.n_layers}), not {len(result['windows'])}")
    if "cross" in stacks:
        targets = tuple(str(t) for t in a.get("target_tokens", ()))
        result.update(target_tokens=targets, target_ids=np.asarray(a.get("target_ids", np.full(len(targets), -1))),
                      decoder_attn=stacks.get("decoder"), cross_attn=stacks["cross"])
    return ModelAttention(**result)


def _image_of(a: dict, n: int) -> ImagePatches:
    """An image result's ImagePatches from its file (sentence_npz wrote them), checked against its tokens."""
    rows, cols, patch = (int(x) for x in np.asarray(a["image_grid"]).reshape(-1)[:3])
    prefix = tuple(str(t) for t in np.asarray(a["image_prefix"]).reshape(-1))
    if len(prefix) + rows * cols != n:
        raise ValueError(f"{n} tokens, not the {len(prefix)} + {rows} x {cols} patches its image makes")
    pixels = np.asarray(a["image_pixels"], dtype=np.uint8)
    if pixels.ndim != 3 or pixels.shape[2] != 3 or pixels.shape[0] < rows * patch or pixels.shape[1] < cols * patch:
        raise ValueError(f"image_pixels of shape {pixels.shape} do not hold a {rows} x {cols} grid of {patch}-pixel "
                         "patches")
    logits = np.asarray(a["image_class_logits"], dtype=np.float32) if "image_class_logits" in a else None
    return ImagePatches(pixels=pixels, pixel_values=np.asarray(a["image_pixel_values"], dtype=np.float32), rows=rows,
                        cols=cols, patch=patch, prefix=prefix,
                        labels=tuple(str(t) for t in np.asarray(a.get("image_labels", [])).reshape(-1)),
                        class_logits=logits)


def _captured_stack(a: dict, stack: str) -> AttentionStack:
    """A long input's stack: q, k, v and the masks, rebuilt as the app rebuilds them."""
    q, k, v = (np.asarray(a[f"{stack}_{x}"], dtype=np.float32) for x in "qkv")
    if q.ndim != 4 or k.ndim != 4 or v.shape != k.shape or q.shape[0] != k.shape[0] or q.shape[-1] != k.shape[-1] \
            or q.shape[1] % k.shape[1]:
        raise ValueError(f"{stack}: q {q.shape}, k {k.shape} and v {v.shape} do not fit together")
    if not all(np.isfinite(x).all() for x in (q, k, v)):
        raise ValueError(f"{stack}: q, k or v hold NaN or infinite values")
    L, n, m = q.shape[0], q.shape[2], k.shape[2]
    index = np.asarray(a.get(f"{stack}_mask_of_layer", np.full(L, -1)), dtype=np.int64)
    distinct = np.asarray(a[f"{stack}_masks"], dtype=bool) if f"{stack}_masks" in a else np.zeros((0, n, m), bool)
    if index.shape != (L,) or index.max(initial=-1) >= len(distinct) or distinct.shape[1:] != (n, m):
        raise ValueError(f"{stack}: the masks do not fit the {L} layers of {n} x {m} positions")
    masks = tuple(None if i < 0 else distinct[i] for i in index)
    exactly = tuple(m_ is not None and np.array_equal(m_, np.tri(n, m, dtype=bool)) for m_ in masks)
    causal = all(m_ is not None and not np.triu(m_, 1).any() for m_ in masks)
    scales = tuple(_per_layer(a[f"{stack}_scale"], L, f"{stack}: the scale"))
    softcaps = tuple(x or None for x in _per_layer(a.get(f"{stack}_softcap", 0.0), L, f"{stack}: the soft cap"))
    return AttentionStack(q=q, k=k, v=v, masks=masks, exactly_causal=exactly, causal=causal,
                          scale=scales[0], bias=False, modules=tuple(f"layer {i + 1}" for i in range(L)), w_o=None,
                          softcap=softcaps[0], layer_scales=None if len(set(scales)) == 1 else scales,
                          layer_softcaps=None if len(set(softcaps)) == 1 else softcaps)


def _per_layer(value, n_layers: int, what: str) -> list[float]:
    """One finite number per layer, from one for every layer (files written before per-layer scales) or one
    per layer."""
    a = np.asarray(value, dtype=np.float64)
    if a.shape not in ((), (n_layers,)) or not np.isfinite(a).all():
        raise ValueError(f"{what} must be one finite number, or one per layer ({n_layers}), not {a.shape} values")
    return [float(x) for x in np.broadcast_to(a, (n_layers,))]
