"""Running a model with parts of it edited: what ablation, patching and attribution share.

Edits are hook fns on TransformerLens's hook points (attention.models.forward.hook_points, found through the
family's anatomy), put on with its one installer, `hooks(loaded, fwd_hooks, lock=False)`, while the caller
holds the model's lock. Two points are edited:
    blocks.{l}.attn.hook_z          [batch, pos, head_index, d_head]  every head's output: W_O's input
    blocks.{l}.hook_resid_pre       [batch, pos, d_model]  the residual stream entering block l
(and activation patching's last row, blocks.{L-1}.hook_resid_post: the stream leaving the last block). The
residual stream is `resid` here and in patching, readout and qk_stream, as TransformerLens names it.
`edit_setup(loaded, att)` runs the clean text once and keeps what every edited run needs: the token ids and
the residual stream entering each block on this text (`resid_pre`). `scan(...)` runs many edited copies of a
text in batches of about BATCH_SECONDS each, releasing the model's lock in between so that another user's
sentence waits at most about that long; llama-style models start each batch at its first edited layer,
from the residual stream there (about half the work for an ablation of every head).

Shapes: L layers, H heads, d head size, n tokens, D model size, B copies in a batch.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import torch

from attention.models.analyses.target_foil import Contrast, logit_difference
from attention.models.forward.anatomy import Anatomy, has_lm_head, parameter
from attention.models.forward.capabilities import require
from attention.models.forward.hook_points import HookPoint, hooks
from attention.models.forward.model import LoadedModel, final_logits
from attention.models.forward.model_attention import ModelAttention

BATCH_SECONDS = 0.5  # the lock is released between batches: another user's sentence waits at most about this
EFFECT_MAX_TOKENS = 512  # longer texts are refused: one pass per edit, and attribution's backward pass keeps
# every layer's eager weights (SmolLM2 at 4,096 tokens: 600 MB a layer)


@dataclass(frozen=True)
class EditSetup:
    att: ModelAttention  # the clean pass: tokens, modules
    ids: torch.Tensor  # (1, n)
    n_layers: int
    n_heads: int
    clean: object  # the model's output on the text, computed as the edited runs are (eager attention)
    restart: tuple[torch.nn.Module, str, torch.nn.ModuleList] | None  # (parent, attribute, blocks) when a pass
    # can start at any block (see restart_of); None otherwise
    resid_pre: tuple[torch.Tensor, ...]  # L x [1, pos, d_model]: the residual stream entering each block


def edit_setup(loaded: LoadedModel, att: ModelAttention) -> EditSetup:
    """Everything edited runs of `att`'s text need; ValueError (for the page) when they cannot be made."""
    name = loaded.spec.name
    if att.model_name != name:
        raise ValueError(f"this result is {att.model_name}'s, not {name}'s")
    if len(att.tokens) > EFFECT_MAX_TOKENS:
        raise ValueError(f"Head effects are measured on texts of up to {EFFECT_MAX_TOKENS} tokens (every head is "
                         f"removed in a pass of its own); this text has {len(att.tokens):,}. Keep the part that "
                         "leads to the prediction.")
    require(loaded, "head effects")
    parts = loaded.anatomy
    ids = torch.as_tensor(att.token_ids)[None].to(loaded.device)
    L = len(parts.blocks)
    resid_pre = {}

    def keep(resid: torch.Tensor, hook: HookPoint) -> None:  # [1, pos, d_model]
        resid_pre[hook.layer] = resid.detach().clone()

    # hooks only while the model is ours: another user's pass is not seen
    with loaded.lock, torch.inference_mode(), hooks(
            loaded, [(f"blocks.{layer}.hook_resid_pre", keep) for layer in range(L)], lock=False):
        clean = loaded.network(input_ids=ids, **lm_kwargs(loaded))
    return EditSetup(att=att, ids=ids, n_layers=L, n_heads=att.n_heads, clean=clean, restart=restart_of(parts),
                     resid_pre=tuple(resid_pre[layer] for layer in range(L)))


def restart_of(parts: Anatomy) -> tuple[torch.nn.Module, str, torch.nn.ModuleList] | None:
    """(the blocks' parent, its attribute, the blocks) when a forward pass can start at any block: llama-style
    models take the residual stream there as `inputs_embeds` (rotary positions are not added to the
    embeddings, nothing scales them)."""
    if not parts.family.restartable:
        return None
    parent_path, _, attribute = parts.family.layers.rpartition(".")
    parent = parts.base.get_submodule(parent_path) if parent_path else parts.base
    return parent, attribute, getattr(parent, attribute)


def lm_kwargs(loaded: LoadedModel) -> dict:
    """What every rerun passes the network: a causal LM computes its logits at the last position only."""
    return {"logits_to_keep": 1} if has_lm_head(loaded.network) else {}


def hooked_z(loaded: LoadedModel, fn: Callable[[torch.Tensor, HookPoint], torch.Tensor | None]):
    """hooks() with fn(z, hook) on every layer's blocks.{l}.attn.hook_z, z [batch, pos, head_index, d_head]
    (hook.layer says which), for a caller that holds the model's lock (scan's batches do)."""
    n_layers = len(loaded.anatomy.blocks)
    return hooks(loaded, [(f"blocks.{layer}.attn.hook_z", fn) for layer in range(n_layers)], lock=False)


