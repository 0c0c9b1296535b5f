"""What the network reads on one pass (ModelInputs): a user's text tokenized, token ids as given, or an image
made into pixel values by the model's own processor; an encoder-decoder model's decoder input.

A text is cut at MAX_TEXT_CHARS characters (more for a model whose token limit needs more) before it is
tokenized, then at the model's token limit; the result says how many tokens the text had (n_input).

Shapes: n tokens, t decoder tokens, C channels, h x w pixels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attention.models.forward.images import prefix_tokens, read_image
from attention.models.forward.model import LoadedModel
from attention.models.forward.tokens import encoding_words

MAX_TEXT_CHARS = 60_000  # longer text is cut before tokenizing (the token limit cuts again, with a notice)
CHARS_PER_TOKEN = 15  # ...or at this many characters per token of the model's limit, when that is more
# (60,000 characters hold 4,096 tokens of any text we tried; a 32,768-token limit on a GPU needs more)


@dataclass(frozen=True)
class ModelInputs:
    """What the network reads on one pass, on its device: token ids (or an image's pixels), and what the result
    keeps of the text (its words, character spans)."""

    text: str  # the text as read (cut at MAX_TEXT_CHARS)
    ids: torch.Tensor  # (1, n) input ids, truncated to the model's limit
    mask: torch.Tensor | None  # (1, n) the tokenizer's attention mask
    n_input: int  # tokens before truncation
    target_ids: torch.Tensor | None  # (1, t) decoder input of an encoder-decoder model
    word_ids: np.ndarray | None  # (n,) the tokenizer's word of each token (attention.models.recorded.words)
    offsets: np.ndarray | None  # (n, 2) character spans
    pixels: torch.Tensor | None = None  # (1, C, h, w) an image model's input (ids is None then)

    @property
    def length(self) -> int:
        """How many tokens the model reads (after the token limit)."""
        return self.n_input if self.ids is None else self.ids.shape[1]


def text_inputs(loaded: LoadedModel, text: str, decoder_text: str | None) -> ModelInputs:
    """A user's text tokenized for the model: cut at MAX_TEXT_CHARS, then at the model's token limit (n_input
    says how many tokens it had); an encoder-decoder model's decoder input too. ValueError for an empty text."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("Type a sentence first: the text is empty.")
    spec, tok = loaded.spec, loaded.tokenizer
    limit = spec.token_limit(loaded.device)
    text = text[:max(MAX_TEXT_CHARS, CHARS_PER_TOKEN * limit)]
    # Lists, a batch of one, made into tensors here: transformers' own conversion walks the offsets pair by
    # pair (0.25 s at 32,768 tokens). The whole text first: it fits (one pass), or it says by how much it is
    # cut, and then a second pass cuts it as the tokenizer does (its special tokens kept).
    offsets = bool(getattr(tok, "is_fast", False))
    enc = tok([text], truncation=False, return_offsets_mapping=offsets)
    n_input = len(enc["input_ids"][0])
    if n_input > limit:
        enc = tok([text], truncation=True, max_length=limit, return_offsets_mapping=offsets)
    ids = torch.tensor(enc["input_ids"], dtype=torch.long)
    if ids.shape[1] == 0:
        raise ValueError("The tokenizer produced no tokens for this text.")
    mask = None if enc.get("attention_mask") is None else torch.tensor(enc["attention_mask"], dtype=torch.long)
    target_ids = target_ids_of(loaded.network, tok, ids, mask, decoder_text) if spec.architecture == "encoder-decoder" \
        else None
    device = loaded.device
    word_ids, offsets = encoding_words(enc, ids.shape[1], text)
    return ModelInputs(text=text, ids=ids.to(device), mask=None if mask is None else mask.to(device), n_input=n_input,
                   target_ids=None if target_ids is None else target_ids.to(device), word_ids=word_ids,
                   offsets=offsets)


def id_inputs(loaded: LoadedModel, text: str, ids: np.ndarray) -> ModelInputs:
    """Inputs from token ids as given (no word ids: they come from tokenizing a text)."""
    ids = torch.as_tensor(np.asarray(ids, dtype=np.int64))[None]
    limit = loaded.spec.token_limit(loaded.device)
    if not 0 < ids.shape[1] <= limit:
        raise ValueError(f"between 1 and {limit} token ids, not {ids.shape[1]}")
    return ModelInputs(text=text, ids=ids.to(loaded.device), mask=None, n_input=ids.shape[1], target_ids=None,
                   word_ids=None, offsets=None)


def image_inputs(loaded: LoadedModel, image, name: str | None) -> ModelInputs:
    """An image read safely (read_image) and made into the model's pixel values by its own processor."""
    picture = read_image(image)
    if loaded.processor is None:
        raise ValueError(f"{loaded.spec.label} has no image processor, so it cannot say how to read an image.")
    pixels = loaded.processor(images=picture, return_tensors="pt")["pixel_values"]
    label = name or f"an image of {picture.width} x {picture.height} pixels"
    n = image_tokens(loaded.network.config, pixels)
    return ModelInputs(text=label, ids=None, mask=None, n_input=n, target_ids=None, word_ids=None, offsets=None,
                   pixels=pixels.to(loaded.device))


def image_tokens(config, pixels: torch.Tensor) -> int:
    """How many tokens the model reads for these pixel values: its prefix and one per patch."""
    config = getattr(config, "vision_config", config)
    p = int(getattr(config, "patch_size", 1) or 1)
    return len(prefix_tokens(config)) + (pixels.shape[-2] // p) * (pixels.shape[-1] // p)


def target_ids_of(network, tok, ids: torch.Tensor, mask: torch.Tensor | None, decoder_text: str | None) -> torch.Tensor:
    """Decoder input: the given decoder text, else the model's own greedy output (a translation)."""
    start_id = next((x for x in (getattr(network.config, "decoder_start_token_id", None),
                                 getattr(network.generation_config, "decoder_start_token_id", None),
                                 getattr(network.config, "pad_token_id", None)) if x is not None), 0)
    start = torch.tensor([[start_id]])
    if decoder_text:
        t = tok(text_target=decoder_text, return_tensors="pt", truncation=True, max_length=128)["input_ids"]
        return torch.cat([start, t], dim=1)
    # Only ids and mask: a tokenizer's token_type_ids would make generate() refuse the call.
    return network.generate(input_ids=ids, attention_mask=mask, max_new_tokens=64,
                            do_sample=False, num_beams=1)
