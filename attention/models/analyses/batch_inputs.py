"""Many prompts through a decoder at once, padded so that each gives what it gives alone.

Prompts of different lengths share one (B, T) tensor: each is tokenized as attend() tokenizes one text, then
padded on the tokenizer's side (its `padding_side`), or on the side asked for:

    right   "When Mary ... to" <pad> <pad>     each prompt's last real token at its own column (lengths - 1)
    left    <pad> <pad> "When Mary ... to"     every prompt's last real token in the last column (T - 1)

Two things keep the padded run exact, and a decoder needs both for left padding:
    attention_mask   0 at pads: no real token attends to one (a decoder's causal mask hides later columns
                     already, which is why right padding is exact even without it)
    position_ids     each real token's position within its own prompt, cumsum(mask) - 1: with left padding the
                     first real token sits at column T - n but is position 0 (rotary and learned positions alike)
So a prompt's logits at its last real token equal its logits alone, to float32 rounding (a batch runs other
kernels than one text: sums over the model's width in other orders; tests/test_batch.py holds them to that).

`run_rows` runs chosen rows (a prompt may appear several times: one copy per edit), optionally only from
column `start` on, reading the columns before it from a key/value cache of an earlier pass (`prefix_cache`):
a causal decoder's earlier columns do not depend on later ones, so an edit at column p leaves every column
before p as it was.

Shapes: B prompts, T padded length, R rows of one pass, V vocabulary.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
from dataclasses import dataclass

import numpy as np
import torch

from attention.models.analyses.edits import restart_of
from attention.models.forward.device import work_threads
from attention.models.forward.hook_points import hooks
from attention.models.forward.inputs import text_inputs
from attention.models.forward.model import LoadedModel, final_logits

BATCH_TOKENS = 2_048  # tokens of one pass (rows x columns run): bounds memory; larger gained nothing on 2 cores
SIDES = ("left", "right")


@dataclass(frozen=True)
class PaddedBatch:
    """Prompts tokenized one by one as attend() does, padded to one length T on `side`."""

    ids: torch.Tensor  # (B, T) token ids; the pad id where mask is 0
    mask: torch.Tensor  # (B, T) 1 at real tokens, 0 at pads
    positions: torch.Tensor  # (B, T) each real token's position in its own prompt, cumsum(mask) - 1; 0 at pads
    last: torch.Tensor  # (B,) the column of each prompt's last real token
    lengths: tuple[int, ...]  # (B,) real tokens per prompt
    side: str  # "left" or "right"

    @property
    def aligned(self) -> bool:
        """Whether every prompt has the same length (no padding): column p is position p in every prompt."""
        return len(set(self.lengths)) == 1

    def __len__(self) -> int:
        return len(self.lengths)

    def rows(self, part: slice) -> PaddedBatch:
        """The prompts of `part`, padded as they are here (to this batch's length)."""
        return PaddedBatch(self.ids[part], self.mask[part], self.positions[part], self.last[part],
                           self.lengths[part], self.side)


def padding_side(loaded: LoadedModel, side: str | None = None) -> str:
    """The side asked for, else the tokenizer's own (right when it says nothing); ValueError for left padding
    of a network that takes no position ids (its positions would count the pads)."""
    side = side or getattr(loaded.tokenizer, "padding_side", None) or "right"
    if side not in SIDES:
        raise ValueError(f"padding side {side!r}: choose left or right")
    if side == "left" and not takes(loaded, "position_ids"):
        raise ValueError(f"{loaded.spec.name}'s forward takes no position ids: with left padding its positions would "
                         "count the pads. Pad on the right (side='right').")
    return side


def takes(loaded: LoadedModel, argument: str) -> bool:
    """Whether the network's forward has this keyword (position_ids, logits_to_keep, past_key_values)."""
    return argument in inspect.signature(loaded.network.forward).parameters


def pad_batch(loaded: LoadedModel, texts, *, side: str | None = None, length: int | None = None) -> PaddedBatch:
    """The texts tokenized one by one (attention.models.forward.inputs.text_inputs, as attend() does) and padded
    to `length` (default: the longest) on `side` (padding_side). ValueError for a model that is not a decoder.
    Shapes: texts (B,) -> ids, mask, positions (B, T)."""
    if loaded.spec.architecture != "decoder-only":
        raise ValueError(f"{loaded.spec.name} is not a decoder: batches of prompts are read at their next token here")
    side = padding_side(loaded, side)
    rows = [text_inputs(loaded, text, None).ids[0].cpu() for text in texts]
    if not rows:
        raise ValueError("no prompts to run")
    lengths = tuple(len(r) for r in rows)
    T = max(max(lengths), length or 0)
    pad = getattr(loaded.tokenizer, "pad_token_id", None)
    pad = pad if pad is not None else getattr(loaded.tokenizer, "eos_token_id", None) or 0
    ids = torch.full((len(rows), T), int(pad), dtype=torch.long)
    mask = torch.zeros((len(rows), T), dtype=torch.long)
    for b, row in enumerate(rows):
        columns = slice(T - len(row), T) if side == "left" else slice(0, len(row))
        ids[b, columns], mask[b, columns] = row, 1
    positions = (mask.cumsum(1) - 1).clamp(min=0)  # (B, T)
    last = torch.full((len(rows),), T - 1) if side == "left" else torch.tensor(lengths) - 1
    device = loaded.device
    return PaddedBatch(ids.to(device), mask.to(device), positions.to(device), last.to(device), lengths, side)


def run_rows(loaded: LoadedModel, batch: PaddedBatch, rows: torch.Tensor, *, fwd_hooks=(), start: int = 0,
             cache=None, cache_rows: torch.Tensor | None = None, first_layer: int = 0,
             stream: torch.Tensor | None = None, read: tuple | None = None) -> torch.Tensor:
    """Logits at each row's last real column from one pass of the network over batch rows `rows` (indices into
    the batch; repeats allowed: one copy per edit), columns start..T-1, with fwd_hooks ([(hook point, fn)],
    attention.models.forward.hook_points) on. With start > 0 the columns before it come from `cache`
    (prefix_cache of the same prompts), whose row cache_rows[r] holds rows[r]'s prompt (default: row r). With
    first_layer > 0 the pass starts at that block, from `stream`, the residual stream entering it (for a family
    that can: starts_anywhere); blocks before it do not run. `read` = (targets, foils), a token id pair per row:
    only those two logits, from the final norm's output (no vocabulary-wide unembedding: for SmolLM2 that is
    49,152 x 576 multiply-adds per row, as much as 4 of its blocks). Holds the model's lock for the pass as
    long work (a short request waits for one pass at most).
    Shapes: rows (R,), stream (R, T - start, D) -> (R, V), or (R, 2) with `read`."""
    if start and cache is None:
        raise ValueError("a pass from a later column needs the cache of the columns before it (prefix_cache)")
    network = loaded.network if read is None else loaded.network.base_model
    extra = {"use_cache": cache is not None}
    if cache is not None:
        extra["past_key_values"] = _fresh(cache, cache_rows)
    if takes(loaded, "position_ids"):
        extra["position_ids"] = batch.positions[rows, start:]
    last = batch.last[rows] - start  # (R,) the last real column within the columns run
    kept = torch.unique(last)  # (k,) the columns whose logits are read: one with left padding
    if read is None and takes(loaded, "logits_to_keep"):
        extra["logits_to_keep"] = kept
    inputs = {"input_ids": batch.ids[rows, start:]} if stream is None else {"inputs_embeds": stream}
    with loaded.lock.background(), torch.inference_mode(), hooks(loaded, fwd_hooks, lock=False), \
            _from_block(loaded, first_layer):
        out = network(attention_mask=batch.mask[rows], **inputs, **extra)
    if read is not None:  # the final norm's output (R, T - start, D) at each row's last column
        return pair_logits(loaded, out.last_hidden_state[torch.arange(len(rows), device=last.device), last], *read)
    # (R, k, V), or (R, T - start, V) for a network without logits_to_keep
    column = torch.searchsorted(kept, last) if "logits_to_keep" in extra else last
    return out.logits[torch.arange(len(rows), device=column.device), column]


def pair_logits(loaded: LoadedModel, final: torch.Tensor, targets, foils) -> torch.Tensor:
    """Each row's target and foil logits from the final norm's output, as the LM head makes them (its bias,
    the model's soft cap). Shapes: final (R, D), targets and foils (R,) -> (R, 2) float64."""
    unembed = loaded.network.get_output_embeddings()
    ids = torch.as_tensor(np.stack([targets, foils], 1), device=final.device)  # (R, 2)
    logits = torch.einsum("rd,rkd->rk", final.double(), unembed.weight.detach()[ids].double())
    if getattr(unembed, "bias", None) is not None:
        logits = logits + unembed.bias.detach()[ids].double()
    return final_logits(loaded, logits)


def check_pair_logits(loaded: LoadedModel, batch: PaddedBatch) -> None:
    """ValueError unless pair_logits gives the network's own logits on the batch's first prompt (within float32
    rounding of the model's width): a head that does more than its weight, bias and soft cap (a logit scale)
    would make every m read with `read` wrong."""
    row = torch.arange(1)
    own = run_rows(loaded, batch, row)[0]  # (V,)
    ids = np.argsort(-own.detach().float().cpu().numpy())[:2]  # the two likeliest tokens: large, distinct logits
    pair = run_rows(loaded, batch, row, read=(ids[:1], ids[1:]))[0]  # (2,)
    gap = float((pair - own[ids].double()).abs().max())
    if gap > 1e-3 * max(1.0, float(own[ids].abs().max())):
        raise ValueError(f"{loaded.spec.name}'s logits are not its final norm's output through the LM head's weight, "
                         f"bias and soft cap (off by {gap:.3g}): m cannot be read from two rows of the head here")


def _fresh(cache, rows: torch.Tensor | None):
    """A cache a pass may append to, the prefix itself left as it is: new layer objects over the same tensors
    (a pass replaces each layer's tensors by longer ones, torch.cat, and never writes into them), with only
    `rows` kept. transformers' Cache keeps its layers in `.layers`; one that does not is copied whole."""
    layers = getattr(cache, "layers", None)
    if isinstance(layers, list):
        fresh = copy.copy(cache)
        fresh.layers = [copy.copy(layer) for layer in layers]
    else:
        fresh = copy.deepcopy(cache)
    if rows is not None:
        fresh.batch_select_indices(rows)
    return fresh


def starts_anywhere(loaded: LoadedModel) -> bool:
    """Whether a pass can start at any block from the residual stream there (llama-style families: the stream
    goes in as inputs_embeds, rotary positions are not added to it; attention.models.analyses.edits.restart_of)."""
    return restart_of(loaded.anatomy) is not None and takes(loaded, "inputs_embeds")


@contextlib.contextmanager
def _from_block(loaded: LoadedModel, first: int):
    """The network's block list without its first `first` blocks, for the duration (the caller holds the lock)."""
    if not first:
        yield
        return
    restart = restart_of(loaded.anatomy) if starts_anywhere(loaded) else None
    if restart is None:
        raise ValueError(f"{loaded.spec.name} cannot start a pass at a later block")
    parent, attribute, blocks = restart
    setattr(parent, attribute, torch.nn.ModuleList(list(blocks)[first:]))
    try:
        yield
    finally:
        setattr(parent, attribute, blocks)


def prefix_cache(loaded: LoadedModel, batch: PaddedBatch, rows: torch.Tensor, columns: int, *, cache=None,
                 start: int = 0):
    """The key/value cache of a pass over batch rows `rows`, columns 0..columns-1 (transformers' Cache: row r
    holds rows[r]'s prompt), for run_rows(start=columns): one pass over them, or, given the cache of the first
    `start` columns, a pass over columns start..columns-1 on top of it (that cache is left as it was).
    ValueError for a network that keeps no cache.
    Shapes: rows (R,) -> a cache of R rows and `columns` positions."""
    if not takes(loaded, "past_key_values"):
        raise ValueError(f"{loaded.spec.name}'s forward keeps no key/value cache: run every column instead")
    extra = {"position_ids": batch.positions[rows, start:columns]} if takes(loaded, "position_ids") else {}
    if cache is not None:
        extra["past_key_values"] = _fresh(cache, None)
    with loaded.lock.background(), torch.inference_mode():
        return loaded.network.base_model(input_ids=batch.ids[rows, start:columns],
                                         attention_mask=batch.mask[rows, :columns], use_cache=True,
                                         **extra).past_key_values


def chunks(n_rows: int, columns: int, tokens: int = BATCH_TOKENS) -> list[slice]:
    """Slices of n_rows rows such that rows x columns stays near `tokens`."""
    size = max(1, tokens // max(1, columns))
    return [slice(i, min(i + size, n_rows)) for i in range(0, n_rows, size)]


def last_logits(loaded: LoadedModel, texts, *, side: str | None = None) -> torch.Tensor:
    """Each prompt's next-token logits, at its last real token, run as one padded batch (in chunks of about
    BATCH_TOKENS tokens): equal to each prompt run alone, to float32 rounding.
    Shapes: texts (B,) -> (B, V)."""
    batch = pad_batch(loaded, texts, side=side)
    T = batch.ids.shape[1]
    with work_threads(len(batch) * T):
        return torch.cat([run_rows(loaded, batch, torch.arange(len(batch))[part])
                          for part in chunks(len(batch), T)])
