"""Activation patching: which positions and heads carry the information the prediction needs.

Two prompts of the same length that differ where it matters: clean ("... John gave a drink to" → " Mary")
and corrupt (the names swapped, so the model prefers " John"). Run the corrupt prompt with one activation
taken from the clean run, and see how much of the clean prediction comes back:

    effect = (m_patched − m_corrupt) / (m_clean − m_corrupt)        m = logit(target) − logit(foil)

1 restores the clean prediction, 0 changes nothing. Sites (TransformerLens's hook points):
    "residual"  the residual stream at one (layer, position): row l < L enters block l (blocks.{l}.hook_resid_pre),
                row L leaves the last (blocks.{L-1}.hook_resid_post, the final norm's input)
    "heads"     one head's output z_h at every position (blocks.{l}.attn.hook_z[:, :, h])

Runs are batched like the ablation scan (attention.models.analyses.edits): about BATCH_SECONDS a batch, the model's
lock released in between, a progress report after each.

Shapes: L layers, H heads, n tokens (the same for both prompts).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from attention.models.analyses.edits import (
    EditSetup,
    copy_edits,
    edit_setup,
    head_slices,
    hooked_z,
    linear_metric,
    scan,
    z_of,
)
from attention.models.analyses.target_foil import Contrast
from attention.models.forward.device import LONG_WORK_TOKENS, work_threads
from attention.models.forward.hook_points import HookPoint, hooks
from attention.models.forward.model import LoadedModel
from attention.models.forward.model_attention import ModelAttention, shown_tokens

SITES = {"residual": "the residual stream at one layer and position", "heads": "one head's output, every position"}


@dataclass(frozen=True)
class Patching:
    site: str  # a key of SITES
    effect: np.ndarray  # residual: (L + 1, n); heads: (L, H)
    clean: float  # m on the clean prompt (the contrast's baseline)
    corrupt: float  # m on the corrupt prompt
    tokens: tuple[str, ...]  # the clean prompt's tokens
    corrupt_tokens: tuple[str, ...]
    contrast: Contrast


def activation_patching(loaded: LoadedModel, clean: ModelAttention, corrupt: ModelAttention, contrast: Contrast, *,
                        site: str = "residual", progress: Callable[[float, str], None] | None = None) -> Patching:
    """Patch every site of `site` from the clean run into the corrupt one (module docstring). `contrast` is
    read from `clean`; ValueError for prompts of different lengths or a metric that does not move."""
    if site not in SITES:
        raise ValueError(f"unknown site {site!r}; choose one of {', '.join(SITES)}")
    if len(clean.tokens) != len(corrupt.tokens):
        raise ValueError(f"The clean prompt has {len(clean.tokens)} tokens and the corrupt one "
                         f"{len(corrupt.tokens)}: patching needs the same positions in both. Swap words that are "
                         "one token each.")
    m_corrupt = float(contrast.difference(corrupt.next_logits))
    if abs(contrast.baseline - m_corrupt) < 1e-5:  # effects would be ratios of rounding errors
        raise ValueError(f"The model's preference is the same on both prompts (m = {m_corrupt:.3f}): there is "
                         "nothing for patching to restore. Corrupt the prompt where it matters.")
    source, into = edit_setup(loaded, clean), edit_setup(loaded, corrupt)  # patched from source into `into`
    read = linear_metric(loaded, contrast)
    L, n = into.n_layers, len(clean.tokens)
    with work_threads(LONG_WORK_TOKENS):
        if site == "residual":
            clean_resid = [r[0] for r in source.resid_pre] + [_final_resid(loaded, source)]  # (L+1) x [pos, d_model]
            sites = [(layer, pos) for layer in range(L + 1) for pos in range(n)]
            values = scan(loaded, into, sites, lambda part: _patched_resid(loaded, into, part, clean_resid), read,
                          progress, base=True, verb="Patched residual sites:", last_block=L - 1)
            shape = (L + 1, n)
        else:
            clean_z = z_of(loaded, source)  # L x [pos, head_index, d_head]
            sites = [(layer, head) for layer in range(L) for head in range(into.n_heads)]
            values = scan(loaded, into, sites, lambda part: hooked_z(loaded, head_slices(part, clean_z)),
                          read, progress, base=True, verb="Patched heads:")
            shape = (L, into.n_heads)
    effect = (values.reshape(shape) - m_corrupt) / (contrast.baseline - m_corrupt)
    return Patching(site=site, effect=effect, clean=contrast.baseline, corrupt=m_corrupt, tokens=shown_tokens(clean),
                    corrupt_tokens=shown_tokens(corrupt), contrast=contrast)


def _final_resid(loaded: LoadedModel, setup: EditSetup) -> torch.Tensor:
    """The residual stream leaving the last block (blocks.{L-1}.hook_resid_post: the final norm's input) on the
    setup's text, [pos, d_model]. ValueError for a family whose final norm is not known (linear_metric reads
    the final norm's output)."""
    if loaded.anatomy.final_norm is None:
        raise ValueError(f"{loaded.spec.name}'s final norm is not known here: the residual stream cannot be patched.")
    seen = {}

    def keep(resid: torch.Tensor, hook: HookPoint) -> None:
        seen["resid"] = resid[0].detach().clone()

    # a hook on the shared model: only while no other pass runs
    with loaded.lock, torch.inference_mode(), hooks(
            loaded, [(f"blocks.{setup.n_layers - 1}.hook_resid_post", keep)], lock=False):
        loaded.network(input_ids=setup.ids, logits_to_keep=1)
    return seen["resid"]


def _patched_resid(loaded: LoadedModel, setup: EditSetup, part: list[tuple[int, int]], clean_resid):
    """hooks() (the caller holds the lock) that set copy b's residual stream at (layer, position) = part[b] to
    the clean run's, clean_resid[layer]: entering block l for l < L (blocks.{l}.hook_resid_pre), leaving the last
    block for l = L (blocks.{L-1}.hook_resid_post)."""
    L = setup.n_layers

    def put(resid, b, layer, pos):  # resid [batch, pos, d_model]
        resid[b, pos] = clean_resid[layer][pos]

    rows = {f"blocks.{layer}.hook_resid_pre": layer for layer in range(L)} | {f"blocks.{L - 1}.hook_resid_post": L}
    patch = copy_edits(part, put, rows)
    return hooks(loaded, [(name, patch) for name in rows], lock=False)