def z_of(loaded: LoadedModel, setup: EditSetup) -> list[torch.Tensor]:
    """Each layer's z on the setup's text: L x [pos, head_index, d_head]."""
    seen = {}

    def keep(z: torch.Tensor, hook: HookPoint) -> None:
        seen[hook.layer] = z[0].detach().clone()

    with loaded.lock, hooked_z(loaded, keep), torch.inference_mode():
        loaded.network(input_ids=setup.ids)
    return [seen[layer] for layer in range(setup.n_layers)]


def run_from(loaded: LoadedModel, setup: EditSetup, first_layer: int, copies: int, *, base: bool = False):
    """The model on `copies` copies of the text, from `first_layer` on when it can (its input there is the
    setup's: every copy's edit is at that layer or later). `base` runs the model without its LM head
    (last_hidden_state, no logits). Call with the model's lock held: the block list is shortened for the
    duration of the call."""
    network = loaded.network.base_model if base else loaded.network
    kwargs = {} if base else lm_kwargs(loaded)
    if setup.restart is None or first_layer == 0:
        return network(input_ids=setup.ids.repeat(copies, 1), **kwargs)
    parent, attribute, blocks = setup.restart
    setattr(parent, attribute, torch.nn.ModuleList(list(blocks)[first_layer:]))
    try:
        return network(inputs_embeds=setup.resid_pre[first_layer].repeat(copies, 1, 1), **kwargs)
    finally:
        setattr(parent, attribute, blocks)


def scan(loaded: LoadedModel, setup: EditSetup, sites: list[tuple[int, int]],
         hooks_for: Callable[[list[tuple[int, int]]], contextlib.AbstractContextManager],
         read: Callable[[object], torch.Tensor], progress, *, base: bool = False, verb: str = "Edited",
         last_block: int | None = None) -> np.ndarray:
    """read(output) of one edited copy of the text per site (layer, index), sites sorted by layer:
    hooks_for(part) installs the edits of a batch, copy b editing part[b] (hooks(..., lock=False): hooked_z with
    head_slices, or the residual stream's points), while the batch holds the model's lock: hooks on the shared
    model are never up while another pass runs. A batch starts at its first site's layer (at most
    `last_block`, for sites past the last block).
    Shapes: -> (len(sites),)."""
    values = np.zeros(len(sites))
    # The first batch is one copy: its time sizes the next. (It was 8: at the first layers, on a busy machine,
    # that batch held the lock for 2 s while another user's sentence waited.)
    batch, done = 1, 0
    while done < len(sites):
        part = sites[done:done + batch]
        first = part[0][0] if last_block is None else min(part[0][0], last_block)
        # The lock first, then the hooks: they are on the shared model, and a short request that goes between
        # two batches must run it unedited.
        with loaded.lock.background(), hooks_for(part), torch.inference_mode():  # short requests go first
            started = time.perf_counter()  # the batch's own time, not its wait for the lock
            out = run_from(loaded, setup, first, len(part), base=base)
            values[done:done + len(part)] = read(out).cpu().numpy()
            took = time.perf_counter() - started
        done += len(part)
        batch = int(np.clip(batch * BATCH_SECONDS / max(took, 1e-3), 1, 128))
        if progress:
            progress(done / len(sites), f"{verb} {done} of {len(sites)}")
    return values


def copy_edits(part: list[tuple[int, int]], put: Callable[[torch.Tensor, int, int, int], None],
               rows: Mapping[str, int] | None = None):
    """A hook fn, edit(x, hook), for a batch of copies: copy b is edited at its site part[b] = (layer, index)
    by put(x, b, layer, index), on a clone of x (returned: the model reads the clone); where no copy has a site
    it returns None (x unchanged). A point's layer is hook.layer, or rows[hook.name] (patching's last row, L,
    is the last block's hook_resid_post). Shapes: x [batch, ...]."""
    def edit(x: torch.Tensor, hook: HookPoint) -> torch.Tensor | None:
        layer = hook.layer if rows is None else rows[hook.name]
        mine = [(b, index) for b, (site_layer, index) in enumerate(part) if site_layer == layer]
        if not mine:
            return None
        x = x.clone()
        for b, index in mine:
            put(x, b, layer, index)
        return x
    return edit


def head_slices(part: list[tuple[int, int]], source: list[torch.Tensor] | None):
    """The hook_z edit that sets head h of copy b (part[b] = (layer, h)) to source[layer]'s head h (its values
    at every position, [pos, head_index, d_head], or one [head_index, d_head] for all), or to 0 when source is
    None."""
    def put(z, b, layer, h):  # z [batch, pos, head_index, d_head]
        z[b, :, h] = 0 if source is None else source[layer][..., h, :]
    return copy_edits(part, put)


def linear_metric(loaded: LoadedModel, contrast: Contrast) -> Callable[[object], torch.Tensor]:
    """read() for a base model's output: the contrast's m at the last position, from the final hidden state
    (h . W_U[t] + b[t], soft-capped as the model caps its logits): no copy computes the whole vocabulary's
    logits, only the target's and the foil's."""
    unembed = loaded.network.get_output_embeddings()
    ids = [contrast.target.token_id, contrast.foil.token_id]
    rows = parameter(unembed)[ids].detach().double()  # (2, D)
    bias = torch.zeros(2, dtype=torch.float64) if unembed.bias is None else unembed.bias[ids].detach().double()

    def read(out):
        h = out.last_hidden_state[:, -1].double()
        two = h @ rows.T.to(h.device) + bias.to(h.device)  # (B, 2): target, foil
        return logit_difference(final_logits(loaded, two), 0, 1)  # (B,)
    return read
