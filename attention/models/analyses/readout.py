"""The residual stream read out through the unembedding: direct logit attribution and the logit lens.

In a pre-norm transformer the residual stream at the last position is the sum of what every part wrote:

    x_final = embeddings + Σ_layers ( Σ_heads z_h W_O^h  +  b_O  +  mlp_l )

(mlp_l is everything else a block adds: its output, minus its input, minus its attention's output). The
final norm is affine once its scale is frozen at the clean run's value: N(x) = A x + β. So each part p
has a direct share of the logit difference m = logit(target) − logit(foil):

    share(p) = (A p) · (W_U[target] − W_U[foil])            constants: β · (...) + b_U[target] − b_U[foil]

and the shares add up to the model's own m (the tests hold them to 1e-3). A head's direct share is what it
writes straight to the output; its total effect (attention.models.analyses.head_effects) also counts what later
heads do with it. The logit lens reads every layer's residual stream, at every position, through the
model's own final norm (not frozen) and unembedding: which token the model "would say" after each layer.

Shapes: L layers, H heads, n positions, V vocabulary, D model size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attention.models.analyses.target_foil import Contrast, TokenChoice
from attention.models.forward.anatomy import Anatomy, MissingAnatomy, home, parameter
from attention.models.forward.model import LoadedModel, cap_logits
from attention.models.forward.model_attention import ModelAttention
from attention.models.forward.tokens import display_tokens

LENS_MAX_POSITIONS = 64  # the logit lens reads the last this-many positions (each costs L + 1 unembeddings)
LENS_ROWS = 512  # residual vectors unembedded at once (SmolLM2: 512 x 49,152 float32 logits, 100 MB)


@dataclass(frozen=True)
class LogitAttribution:
    """Each part's direct share of m = logit(target) − logit(foil) at the last position."""

    heads: np.ndarray  # (L, H) what each head writes, read through the frozen final norm and the unembedding
    mlps: np.ndarray  # (L,) what the rest of each block writes (its MLP)
    embeddings: float  # the residual stream entering the first block (token and position embeddings)
    biases: float  # the output projections' biases, the final norm's bias and the unembedding's bias
    total: float  # the sum of every share
    model: float  # the model's own m (the contrast's baseline): total equals it
    contrast: Contrast


@dataclass(frozen=True)
class Residual:
    """One forward pass's residual stream: each block's input at every position (and the final stream),
    and at the last position what each attention wrote. Shapes: streams (L + 1, n, D), z (L, H * d),
    attention_out (L, D)."""

    streams: torch.Tensor  # block l's input for l < L; the final norm's input for l = L
    z: torch.Tensor  # each layer's heads' outputs side by side, at the last position (W_O's input)
    attention_out: torch.Tensor  # each layer's W_O output at the last position (its bias included)


def _anatomy_for_readout(loaded: LoadedModel, att: ModelAttention, what: str) -> Anatomy:
    name = loaded.spec.name
    if att.next_logits is None:
        raise ValueError(f"{name} predicts no next token, so there is no {what} to read.")
    try:
        parts = loaded.anatomy
    except MissingAnatomy as err:
        raise ValueError(f"{name}: {err}.") from None
    if parts.final_norm is None or parts.unembed is None:
        raise ValueError(f"{name}'s final norm or unembedding is not known here, so its {what} cannot be read.")
    return parts


def residual_stream(loaded: LoadedModel, att: ModelAttention, parts: Anatomy) -> Residual:
    """Run att's text once with hooks on every block, W_O and the final norm (eager attention)."""
    ids = torch.as_tensor(att.token_ids)[None].to(loaded.device)
    L = len(parts.blocks)
    streams, z, written = [None] * (L + 1), [None] * L, [None] * L

    def block_input(layer):
        def hook(module, args, kwargs):
            streams[layer] = (args[0] if args else kwargs["hidden_states"])[0].detach().double()
        return hook

    def w_o(layer):
        def pre(module, args):
            z[layer] = args[0][0, -1].detach().double()

        def post(module, args, out):
            written[layer] = out[0, -1].detach().double()
        return pre, post

    with loaded.lock, torch.inference_mode():  # hooks on the shared model: only while no other pass runs
        handles = [b.register_forward_pre_hook(block_input(i), with_kwargs=True) for i, b in enumerate(parts.blocks)]
        for i, proj in enumerate(parts.outputs):
            pre, post = w_o(i)
            handles += [proj.register_forward_pre_hook(pre), proj.register_forward_hook(post)]
        handles.append(parts.final_norm.register_forward_pre_hook(
            lambda module, args: streams.__setitem__(L, args[0][0].detach().double())))
        try:
            loaded.network(input_ids=ids, logits_to_keep=1)
        finally:
            for h in handles:
                h.remove()
    return Residual(streams=torch.stack(streams), z=torch.stack(z), attention_out=torch.stack(written))


