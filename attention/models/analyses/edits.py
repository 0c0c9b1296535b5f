"""Running a model with parts of it edited: what ablation, patching and attribution share.

Two places can be edited, both found through the family's anatomy (attention.models.forward.anatomy):
    z       a layer's heads' outputs side by side, (B, n, H * d): the input of its output projection W_O
            (TransformerLens's hook_z); one head is the slice h * d ... (h + 1) * d
    block   the residual stream entering a block, (B, n, D)
`edit_setup(loaded, att)` runs the clean text once and keeps what every edited run needs: the token ids,
each layer's W_O, and each block's input on this text. `scan(...)` runs many edited copies of a text in
batches of about BATCH_SECONDS each, releasing the model's lock in between so that another user's
sentence waits at most about that long; llama-style models start each batch at its first edited layer,
from the residual stream there (about half the work for an ablation of every head).

Shapes: L layers, H heads, d head size, n tokens, D model size, B copies in a batch.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from attention.models.analyses.target_foil import Contrast, logit_difference
from attention.models.forward.anatomy import Anatomy, MissingAnatomy, has_lm_head, parameter
from attention.models.forward.model import LoadedModel, cap_logits
from attention.models.forward.model_attention import ModelAttention

BATCH_SECONDS = 0.5  # the lock is released between batches: another user's sentence waits at most about this
EFFECT_MAX_TOKENS = 512  # longer texts are refused: one pass per edit, and attribution's backward pass keeps
# every layer's eager weights (SmolLM2 at 4,096 tokens: 600 MB a layer)


@dataclass(frozen=True)
class EditSetup:
    att: ModelAttention  # the clean pass: tokens, modules
    ids: torch.Tensor  # (1, n)
    projections: tuple[torch.nn.Module, ...]  # per layer, W_O: the linear layer reading the concatenated heads
    blocks: tuple[torch.nn.Module, ...]  # per layer, the block
    n_heads: int
    head_size: int
    clean: object  # the model's output on the text, computed as the edited runs are (eager attention)
    restart: tuple[torch.nn.Module, str, torch.nn.ModuleList] | None  # (parent, attribute, blocks) when a pass
    # can start at any block (see restart_of); None otherwise
    block_inputs: tuple[torch.Tensor, ...]  # L x (1, n, D): the residual stream entering each block


def edit_setup(loaded: LoadedModel, att: ModelAttention) -> EditSetup:
    """Everything edited runs of `att`'s text need; ValueError (for the page) when they cannot be made."""
    name = loaded.spec.name
    if att.model_name != name:
        raise ValueError(f"this result is {att.model_name}'s, not {name}'s")
    if len(att.tokens) > EFFECT_MAX_TOKENS:
        raise ValueError(f"Head effects are measured on texts of up to {EFFECT_MAX_TOKENS} tokens (every head is "
                         f"removed in a pass of its own); this text has {len(att.tokens):,}. Keep the part that "
                         "leads to the prediction.")
    if att.architecture == "encoder-decoder":
        raise ValueError(f"{name} is an encoder-decoder model: head effects are measured here on encoders and "
                         "decoders only.")
    try:
        parts = loaded.anatomy
    except MissingAnatomy as err:
        raise ValueError(f"{name}'s heads cannot be removed here: {err}.") from None
    if parts.family.shared_layers:
        raise ValueError(f"{name} runs one shared block for every layer ({parts.model_type}): removing a head "
                         "from one layer alone would remove it from all of them, so head effects are not shown.")
    ids = torch.as_tensor(att.token_ids)[None].to(loaded.device)
    inputs = {}
    with loaded.lock, torch.inference_mode():  # hooks only while the model is ours: another user's pass is not seen
        hooks = [block.register_forward_pre_hook(lambda m, args, kwargs, i=i: inputs.__setitem__(
            i, _hidden_of(args, kwargs).detach().clone()), with_kwargs=True) for i, block in enumerate(parts.blocks)]
        try:
            clean = loaded.network(input_ids=ids, **lm_kwargs(loaded))
        finally:
            for h in hooks:
                h.remove()
    L, H = len(parts.outputs), att.n_heads
    return EditSetup(att=att, ids=ids, projections=parts.outputs, blocks=parts.blocks, n_heads=H,
                     head_size=parts.output_weight(0).shape[0] // H, clean=clean, restart=restart_of(parts),
                     block_inputs=tuple(inputs[i] for i in range(L)))


