"""Which heads matter for what the model does here: every head ablated exactly, and a one-pass estimate.

A head's output z_h (its slice of the output projection's input; TransformerLens's hook_z) is removed:
set to zero ("zero"), or to its mean over the text's positions ("mean"), at every position. The metric:
    decoders   logit(target) - logit(foil) at the last position (does the model prefer " Mary" to " John"?)
    encoders   1 - cos(h, h_ablated) of one token's final vector (how much the head moves "bank")
effect = metric(ablated) - metric(clean): negative means the head supported the target. For decoders the
clean metric is the Contrast's baseline (attention.models.contrast): target and foil are tokenized once,
and the scans, the estimate and the page all read the same m.

head_ablation runs every ablation exactly, a batch of prompt copies at a time, each copy with one head
removed; attribution_patching estimates them all from one forward and one backward pass (Nanda 2023):
    effect_h ~ sum over positions and dimensions of (z_h ablated - z_h) * d metric / d z_h

Every function takes the clean result `att` (attend() on the text) rather than the text: its token ids,
modules and head size are what the scans run on, so the text is not read again.

Shapes: L layers, H heads, d head size, n tokens; effects (L, H).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from attention.models.anatomy import Anatomy, MissingAnatomy
from attention.models.contrast import Contrast
from attention.models.model_attention import ModelAttention
from attention.models.recompute import LONG_WORK_TOKENS, work_threads
from attention.models.running import LoadedModel, has_lm_head
from attention.models.tokens import find_word

ABLATIONS = {"zero": "set to zero", "mean": "set to its mean over the text's positions"}  # how a head is removed
BATCH_SECONDS = 0.8  # the lock is released between batches: another user's sentence waits at most about this
EFFECT_MAX_TOKENS = 512  # longer texts are refused: one pass per head, and the estimate's backward pass keeps
# every layer's eager weights (SmolLM2 at 4,096 tokens: 600 MB a layer)


@dataclass(frozen=True)
class HeadEffects:
    """Every head's effect on one metric, removed one at a time (or estimated)."""

    baseline: float  # the metric on the unablated model
    effect: np.ndarray  # (L, H) ablated - baseline
    ablation: str  # how a head was removed: a key of ABLATIONS
    metric: str  # what was measured, in words
    estimated: bool  # True for attribution patching (first-order), False for exact ablation
    contrast: Contrast | None = None  # target and foil of a decoder's logit difference
    token: int | None = None  # the token whose vector an encoder metric follows

    def ranked(self, k: int = 15) -> list[tuple[int, int, float]]:
        """The k (layer, head, effect) with the largest |effect|, 0-based."""
        order = np.argsort(-np.abs(self.effect), axis=None, kind="stable")[:k]
        h = self.effect.shape[1]
        return [(int(i // h), int(i % h), float(self.effect.flat[i])) for i in order]


def rank_correlation(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rho of two arrays of the same shape (ties broken by order)."""
    ra = np.argsort(np.argsort(np.ravel(a), kind="stable"), kind="stable").astype(float)
    rb = np.argsort(np.argsort(np.ravel(b), kind="stable"), kind="stable").astype(float)
    return float(np.corrcoef(ra, rb)[0, 1])


@dataclass(frozen=True)
class ScanAgreement:
    """How well attribution patching ranks the heads as the exact scan does."""

    estimate: HeadEffects
    exact: HeadEffects
    spearman: float  # rank correlation of the two over all heads: 1 = the same order


def agreement(estimate: HeadEffects, exact: HeadEffects) -> ScanAgreement:
    """The estimate against the exact scan of the same metric; ValueError when they measure different things."""
    if estimate.metric != exact.metric or estimate.effect.shape != exact.effect.shape:
        raise ValueError(f"the estimate measures {estimate.metric} and the scan {exact.metric}: nothing to compare")
    return ScanAgreement(estimate, exact, rank_correlation(estimate.effect, exact.effect))


@dataclass(frozen=True)
class _Setup:
    att: ModelAttention  # the clean pass: tokens, modules
    ids: torch.Tensor  # (1, n)
    projections: tuple[torch.nn.Module, ...]  # per layer, the linear layer reading the concatenated heads (W_O)
    n_heads: int
    head_size: int
    clean: object  # the model's output on the clean text, computed as the ablated runs are (eager attention)
    restart: tuple[torch.nn.Module, str, torch.nn.ModuleList] | None  # (parent, attribute, blocks) when a pass
    # can start at any block (see _restart_of); None otherwise
    layer_inputs: list[torch.Tensor] | None  # (1, n, D) each block's input on the clean text, with restart


def _setup(loaded: LoadedModel, att: ModelAttention) -> _Setup:
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
    network = loaded.network
    ids = torch.as_tensor(att.token_ids)[None].to(loaded.device)
    restart = _restart_of(parts)
    inputs = {}
    hooks = [] if restart is None else [
        block.register_forward_pre_hook(lambda m, args, kwargs, i=i: inputs.__setitem__(
            i, (args[0] if args else kwargs["hidden_states"]).detach().clone()), with_kwargs=True)
        for i, block in enumerate(restart[2])]
    try:
        with loaded.lock, torch.inference_mode():
            clean = network(input_ids=ids, **_lm_kwargs(loaded))
    finally:
        for h in hooks:
            h.remove()
    L, H = len(parts.outputs), att.n_heads
    return _Setup(att=att, ids=ids, projections=parts.outputs, n_heads=H,
                  head_size=parts.output_weight(0).shape[0] // H, clean=clean, restart=restart,
                  layer_inputs=None if restart is None else [inputs[i] for i in range(L)])


def _restart_of(parts: Anatomy) -> tuple[torch.nn.Module, str, torch.nn.ModuleList] | None:
    """(the blocks' parent, its attribute, the blocks) when a forward pass can start at any block: llama-style
    models take the residual stream there as `inputs_embeds` (rotary positions are not added to the
    embeddings, nothing scales them). Ablating a layer-l head leaves layers < l unchanged, so those copies
    start at layer l: about half the work of running all 30 layers for each of SmolLM2's 270 heads."""
    if not parts.family.restartable:
        return None
    parent_path, _, attribute = parts.family.layers.rpartition(".")
    parent = parts.base.get_submodule(parent_path) if parent_path else parts.base
    return parent, attribute, getattr(parent, attribute)


@contextlib.contextmanager
def _hooked(setup: _Setup, edit: Callable[[int, torch.Tensor], torch.Tensor]):
    """Route each layer's z (the projection's input, (B, n, H * d)) through edit(layer, z)."""
    handles = [p.register_forward_pre_hook(lambda module, args, layer=layer: (edit(layer, args[0]), *args[1:]))
               for layer, p in enumerate(setup.projections)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def _clean_z(loaded: LoadedModel, setup: _Setup) -> list[torch.Tensor]:
    """Each layer's z on the clean text, (n, H * d): what mean ablation averages."""
    seen = {}

    def keep(layer, z):
        seen[layer] = z[0].detach().clone()
        return z

    with _hooked(setup, keep), loaded.lock, torch.inference_mode():
        loaded.network(input_ids=setup.ids)
    return [seen[layer] for layer in range(len(setup.projections))]


def _run_from(loaded: LoadedModel, setup: _Setup, first_layer: int, copies: int, *, base: bool = False):
    """The model on `copies` copies of the text, from `first_layer` on when it can (its input there is the
    clean one: every copy's ablation is at that layer or later). `base` runs the model without its LM
    head (last_hidden_state, no logits). Call with the model's lock held: the decoder stack is shortened
    for the duration of the call."""
    network = loaded.network.base_model if base else loaded.network
    kwargs = {} if base else _lm_kwargs(loaded)
    if setup.restart is None or first_layer == 0:
        return network(input_ids=setup.ids.repeat(copies, 1), **kwargs)
    parent, attribute, blocks = setup.restart
    setattr(parent, attribute, torch.nn.ModuleList(list(blocks)[first_layer:]))
    try:
        return network(inputs_embeds=setup.layer_inputs[first_layer].repeat(copies, 1, 1), **kwargs)
    finally:
        setattr(parent, attribute, blocks)


def _check(ablation: str) -> None:
    if ablation not in ABLATIONS:
        raise ValueError(f"unknown ablation {ablation!r}; choose one of {', '.join(ABLATIONS)}")


def _scan(loaded: LoadedModel, setup: _Setup, ablation: str, read: Callable[[object], torch.Tensor],
          progress, *, base: bool = False) -> np.ndarray:
    """metric for every single-head ablation: (L, H), in batches of about BATCH_SECONDS each."""
    L, H, d = len(setup.projections), setup.n_heads, setup.head_size
    means = [z.mean(0) for z in _clean_z(loaded, setup)] if ablation == "mean" else None
    todo = [(layer, head) for layer in range(L) for head in range(H)]  # by layer: a batch starts at its first
    values = np.zeros(L * H)
    batch, done = 8, 0
    while done < len(todo):
        part = todo[done:done + batch]
        keep = torch.ones(L, len(part), H * d, device=loaded.device)  # per layer: 1 where a copy keeps the head
        fill = torch.zeros_like(keep)  # what the removed slice becomes: 0, or the head's mean
        for b, (layer, head) in enumerate(part):
            keep[layer, b, head * d:(head + 1) * d] = 0
            if means is not None:
                fill[layer, b, head * d:(head + 1) * d] = means[layer][head * d:(head + 1) * d]

        def edit(layer, z, keep=keep, fill=fill):
            return z * keep[layer][:, None, :] + fill[layer][:, None, :]  # (B, n, H*d) * (B, 1, H*d)

        started = time.perf_counter()
        with _hooked(setup, edit), loaded.lock, torch.inference_mode():
            out = _run_from(loaded, setup, part[0][0], len(part), base=base)
            values[done:done + len(part)] = read(out).cpu().numpy()
        done += len(part)
        took = time.perf_counter() - started
        batch = int(np.clip(batch * BATCH_SECONDS / max(took, 1e-3), 1, 128))
        if progress:
            progress(done / len(todo), f"Ablated {done} of {len(todo)} heads")
    return values.reshape(L, H)


def _lm_kwargs(loaded: LoadedModel) -> dict:
    return {"logits_to_keep": 1} if has_lm_head(loaded.network) else {}


def head_ablation(loaded: LoadedModel, att: ModelAttention, contrast: Contrast, *, ablation: str = "zero",
                  progress: Callable[[float, str], None] | None = None) -> HeadEffects:
    """Remove each head in turn; effect on the contrast's logit(target) - logit(foil) at the last position.
    `att` is the clean result the contrast was read from."""
    _check(ablation)
    setup = _setup(loaded, att)
    t, f = contrast.target.token_id, contrast.foil.token_id

    # logit(t) - logit(f) = h . (W_U[t] - W_U[f]) + (b[t] - b[f]) for the final hidden state h: the scan
    # runs the model without its LM head, so no copy computes 49,152 logits to keep two.
    unembed = loaded.network.get_output_embeddings()
    direction = (unembed.weight[t] - unembed.weight[f]).detach().double()  # (D,)
    offset = 0.0 if unembed.bias is None else float((unembed.bias[t] - unembed.bias[f]).detach())

    def read(out):
        return out.last_hidden_state[:, -1].double() @ direction + offset  # (B,)

    with work_threads(LONG_WORK_TOKENS):  # a batch holds dozens of copies of the text: long work
        ablated = _scan(loaded, setup, ablation, read, progress, base=True)
    return HeadEffects(baseline=contrast.baseline, effect=ablated - contrast.baseline, ablation=ablation,
                       estimated=False, metric=contrast.metric, contrast=contrast)


def head_ablation_cosine(loaded: LoadedModel, att: ModelAttention, word: str, *, ablation: str = "zero",
                         progress: Callable[[float, str], None] | None = None) -> HeadEffects:
    """For encoders (no next token): remove each head in turn; effect on 1 - cos of `word`'s final vector
    with and without the head (0 on the clean model)."""
    _check(ablation)
    i = find_word(att.tokens, word)
    setup = _setup(loaded, att)
    clean = setup.clean.last_hidden_state[0, i].double()  # (D,)

    def read(out):
        return 1 - torch.nn.functional.cosine_similarity(out.last_hidden_state[:, i].double(), clean[None], dim=-1)

    with work_threads(LONG_WORK_TOKENS):
        ablated = _scan(loaded, setup, ablation, read, progress)
    return HeadEffects(baseline=0.0, effect=ablated, ablation=ablation, estimated=False, token=i,
                       metric=f"1 − cos(“{att.tokens[i]}” with the head, without it)")


def attribution_patching(loaded: LoadedModel, att: ModelAttention, contrast: Contrast, *,
                         ablation: str = "zero") -> HeadEffects:
    """Every head's ablation effect on the contrast's logit(target) - logit(foil), estimated to first order
    from one forward and one backward pass: (z_ablated - z) . d metric / d z, summed over the head's slice."""
    _check(ablation)
    setup = _setup(loaded, att)
    t, f = contrast.target.token_id, contrast.foil.token_id
    network, d = loaded.network, setup.head_size
    seen = {}

    def keep(layer, z):
        z.retain_grad()  # z is inside the graph: its .grad is the total derivative, through later layers too
        seen[layer] = z
        return z

    embeddings = network.get_input_embeddings()
    grad_from_here = embeddings.register_forward_hook(lambda module, args, out: out.requires_grad_(True))
    flags = [p.requires_grad for p in network.parameters()]
    try:
        with _hooked(setup, keep), loaded.lock, torch.enable_grad():
            for p in network.parameters():
                p.requires_grad_(False)  # gradients for the activations only, not the 135M parameters
            logits = network(input_ids=setup.ids, logits_to_keep=1).logits[0, -1]
            metric = logits[t] - logits[f]
            metric.backward()
    finally:
        grad_from_here.remove()
        for p, flag in zip(network.parameters(), flags, strict=True):
            p.requires_grad_(flag)
    L, H = len(setup.projections), setup.n_heads
    estimate = np.zeros((L, H))
    for layer in range(L):
        z, grad = seen[layer][0].detach(), seen[layer].grad[0]  # (n, H * d)
        delta = -z if ablation == "zero" else z.mean(0, keepdim=True) - z
        estimate[layer] = (delta * grad).reshape(z.shape[0], H, d).sum((0, 2)).cpu().numpy()
    return HeadEffects(baseline=contrast.baseline, effect=estimate, ablation=ablation, estimated=True,
                       metric=contrast.metric, contrast=contrast)