def frozen_norm(norm: torch.nn.Module, x: torch.Tensor):
    """(A, beta): the final norm as an affine map with its scale frozen at x's, so that A(x) + beta = norm(x):
    LayerNorm centres and divides by x's standard deviation, RMS norms divide by x's root mean square (with
    weight w, or 1 + w as Gemma's). ValueError when none of these reproduces the module on x.
    Shapes: x (D,) float64 -> A: (..., D) -> (..., D), beta (D,)."""
    weight = parameter(norm, "weight")
    w = torch.ones_like(x) if weight is None else weight.detach().double().to(x.device)
    bias = parameter(norm, "bias")
    beta = torch.zeros_like(x) if bias is None else bias.detach().double().to(x.device)
    eps = float(getattr(norm, "eps", None) or getattr(norm, "variance_epsilon", None) or 1e-6)
    device, dtype = home(norm)  # the module runs where it lives, in its dtype; A and beta live with x
    with torch.inference_mode():
        want = norm(x.to(device, dtype)[None])[0].double().to(x.device)
    sigma = torch.sqrt(((x - x.mean()) ** 2).mean() + eps)
    rms = torch.sqrt((x ** 2).mean() + eps)
    candidates = {
        "layer norm": (lambda c: (c - c.mean(-1, keepdim=True)) / sigma * w, beta),
        "RMS norm": (lambda c: c / rms * w, beta),
        "RMS norm (1 + w)": (lambda c: c / rms * (1 + w), beta),
    }
    for apply, b in candidates.values():
        if torch.allclose(apply(x) + b, want, rtol=1e-4, atol=1e-5):
            return apply, b
    raise ValueError(f"the final norm ({type(norm).__name__}) is neither a layer norm nor an RMS norm as written "
                     "here, so its scale cannot be frozen")


def direct_logit_attribution(loaded: LoadedModel, att: ModelAttention, contrast: Contrast) -> LogitAttribution:
    """Every head's, MLP's and the embeddings' direct share of the contrast's logit difference (module
    docstring). ValueError for families whose heads are not written linearly to the residual stream."""
    parts = _anatomy_for_readout(loaded, att, "logit difference")
    if not parts.family.linear_heads:
        raise ValueError(f"{loaded.spec.name} normalises what attention writes before adding it to the residual "
                         f"stream ({parts.model_type}): a head's direct share of the logits is not defined.")
    if loaded.logit_softcap:
        raise ValueError(f"{loaded.spec.name} soft-caps its logits: they are not a sum of parts.")
    r = residual_stream(loaded, att, parts)
    L, H = r.z.shape[0], att.n_heads
    apply, beta = frozen_norm(parts.final_norm, r.streams[L, -1])
    w_u = parameter(parts.unembed).detach().double().to(r.streams.device)
    u = w_u[contrast.target.token_id] - w_u[contrast.foil.token_id]  # (D,)
    b_u = parts.unembed.bias
    t, f = contrast.target.token_id, contrast.foil.token_id
    constant = float(beta @ u) + (0.0 if b_u is None else float((b_u[t] - b_u[f]).detach()))
    heads = np.zeros((L, H))
    mlps = np.zeros(L)
    biases = constant
    for layer in range(L):
        w_o = torch.from_numpy(parts.output_weight(layer)).double().to(r.z.device)  # (H * d, D)
        d = w_o.shape[0] // H
        written = torch.einsum("hd,hdD->hD", r.z[layer].view(H, d), w_o.view(H, d, -1))  # (H, D) each head's write
        heads[layer] = (apply(written) @ u).cpu().numpy()
        biases += float(apply(r.attention_out[layer] - written.sum(0)) @ u)  # W_O's bias
        mlps[layer] = float(apply(r.streams[layer + 1, -1] - r.streams[layer, -1] - r.attention_out[layer]) @ u)
    embeddings = float(apply(r.streams[0, -1]) @ u)
    total = float(heads.sum() + mlps.sum() + embeddings + biases)
    return LogitAttribution(heads=heads, mlps=mlps, embeddings=embeddings, biases=biases, total=total,
                            model=contrast.baseline, contrast=contrast)


