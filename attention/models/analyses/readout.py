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

import contextlib
from dataclasses import dataclass

import numpy as np
import torch

from attention.models.analyses.target_foil import Contrast, TokenChoice
from attention.models.forward.anatomy import Anatomy, home, parameter
from attention.models.forward.capabilities import require
from attention.models.forward.hook_points import HookPoint, hook_names, hooks
from attention.models.forward.model import LoadedModel, final_logits
from attention.models.forward.model_attention import ModelAttention, shown_tokens
from attention.models.forward.tokens import out_of_text_labels

LENS_MAX_POSITIONS = 64  # the logit lens reads the last this-many positions (each costs L + 1 unembeddings)
LENS_ROWS = 512  # residual vectors unembedded at once
LENS_VOCAB = 2_048  # tokens of the vocabulary unembedded at once (512 x 2,048 float32 logits, 4 MB: in cache while
# reduced; SmolLM2's lens: slabs of 2,048 took 0.9x the plain unembedding of the same vectors, of 8,192 1.14x)


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
    """One forward pass's residual stream, read at TransformerLens's hook points (float64): each block's input
    at every position (and the stream after the last block), and at the last position what each attention
    wrote. Shapes: resid (L + 1, n, D), z (L, H, d), attention_out (L, D)."""

    resid: torch.Tensor  # blocks.{l}.hook_resid_pre for l < L; blocks.{L-1}.hook_resid_post (the final norm's
    # input) for l = L
    z: torch.Tensor  # each layer's attn.hook_z at the last position: every head's output (W_O's input)
    attention_out: torch.Tensor  # what each attention adds at the last position: hook_attn_out, W_O's output (its
    # bias included) in every family whose heads write linearly (the only ones direct attribution reads)


def _anatomy_for_readout(loaded: LoadedModel, att: ModelAttention, feature: str) -> Anatomy:
    require(loaded, feature)
    if att.next_logits is None:
        raise ValueError(f"{loaded.spec.name}'s result holds no next-token logits to read.")
    return loaded.anatomy


def residual_stream(loaded: LoadedModel, att: ModelAttention, parts: Anatomy) -> Residual:
    """Run att's text once (eager attention), reading every block's hook_resid_pre, the last block's
    hook_resid_post, and at the last position every layer's attn.hook_z and hook_attn_out."""
    ids = torch.as_tensor(att.token_ids)[None].to(loaded.device)
    L = len(parts.blocks)
    resid, z, written = [None] * (L + 1), [None] * L, [None] * L

    def keep_resid_pre(t: torch.Tensor, hook: HookPoint) -> None:  # [1, pos, d_model]
        resid[hook.layer] = t[0].detach().double()

    def keep_resid_final(t: torch.Tensor, hook: HookPoint) -> None:  # [1, pos, d_model]
        resid[L] = t[0].detach().double()

    def keep_z(t: torch.Tensor, hook: HookPoint) -> None:  # [1, pos, head_index, d_head]
        z[hook.layer] = t[0, -1].detach().double()

    def keep_written(t: torch.Tensor, hook: HookPoint) -> None:  # [1, pos, d_model]
        written[hook.layer] = t[0, -1].detach().double()

    fwd_hooks = ([(f"blocks.{layer}.hook_resid_pre", keep_resid_pre) for layer in range(L)]
                 + [(f"blocks.{layer}.attn.hook_z", keep_z) for layer in range(L)]
                 + [(f"blocks.{L - 1}.hook_resid_post", keep_resid_final)])
    has_attn_out = "blocks.0.hook_attn_out" in hook_names(loaded)
    if has_attn_out:
        fwd_hooks += [(f"blocks.{layer}.hook_attn_out", keep_written) for layer in range(L)]
    # hooks on the shared model: only while no other pass runs
    with (loaded.lock, torch.inference_mode(), hooks(loaded, fwd_hooks, lock=False),
          contextlib.nullcontext() if has_attn_out else _w_o_outputs(parts, keep_written)):
        loaded.network(input_ids=ids, logits_to_keep=1)
    return Residual(resid=torch.stack(resid), z=torch.stack(z), attention_out=torch.stack(written))