def _hidden_of(args, kwargs) -> torch.Tensor:
    return args[0] if args else kwargs["hidden_states"]


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


@contextlib.contextmanager
def hooked_z(setup: EditSetup, edit: Callable[[int, torch.Tensor], torch.Tensor]):
    """Route each layer's z (the projection's input, (B, n, H * d)) through edit(layer, z)."""
    handles = [p.register_forward_pre_hook(lambda module, args, layer=layer: (edit(layer, args[0]), *args[1:]))
               for layer, p in enumerate(setup.projections)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


@contextlib.contextmanager
def hooked_blocks(setup: EditSetup, edit: Callable[[int, torch.Tensor], torch.Tensor]):
    """Route the residual stream entering each block ((B, n, D)) through edit(layer, x)."""
    def hook(module, args, kwargs, layer):
        if args:
            return (edit(layer, args[0]), *args[1:]), kwargs
        return args, {**kwargs, "hidden_states": edit(layer, kwargs["hidden_states"])}

    handles = [block.register_forward_pre_hook(lambda m, a, k, layer=layer: hook(m, a, k, layer), with_kwargs=True)
               for layer, block in enumerate(setup.blocks)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def z_of(loaded: LoadedModel, setup: EditSetup) -> list[torch.Tensor]:
    """Each layer's z on the setup's text, (n, H * d)."""
    seen = {}

    def keep(layer, z):
        seen[layer] = z[0].detach().clone()
        return z

    with loaded.lock, hooked_z(setup, keep), torch.inference_mode():
        loaded.network(input_ids=setup.ids)
    return [seen[layer] for layer in range(len(setup.projections))]


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
        return network(inputs_embeds=setup.block_inputs[first_layer].repeat(copies, 1, 1), **kwargs)
    finally:
        setattr(parent, attribute, blocks)


def scan(loaded: LoadedModel, setup: EditSetup, sites: list[tuple[int, int]],
         hooks_for: Callable[[list[tuple[int, int]]], contextlib.AbstractContextManager],
         read: Callable[[object], torch.Tensor], progress, *, base: bool = False, verb: str = "Edited",
         last_block: int | None = None) -> np.ndarray:
    """read(output) of one edited copy of the text per site (layer, index), sites sorted by layer:
    hooks_for(part) installs the edits of a batch, copy b editing part[b] (hooked_z, hooked_blocks), while the
    batch holds the model's lock: hooks on the shared model are never up while another pass runs. A batch
    starts at its first site's layer (at most `last_block`, for sites past the last block).
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


def copy_edits(part: list[tuple[int, int]], put: Callable[[torch.Tensor, int, int, int], None]):
    """edit(layer, x) for a batch of copies: copy b is edited at its site part[b] = (layer, index) by
    put(x, b, layer, index), on a clone of x; layers without a site pass x through. Shapes: x (B, ...)."""
    def edit(layer, x):
        mine = [(b, index) for b, (site_layer, index) in enumerate(part) if site_layer == layer]
        if not mine:
            return x
        x = x.clone()
        for b, index in mine:
            put(x, b, layer, index)
        return x
    return edit


def head_slices(setup: EditSetup, part: list[tuple[int, int]], source: list[torch.Tensor] | None):
    """The z edit that sets head h's slice of copy b (part[b] = (layer, h)) to source[layer]'s slice (its
    values at every position, or one row broadcast), or to 0 when source is None."""
    d = setup.head_size

    def put(z, b, layer, h):
        cut = slice(h * d, (h + 1) * d)
        z[b, :, cut] = 0 if source is None else source[layer][..., cut]
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
        return logit_difference(cap_logits(two, loaded.logit_softcap), 0, 1)  # (B,)
    return read