@dataclass(frozen=True)
class LogitLens:
    """What the residual stream after each layer says, read through the final norm and the unembedding."""

    positions: np.ndarray  # (n',) the token positions read (the last LENS_MAX_POSITIONS at most)
    tokens: tuple[str, ...]  # (n',) the text's tokens there
    top_ids: np.ndarray  # (L + 1, n') the most likely next token after each layer (row 0: the embeddings)
    top_tokens: tuple[tuple[str, ...], ...]  # (L + 1) x (n') those tokens as text
    top_probability: np.ndarray  # (L + 1, n')
    target: TokenChoice | None  # a token followed through the layers, when one is named
    target_probability: np.ndarray | None  # (L + 1, n') its probability


def logit_lens(loaded: LoadedModel, att: ModelAttention, *, target: TokenChoice | None = None,
               max_positions: int = LENS_MAX_POSITIONS) -> LogitLens:
    """Every layer's residual stream at the last positions, through the model's own final norm and LM head
    (and its logit soft cap, if any): the last row is the model's own prediction."""
    parts = _anatomy_for_readout(loaded, att, "logit lens")
    n = len(att.tokens)
    positions = np.arange(max(0, n - max_positions), n)
    streams, normed = _lens_streams(loaded, att, parts)
    dtype = next(parts.final_norm.parameters()).dtype
    shape = (streams.shape[0], len(positions))
    top_ids, top_p, target_p = [], [], []
    with torch.inference_mode():
        rows = streams[:, positions].to(dtype)  # (L + 1, n', D)
        read = torch.cat([parts.final_norm(rows[:-1]), rows[-1:] if normed else parts.final_norm(rows[-1:])])
        for chunk in read.reshape(-1, read.shape[-1]).split(LENS_ROWS):  # (rows, V) logits at a time
            logits = cap_logits(parts.unembed(chunk), loaded.logit_softcap).float()
            norm = torch.logsumexp(logits, -1)  # softmax's denominator, without the (rows, V) probabilities
            best = logits.max(-1)
            top_ids.append(best.indices.cpu().numpy())
            top_p.append(torch.exp(best.values - norm).cpu().numpy())
            if target is not None:
                target_p.append(torch.exp(logits[:, target.token_id] - norm).cpu().numpy())
    top_ids = np.concatenate(top_ids).reshape(shape)
    top_tokens = tuple(display_tokens(loaded.tokenizer, row)[0] for row in top_ids)
    return LogitLens(positions=positions, tokens=tuple(att.tokens[i] for i in positions), top_ids=top_ids,
                     top_tokens=top_tokens, top_probability=np.concatenate(top_p).reshape(shape), target=target,
                     target_probability=np.concatenate(target_p).reshape(shape) if target is not None else None)


def _lens_streams(loaded: LoadedModel, att: ModelAttention, parts: Anatomy) -> tuple[torch.Tensor, bool]:
    """(L + 1, n, D) the residual stream after each layer, and whether the last row is already normalised.
    transformers returns it as att.hidden: every block's input, then the final stream after the final norm;
    that is checked against the model's own next-token logits, and a pass of our own reads it otherwise."""
    hidden = torch.from_numpy(np.ascontiguousarray(att.hidden)).to(loaded.device)
    with torch.inference_mode():
        last = parts.unembed(hidden[-1, -1:].to(parts.unembed.weight.dtype))[0].double().cpu().numpy()
    last = cap_logits(last, loaded.logit_softcap)
    if np.allclose(last, att.next_logits, atol=1e-3):
        return hidden, True
    return residual_stream(loaded, att, parts).streams, False
