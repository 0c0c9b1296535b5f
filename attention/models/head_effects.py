"""Which heads matter for what the model does here: every head ablated exactly, and a one-pass estimate.

A head's output z_h (its slice of the output projection's input; TransformerLens's hook_z) is removed:
set to zero ("zero"), or to its mean over the text's positions ("mean"), at every position. The metric:
    decoders   logit(target) - logit(foil) at the last position (does the model prefer " Mary" to " John"?)
    encoders   1 - cos(h, h_ablated) of one token's final vector (how much the head moves "bank")
effect = metric(ablated) - metric(clean): negative means the head supported the target.

head_ablation runs every ablation exactly, a batch of prompt copies at a time, each copy with one head
removed; attribution_patching estimates them all from one forward and one backward pass (Nanda 2023):
    effect_h ~ sum over positions and dimensions of (z_h ablated - z_h) * d metric / d z_h

Shapes: L layers, H heads, d head size, n tokens; effects (L, H).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from attention.models.model_attention import ModelAttention
from attention.models.recompute import LONG_WORK_TOKENS, work_threads
from attention.models.running import LoadedModel, attend, has_lm_head, output_projection_module
from attention.models.tokens import find_word

METHODS = {"zero": "set to zero", "mean": "set to its mean over the text's positions"}
BATCH_SECONDS = 0.8  # the lock is released between batches: another user's sentence waits at most about this


@dataclass(frozen=True)
class TokenChoice:
    """How a word the user typed became the one token a metric reads."""

    text: str  # as typed
    token_id: int
    token: str  # the token used, as text
    pieces: int  # how many tokens the word is; only the first is used

    def __post_init__(self):
        if self.pieces < 1:
            raise ValueError("empty token choice")


def choose_token(tokenizer, word: str, role: str = "target") -> TokenChoice:
    """The first token of `word` (" Mary" with its leading space is one SmolLM2 token; "Mary" another)."""
    if not isinstance(word, str) or not word.strip():
        raise ValueError(f"Type the {role} token: it is empty.")
    ids = tokenizer(word, add_special_tokens=False)["input_ids"]
    if not ids:
        raise ValueError(f"The tokenizer makes no token of the {role} “{word}”.")
    return TokenChoice(text=word, token_id=int(ids[0]), token=tokenizer.decode([ids[0]]), pieces=len(ids))


@dataclass(frozen=True)
class HeadEffects:
    baseline: float  # the metric on the unablated model
    effect: np.ndarray  # (L, H) ablated - baseline
    method: str  # "zero" or "mean"
    metric: str  # what was measured, in words
    estimated: bool  # True for attribution patching (first-order), False for exact ablation
    target: TokenChoice | None = None
    foil: TokenChoice | None = None
    token: int | None = None  # the token whose vector an encoder metric follows

    def ranked(self, k: int = 15) -> list[tuple[int, int, float]]:
        """The k (layer, head, effect) with the largest |effect|, 0-based."""
        order = np.argsort(-np.abs(self.effect), axis=None, kind="stable")[:k]
        h = self.effect.shape[1]
        return [(int(i // h), int(i % h), float(self.effect.flat[i])) for i in order]


def rank_correlation(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rho of two arrays of the same shape (ties broken by order): how well the estimate
    ranks heads as the exact scan does."""
    ra = np.argsort(np.argsort(np.ravel(a), kind="stable"), kind="stable").astype(float)
    rb = np.argsort(np.argsort(np.ravel(b), kind="stable"), kind="stable").astype(float)
    return float(np.corrcoef(ra, rb)[0, 1])


@dataclass(frozen=True)
class _Setup:
    att: ModelAttention  # the clean pass: tokens, modules
    ids: torch.Tensor  # (1, n)
    projections: list[torch.nn.Module]  # per layer, the linear layer reading the concatenated heads
    n_heads: int
    head_size: int
    clean: object  # the model's output on the clean text, computed as the ablated runs are (eager attention)
    layer_inputs: list[torch.Tensor] | None  # (1, n, D) each layer's input on the clean text, when the model
    # can start a forward pass at any layer (see _layers_of); None otherwise


def _setup(loaded: LoadedModel, text: str) -> _Setup:
    att = attend(loaded, text)
    network = loaded.network
    modules = dict(network.named_modules())
    found = [output_projection_module(modules, name) for name in att.self_attn.modules]
    if any(f is None for f in found):
        raise ValueError(f"{loaded.spec.name}'s output projection was not found: its heads cannot be ablated here.")
    ids = torch.as_tensor(att.token_ids)[None].to(loaded.device)
    stack = _layers_of(network)
    inputs = {}
    hooks = [] if stack is None else [
        layer.register_forward_pre_hook(lambda m, args, kwargs, i=i: inputs.__setitem__(
            i, (args[0] if args else kwargs["hidden_states"]).detach().clone()), with_kwargs=True)
        for i, layer in enumerate(stack[1])]
    try:
        with loaded.lock, torch.inference_mode():
            clean = network(input_ids=ids, **_lm_kwargs(loaded))
    finally:
        for h in hooks:
            h.remove()
    return _Setup(att=att, ids=ids, projections=found, n_heads=att.n_heads, head_size=att.self_attn.v.shape[-1],
                  clean=clean, layer_inputs=None if stack is None else [inputs[i] for i in range(len(found))])


