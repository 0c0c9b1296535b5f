"""Activation patching of the residual stream over a batch of prompt pairs: run each corrupted prompt with its
stream at one (layer, position) taken from its clean twin, and see how much of the clean m comes back:

    recovery = (m_patched − m_corrupt) / (m_clean − m_corrupt)       per prompt; 1 restores it, 0 changes nothing

Rows: l < L patches the stream entering block l (hook_resid_pre), row L the stream leaving the last block
(what the final norm reads). Positions (`positions=`):
    "all"   every position, when every clean and corrupted prompt has the same length (the IOI template with
            single-token names): position p is the same slot of the template in every prompt
    "last"  each prompt's last token only (prompts of any lengths, left-padded so that it is one column)
    "auto"  "all" when the prompts align, else "last"
A prompt whose m_clean and m_corrupt are within MIN_GAP gets NaN (its ratio would be noise); `spread` leaves it
out and says how many prompts counted.

What it costs, and why it is still exact (one copy per prompt, row and position patched; `runs`, `tokens` and
`block_tokens` count the copies, the columns they ran and the (column, block) pairs):
    columns   an edit at position p changes nothing before p (a causal decoder): a copy runs columns p..T-1
              only, reading the keys and values of the columns before p from a cache of the corrupted prompts
              (batch_inputs.prefix_cache, each position's made from the last one's by one more column)
    blocks    an edit entering block l changes nothing in blocks before l: for families whose pass can start at
              any block (batch_inputs.starts_anywhere: llama-style) a copy starts at block l from the corrupted
              stream there, with column p replaced; others run every block, the stream edited by a hook
    skipped   positions before the first where any clean and corrupted prompt differ hold one stream in both
              runs at every layer: m_patched = m_corrupt exactly, recovery 0, nothing run
IOI on SmolLM2 (14 tokens, S2 at position 9), 100 pairs: 15,500 copies, 46,500 columns, 697,500 (column,
block) pairs, the work of 23,250 tokens through the whole network, where patching every position by full
passes would be 100 x 31 x 14 passes of 14 tokens (607,600 tokens): 31 s on 2 cores, one unpatched pass of
the 100 prompts 1.3 s.

Shapes: B prompts, L layers, P positions patched, T padded length, D model size.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from attention.models.analyses.batch import Spread, pair_token_ids, spread
from attention.models.analyses.batch_inputs import (
    PaddedBatch,
    check_pair_logits,
    chunks,
    pad_batch,
    prefix_cache,
    run_rows,
    starts_anywhere,
    takes,
)
from attention.models.analyses.batch_pairs import PromptPairs
from attention.models.analyses.target_foil import logit_difference
from attention.models.forward.device import work_threads
from attention.models.forward.model import LoadedModel

MIN_GAP = 1e-3  # |m_clean − m_corrupt| below this: the prompt's recovery is NaN (a ratio of rounding errors)
POSITIONS = ("auto", "all", "last")


@dataclass(frozen=True)
class BatchPatching:
    """The residual stream patched from each clean prompt into its corrupted twin, at every layer and position."""

    recovery: np.ndarray  # (B, L + 1, P) per prompt; NaN where |m_clean − m_corrupt| < MIN_GAP
    patched: np.ndarray  # (B, L + 1, P) m of each patched run
    clean: np.ndarray  # (B,) m on the clean prompts
    corrupted: np.ndarray  # (B,) m on the corrupted prompts
    positions: tuple[int, ...]  # (P,) the positions patched, counted from 0 in each prompt (-1: each one's last)
    labels: tuple[str, ...]  # (P,) what stands there: the token all prompts share, or its role (IO, S1, S2)
    runs: int  # patched copies run (the positions before the first difference are not run)
    tokens: int  # columns those copies ran
    block_tokens: int  # (column, block) pairs they ran: a pass of n tokens through every block is n x L
    seconds: float  # wall time
    pairs: PromptPairs

    def spread(self) -> Spread:
        """The recovery over prompts, (L + 1, P) each."""
        return spread(self.recovery)


def batch_patching(loaded: LoadedModel, pairs: PromptPairs, *, positions: str = "auto",
                   progress: Callable[[float, str], None] | None = None) -> BatchPatching:
    """Patch the residual stream at every layer and position (module docstring). ValueError for positions="all"
    over prompts that do not align, or for unknown `positions`."""
    if positions not in POSITIONS:
        raise ValueError(f"positions {positions!r}: choose one of {', '.join(POSITIONS)}")
    began = time.perf_counter()
    targets, foils = pair_token_ids(loaded.tokenizer, pairs)
    B = len(pairs)
    both = pad_batch(loaded, [r.clean for r in pairs] + [r.corrupted for r in pairs], side="right")
    aligned = both.aligned
    if positions == "all" and not aligned:
        raise ValueError("patching every position needs prompts of one length (clean and corrupted alike): these "
                         f"have {len(set(both.lengths))} lengths. Use positions='last', or a template whose words "
                         "are single tokens")
    every = positions == "all" or (positions == "auto" and aligned)
    if not aligned:  # every last token in one column: the last, patched from one cached prefix
        both = pad_batch(loaded, [r.clean for r in pairs] + [r.corrupted for r in pairs], side="left")
    clean, corrupt = both.rows(slice(0, B)), both.rows(slice(B, 2 * B))
    T = both.ids.shape[1]
    columns = list(range(T)) if every else [T - 1]
    differ = (clean.ids != corrupt.ids).any(0).nonzero()  # columns where some pair differs
    first = int(differ[0]) if len(differ) else T  # the columns before it hold one stream in both runs
    run = [c for c in columns if c >= first]  # the columns patched by running
    L = len(loaded.anatomy.blocks)
    check_pair_logits(loaded, clean)  # every m below is read from the final norm's output and two rows of the head
    with work_threads(B * T):
        streams, m_clean = _streams(loaded, clean, run, L, targets, foils)  # (B, L + 1, len(run), D), (B,)
        corrupt_streams, m_corrupt = _streams(loaded, corrupt, run, L, targets, foils)  # the corrupted prompts'
        patched = np.repeat(m_corrupt[:, None, None], L + 1, 1).repeat(len(columns), 2)  # (B, L + 1, P)
        runs = tokens = block_tokens = 0
        prefixes = _Prefixes(loaded, corrupt)
        for i, column in enumerate(run):
            if starts_anywhere(loaded):
                found = _patch_from_blocks(loaded, corrupt, streams[:, :, i], corrupt_streams[:, :, i:], column, L,
                                           (targets, foils), prefixes)
            else:
                found = _patch_by_hooks(loaded, corrupt, streams[:, :, i], column, L, (targets, foils), prefixes)
            m, copies, n_columns, n_blocks = found  # (R,) m of copy (prompt, row) = copies[r]
            patched[:, :, columns.index(column)] = m[np.lexsort((copies[:, 1], copies[:, 0]))].reshape(B, L + 1)
            runs, tokens, block_tokens = runs + len(copies), tokens + n_columns, block_tokens + n_blocks
            if progress:
                progress((i + 1) / len(run), f"Patched position {i + 1} of {len(run)}")
    gap = (m_clean - m_corrupt)[:, None, None]  # (B, 1, 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        recovery = np.where(np.abs(gap) >= MIN_GAP, (patched - m_corrupt[:, None, None]) / gap, np.nan)
    labels = position_labels(loaded.tokenizer, clean, columns, targets, foils) if every else ("last",)
    return BatchPatching(recovery, patched, m_clean, m_corrupt, tuple(columns) if every else (-1,), labels, runs,
                         tokens, block_tokens, time.perf_counter() - began, pairs)


def _points(L: int) -> list[str]:
    """The hook point patched at each row: the stream entering block l, then the one leaving the last block."""
    return [f"blocks.{layer}.hook_resid_pre" for layer in range(L)] + [f"blocks.{L - 1}.hook_resid_post"]


def _m(pair_logits: torch.Tensor) -> np.ndarray:
    """m from (target, foil) logits. Shapes: (R, 2) -> (R,)."""
    return logit_difference(pair_logits.cpu().numpy(), 0, 1)


def _streams(loaded: LoadedModel, batch: PaddedBatch, columns: list[int], L: int, targets, foils):
    """(streams at every row and the given columns, m) of the batch's prompts, one pass a chunk.
    Shapes: streams (B, L + 1, P, D), m (B,)."""
    points = _points(L)
    kept: dict[str, list[torch.Tensor]] = {name: [] for name in points}

    def keep(t, hook):
        kept[hook.name].append(t[:, columns].detach().clone())  # (R, P, D)

    T = batch.ids.shape[1]
    m = [_m(run_rows(loaded, batch, torch.arange(len(batch))[part], fwd_hooks=[(n, keep) for n in points],
                     read=(targets[part], foils[part]))) for part in chunks(len(batch), T)]
    return torch.stack([torch.cat(kept[name]) for name in points], 1), np.concatenate(m)


class _Prefixes:
    """The corrupted prompts' key/value caches of their first columns, per group of prompts, each made from the
    last one asked for by one more pass over the columns between (positions are asked for in order): the
    prefixes of every position cost one pass over the prompts, not one per position."""

    def __init__(self, loaded: LoadedModel, batch: PaddedBatch):
        self.loaded, self.batch, self.kept = loaded, batch, {}  # kept: first prompt -> (columns, cache)

    def __call__(self, prompts: torch.Tensor, columns: int):
        key = int(prompts[0])
        have, cache = self.kept.get(key, (0, None))
        if columns < have:
            have, cache = 0, None
        if columns > have:
            cache = prefix_cache(self.loaded, self.batch, prompts, columns, cache=cache, start=have)
            self.kept[key] = (columns, cache)
        return cache


def _patch_from_blocks(loaded: LoadedModel, corrupt: PaddedBatch, clean_at: torch.Tensor, corrupt_from: torch.Tensor,
                       column: int, L: int, read, prefixes: _Prefixes):
    """Logits of every prompt's corrupted run with its stream at `column` entering row l replaced by the clean
    one, for every row l: each copy starts at block l from the corrupted stream there (the blocks before it
    would compute it again), runs columns column..T-1, and reads the columns before from a cache of the
    corrupted prompts' first `column` columns. Returns (m (R,), copies (R, 2) as (prompt, row), columns run,
    (column, block) pairs run); `read` = (targets, foils) of every prompt.
    Shapes: clean_at (B, L + 1, D), corrupt_from (B, L + 1, T - column, D)."""
    B, T = len(corrupt), corrupt.ids.shape[1]
    logits, copies = [], []
    for group in chunks(B, T):  # prompts whose prefix is cached together
        prompts = torch.arange(B)[group]
        cache = prefixes(prompts, column) if column else None
        for layer in range(L + 1):
            stream = corrupt_from[group, layer].clone()  # (R, T - column, D)
            stream[:, 0] = clean_at[group, layer]
            logits.append(run_rows(loaded, corrupt, prompts, start=column, cache=cache, first_layer=layer,
                                   stream=stream, read=(read[0][group], read[1][group])))
            copies.append(torch.stack([prompts, torch.full_like(prompts, layer)], 1))
    n = B * (L + 1) * (T - column)
    return _m(torch.cat(logits)), torch.cat(copies).numpy(), n, B * (T - column) * L * (L + 1) // 2


def _patch_by_hooks(loaded: LoadedModel, corrupt: PaddedBatch, clean_at: torch.Tensor, column: int, L: int, read,
                    prefixes: _Prefixes):
    """As _patch_from_blocks, for a family whose pass cannot start at a later block: every copy runs every
    block, the stream edited by a hook at its row (one copy per prompt and row, in batches)."""
    B, T = len(corrupt), corrupt.ids.shape[1]
    start = column if column > 0 and takes(loaded, "past_key_values") else 0
    points = _points(L)
    logits, copies = [], []
    for group in chunks(B, T):  # prompts whose prefix is cached together
        prompts = torch.arange(B)[group]
        cache = prefixes(prompts, start) if start else None
        sites = torch.cartesian_prod(prompts, torch.arange(L + 1))  # (R', 2): (prompt, row)
        for part in chunks(len(sites), T):
            mine = sites[part]

            def put(t, hook, mine=mine):
                layer = L if hook.name.endswith("hook_resid_post") else hook.layer
                pick = (mine[:, 1] == layer).nonzero()[:, 0]  # the copies patched at this row
                if len(pick) == 0:
                    return None
                t = t.clone()
                t[pick, column - start] = clean_at[mine[pick, 0], layer].to(t.dtype)
                return t

            logits.append(run_rows(loaded, corrupt, mine[:, 0], fwd_hooks=[(n, put) for n in points], start=start,
                                   cache=cache, cache_rows=mine[:, 0] - prompts[0],
                                   read=(read[0][mine[:, 0].numpy()], read[1][mine[:, 0].numpy()])))
            copies.append(mine)
    n = B * (L + 1) * (T - start)
    return _m(torch.cat(logits)), torch.cat(copies).numpy(), n, n * L


def position_labels(tokenizer, batch: PaddedBatch, columns: list[int], targets, foils) -> tuple[str, ...]:
    """What stands at each column of aligned clean prompts: the token, where every prompt has the same one; else
    its role where every prompt's token there has one (IO: the target; S1, S2: the foil's first and second
    mention), or the roles joined ("IO/S1"); else the first prompt's token and "…" (a slot that varies)."""
    ids = batch.ids.cpu().numpy()  # (B, T)
    roles = position_roles(ids, targets, foils)
    labels = []
    for c in columns:
        shown = tokenizer.decode([int(ids[0, c])])
        if (ids[:, c] == ids[0, c]).all():
            labels.append(shown)
        elif all(roles[:, c]):
            labels.append("/".join(sorted(set(roles[:, c]))))
        else:
            labels.append(shown + "…")
    return tuple(labels)


def position_roles(ids: np.ndarray, targets, foils) -> np.ndarray:
    """Each token's role in its prompt: "IO" (the target), "S1" and "S2" (the foil's first and second mention),
    "" (none). Shapes: ids (B, T), targets and foils (B,) -> (B, T) of str."""
    roles = np.full(ids.shape, "", dtype=object)
    roles[ids == np.asarray(targets)[:, None]] = "IO"
    is_foil = ids == np.asarray(foils)[:, None]
    roles[is_foil & (np.cumsum(is_foil, 1) == 1)] = "S1"
    roles[is_foil & (np.cumsum(is_foil, 1) == 2)] = "S2"
    return roles