@contextlib.contextmanager
def _w_o_outputs(parts: Anatomy, keep):
    """keep(W_O's output, blocks.{l}.hook_attn_out) for every layer l, where hook_points has no hook_attn_out:
    OPT, Falcon and BLOOM, whose anatomy entry has no `writes` (what they add to the stream is not described
    there, so hook_points gives them neither hook_attn_out nor hook_mlp_out; nor a write scale, which only an
    inferred anatomy has, and it always has writes). Their heads write linearly
    (Family.linear_heads, the only families direct attribution reads): what attention adds is W_O's output as
    it is, what TransformerLens calls hook_attn_out. So this one hook is put on by hand, and removed in finally;
    the caller holds the model's lock."""
    handles = [w_o.register_forward_hook(
        lambda module, args, out, layer=layer: keep(out, HookPoint(f"blocks.{layer}.hook_attn_out")))
        for layer, w_o in enumerate(parts.outputs)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


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
    # Which form the module computes is asked of it in float64 (its own weights, made float64): run in the
    # model's own half precision, its output is rounded to 3 significant digits and no form matches to rtol
    # 1e-4 (the bfloat16 refusal of issue 42). A and beta are then the same map in float64, as for a float32
    # model. A module offloaded to disk runs as it is, in its dtype: in half precision it is then refused.
    tensors = dict(norm.named_parameters()) | dict(norm.named_buffers())
    with torch.inference_mode():
        if any(t.is_meta for t in tensors.values()):  # offloaded to disk: accelerate's hook brings them, in place
            device, dtype = home(norm)
            want = norm(x.to(device, dtype)[None])[0].double().to(x.device)
        else:
            as_float64 = {name: t.detach().to(x.device, torch.float64) for name, t in tensors.items()}
            want = torch.func.functional_call(norm, as_float64, (x[None],))[0].double()
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
    raise ValueError(f"this norm ({type(norm).__name__}) is neither a layer norm nor an RMS norm as written here, "
                     "so its scale cannot be frozen")


def direct_logit_attribution(loaded: LoadedModel, att: ModelAttention, contrast: Contrast) -> LogitAttribution:
    """Every head's, MLP's and the embeddings' direct share of the contrast's logit difference (module
    docstring). ValueError for families whose heads are not written linearly to the residual stream."""
    parts = _anatomy_for_readout(loaded, att, "direct attribution")
    r = residual_stream(loaded, att, parts)
    L, H = r.z.shape[0], att.n_heads
    apply, beta = frozen_norm(parts.final_norm, r.resid[L, -1])
    w_u = parameter(parts.unembed).detach().double().to(r.resid.device)
    u = (w_u[contrast.target.token_id] - w_u[contrast.foil.token_id]) * parts.logit_scale  # (D,)
    b_u = parts.unembed.bias
    t, f = contrast.target.token_id, contrast.foil.token_id
    constant = float(beta @ u) + (0.0 if b_u is None else float((b_u[t] - b_u[f]).detach()) * parts.logit_scale)
    heads = np.zeros((L, H))
    mlps = np.zeros(L)
    biases = constant
    for layer in range(L):
        w_o = torch.from_numpy(parts.output_weight(layer)).double().to(r.z.device)  # (H * d, D)
        d = w_o.shape[0] // H
        written = torch.einsum("hd,hdD->hD", r.z[layer], w_o.view(H, d, -1))  # (H, D) each head's write
        heads[layer] = (apply(written) @ u).cpu().numpy()
        biases += float(apply(r.attention_out[layer] - written.sum(0)) @ u)  # W_O's bias
        mlps[layer] = float(apply(r.resid[layer + 1, -1] - r.resid[layer, -1] - r.attention_out[layer]) @ u)
    embeddings = float(apply(r.resid[0, -1]) @ u)
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
    (and its logit soft cap, if any): the last row is the model's own prediction.

    transformers hands back the residual stream as att.hidden: every block's input, then the final stream
    already through the final norm. That last row's logits at the last position must be the model's own
    next-token logits (att.next_logits); for a family where they are not, a pass of our own reads the
    residual stream (residual_stream) and the lens is read again from it. Cost: one unembedding of the
    (L + 1) x n' vectors, reduced a slab of the vocabulary at a time (_lens_read; make bench: the lens against
    the unembedding alone)."""
    parts = _anatomy_for_readout(loaded, att, "logit lens")
    n = len(att.tokens)
    positions = np.arange(max(0, n - max_positions), n)
    resid = torch.from_numpy(np.ascontiguousarray(att.hidden[:, positions])).to(loaded.device)  # (L + 1, n', D)
    read = _lens_read(loaded, parts, resid, normed=True, target=target, own=att.next_logits)
    if read is None:  # the last row is not the final norm's output: read the stream from a pass of our own
        read = _lens_read(loaded, parts, residual_stream(loaded, att, parts).resid[:, positions], normed=False,
                          target=target)
    top_ids, top_p, target_p = read
    shape = (resid.shape[0], len(positions))
    top_ids = top_ids.reshape(shape)
    top_tokens = tuple(out_of_text_labels(loaded.tokenizer, row) for row in top_ids)  # " Paris" as "␣Paris"
    return LogitLens(positions=positions, tokens=tuple(shown_tokens(att)[i] for i in positions), top_ids=top_ids,
                     top_tokens=top_tokens, top_probability=top_p.reshape(shape), target=target,
                     target_probability=None if target_p is None else target_p.reshape(shape))


def _lens_read(loaded: LoadedModel, parts: Anatomy, resid: torch.Tensor, *, normed: bool,
               target: TokenChoice | None, own: np.ndarray | None = None):
    """(top token ids, their probabilities, the target's probabilities or None), each flat over
    (L + 1) x n', of the residual stream `resid` (L + 1, n', D) read through the final norm (the last row too
    unless `normed`) and the LM head. With `own` (the model's next-token logits): None when the last vector's
    logits are not those. The logits are made a slab of the vocabulary at a time and reduced while the slab is in cache
    (the running maximum and log-sum-exp of each row, as flash attention keeps them), so the (rows, V)
    logits never exist at once."""
    dtype = next(parts.final_norm.parameters()).dtype
    top_ids, top_p, target_p = [], [], []
    with torch.inference_mode():
        rows = resid.to(dtype)
        last = rows[-1:] if normed else parts.final_norm(rows[-1:])
        flat = torch.cat([parts.final_norm(rows[:-1]), last]).reshape(-1, rows.shape[-1])
        chunks = flat.split(LENS_ROWS)
        for chunk in chunks:
            best = torch.full((len(chunk),), -torch.inf, device=chunk.device)
            best_id = torch.zeros(len(chunk), dtype=torch.long, device=chunk.device)
            norm = torch.full((len(chunk),), -torch.inf, device=chunk.device)  # log sum exp of the logits so far
            chosen = None
            for first, logits in _unembed_slabs(parts.unembed, chunk):  # (rows, slab) logits at a time
                logits = final_logits(loaded, logits).float()
                if own is not None and chunk is chunks[-1] and not np.allclose(
                        logits[-1].double().cpu().numpy(), own[first:first + logits.shape[1]], atol=1e-3):
                    return None
                value, at = logits.max(-1)
                best_id = torch.where(value > best, at + first, best_id)  # the first of equal maxima, as max()
                best = torch.maximum(best, value)
                norm = torch.logaddexp(norm, torch.logsumexp(logits, -1))
                if target is not None and first <= target.token_id < first + logits.shape[1]:
                    chosen = logits[:, target.token_id - first].clone()
            top_ids.append(best_id.cpu().numpy())
            top_p.append(torch.exp(best - norm).cpu().numpy())
            if target is not None:
                target_p.append(torch.exp(chosen - norm).cpu().numpy())
    return (np.concatenate(top_ids), np.concatenate(top_p),
            np.concatenate(target_p) if target is not None else None)


def _unembed_slabs(unembed: torch.nn.Module, rows: torch.Tensor):
    """The LM head's logits of `rows` (r, D), LENS_VOCAB tokens at a time: (first token id, (r, slab)).
    A head that is not a plain Linear layer is run whole, as one slab."""
    if not isinstance(unembed, torch.nn.Linear):
        yield 0, unembed(rows)
        return
    device, dtype = home(unembed)
    weight, bias = parameter(unembed, "weight"), parameter(unembed, "bias")
    rows = rows.to(device, dtype)
    for first in range(0, weight.shape[0], LENS_VOCAB):
        stop = first + LENS_VOCAB
        yield first, torch.nn.functional.linear(rows, weight[first:stop].to(device),
                                                None if bias is None else bias[first:stop].to(device))