def _layers_of(network) -> tuple[torch.nn.Module, torch.nn.ModuleList] | None:
    """(the decoder stack, its layers) when a forward pass can start at any layer: llama-style models take
    the residual stream there as `inputs_embeds` (rotary positions are not added to the embeddings).
    Ablating a layer-l head leaves layers < l unchanged, so those copies start at layer l: about half the
    work of running all 30 layers for each of SmolLM2's 270 heads."""
    base = getattr(network, "model", network)
    layers = getattr(base, "layers", None)
    if isinstance(layers, torch.nn.ModuleList) and hasattr(base, "rotary_emb") and hasattr(base, "embed_tokens"):
        return base, layers
    return None


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
    stack = _layers_of(loaded.network) if setup.layer_inputs is not None else None
    if stack is None or first_layer == 0:
        return network(input_ids=setup.ids.repeat(copies, 1), **kwargs)
    decoder, layers = stack
    decoder.layers = torch.nn.ModuleList(list(layers)[first_layer:])
    try:
        return network(inputs_embeds=setup.layer_inputs[first_layer].repeat(copies, 1, 1), **kwargs)
    finally:
        decoder.layers = layers


def _scan(loaded: LoadedModel, setup: _Setup, method: str, read: Callable[[object], torch.Tensor],
          progress, *, base: bool = False) -> np.ndarray:
    """metric for every single-head ablation: (L, H), in batches of about BATCH_SECONDS each."""
    if method not in METHODS:
        raise ValueError(f"unknown ablation {method!r}; choose one of {', '.join(METHODS)}")
    L, H, d = len(setup.projections), setup.n_heads, setup.head_size
    means = [z.mean(0) for z in _clean_z(loaded, setup)] if method == "mean" else None
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


def head_ablation(loaded: LoadedModel, text: str, target: str, foil: str, *, method: str = "zero",
                  progress: Callable[[float, str], None] | None = None) -> HeadEffects:
    """Remove each head in turn; effect on logit(target) - logit(foil) at the last position."""
    setup, t, f = _logit_setup(loaded, text, target, foil)

    # logit(t) - logit(f) = h . (W_U[t] - W_U[f]) + (b[t] - b[f]) for the final hidden state h: the scan
    # runs the model without its LM head, so no copy computes 49,152 logits to keep two.
    unembed = loaded.network.get_output_embeddings()
    direction = (unembed.weight[t.token_id] - unembed.weight[f.token_id]).double()  # (D,)
    offset = 0.0 if unembed.bias is None else float(unembed.bias[t.token_id] - unembed.bias[f.token_id])

    def read(out):
        return out.last_hidden_state[:, -1].double() @ direction + offset  # (B,)

    baseline = float(setup.clean.logits[0, -1, t.token_id].double() - setup.clean.logits[0, -1, f.token_id].double())
    with work_threads(LONG_WORK_TOKENS):  # a batch holds dozens of copies of the text: long work
        ablated = _scan(loaded, setup, method, read, progress, base=True)
    return HeadEffects(baseline=baseline, effect=ablated - baseline, method=method, estimated=False,
                       metric=f"logit(“{t.token}”) − logit(“{f.token}”)", target=t, foil=f)


def head_ablation_cosine(loaded: LoadedModel, text: str, word: str, *, method: str = "zero",
                         progress: Callable[[float, str], None] | None = None) -> HeadEffects:
    """For encoders (no next token): remove each head in turn; effect on 1 - cos of `word`'s final vector
    with and without the head (0 on the clean model)."""
    setup = _setup(loaded, text)
    i = find_word(setup.att.tokens, word)
    clean = setup.clean.last_hidden_state[0, i].double()  # (D,)

    def read(out):
        return 1 - torch.nn.functional.cosine_similarity(out.last_hidden_state[:, i].double(), clean[None], dim=-1)

    with work_threads(LONG_WORK_TOKENS):
        ablated = _scan(loaded, setup, method, read, progress)
    return HeadEffects(baseline=0.0, effect=ablated, method=method, estimated=False, token=i,
                       metric=f"1 − cos(“{setup.att.tokens[i]}” with the head, without it)")


def attribution_patching(loaded: LoadedModel, text: str, target: str, foil: str, *,
                         method: str = "zero") -> HeadEffects:
    """Every head's ablation effect on logit(target) - logit(foil), estimated to first order from one
    forward and one backward pass: (z_ablated - z) . d metric / d z, summed over the head's slice."""
    setup, t, f = _logit_setup(loaded, text, target, foil)
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
            metric = logits[t.token_id] - logits[f.token_id]
            metric.backward()
    finally:
        grad_from_here.remove()
        for p, flag in zip(network.parameters(), flags, strict=True):
            p.requires_grad_(flag)
    L, H = len(setup.projections), setup.n_heads
    estimate = np.zeros((L, H))
    for layer in range(L):
        z, grad = seen[layer][0].detach(), seen[layer].grad[0]  # (n, H * d)
        delta = -z if method == "zero" else z.mean(0, keepdim=True) - z
        estimate[layer] = (delta * grad).reshape(z.shape[0], H, d).sum((0, 2)).cpu().numpy()
    return HeadEffects(baseline=float(metric.detach()), effect=estimate, method=method, estimated=True,
                       metric=f"logit(“{t.token}”) − logit(“{f.token}”)", target=t, foil=f)


def _logit_setup(loaded: LoadedModel, text: str, target: str, foil: str) -> tuple[_Setup, TokenChoice, TokenChoice]:
    if not has_lm_head(loaded.network):
        raise ValueError(f"{loaded.spec.name} is an encoder: it predicts no next token, so there is no logit "
                         "difference to measure. Use the token-vector metric, or choose a decoder (SmolLM2).")
    t = choose_token(loaded.tokenizer, target, "target")
    f = choose_token(loaded.tokenizer, foil, "foil")
    if t.token_id == f.token_id:
        raise ValueError(f"The target and the foil are the same token (“{t.token}”): their logit difference is "
                         "always 0. Choose two different next tokens.")
    return _setup(loaded, text), t, f
