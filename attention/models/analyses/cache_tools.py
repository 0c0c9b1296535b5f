"""TransformerLens's ActivationCache tools, on a run_with_cache cache (issue 72): the residual stream as a stack of
what each layer saw or wrote, each head's output apart, the final norm applied to a stack with its scale frozen, and
each part's direct share of a logit.

    >>> logits, cache = run_with_cache(m, prompt)
    >>> stack, labels = decompose_resid(cache, return_labels=True)   # embed, 0_attn_out, 0_mlp_out, ...
    >>> logit_attrs(m, cache, stack, " Mary", " John")             # [components, batch] at the last position
    >>> heads, labels = stack_head_results(m, cache, return_labels=True)  # [L * H, batch, pos, D]

Conventions: as TransformerLens 3.9's where it has one (accumulated_resid's labels "0_pre" ... "final_post",
decompose_resid's "embed", "{l}_attn_out", "{l}_mlp_out"), but a head is named as this package names it, from 1
("L19H7", HeadName.parse reads it back); "embed" is everything block 0 receives (GPT-2's learned positions
included: this package has no hook_pos_embed). apply_ln_to_stack freezes the final norm at the scale of the whole
stream at each position, as TransformerLens does with its cached ln_final.hook_scale, and applies its weight too
(the model is unfolded here); the norm's bias and the unembedding's are left out of a stack's shares, so the
shares of a complete decomposition plus `logit_constant` are the model's own logit (tests/test_hook_loop.py).
Pre-norm families only: a BERT-style block normalises after each sum, and its stream is no sum of parts.
"""

from __future__ import annotations

import torch

from attention.models.analyses.readout import frozen_norm
from attention.models.analyses.weight_views import weights
from attention.models.forward.anatomy import parameter
from attention.models.forward.model import LoadedModel
from attention.models.forward.token_ids import to_single_token
from attention.naming import head_name


def _layers(cache) -> int:
    return cache.n_layers


def accumulated_resid(cache, layer: int | None = None, *, return_labels: bool = False):
    """[layers, batch, pos, D]: the stream entering each block before `layer` (every block, and the stream after the
    last, for None). Needs every hook_resid_pre (and the last hook_resid_post) in the cache."""
    L = _layers(cache)
    upto = L if layer is None else layer
    parts = [cache[f"blocks.{i}.hook_resid_pre"] for i in range(upto)]
    labels = [f"{i}_pre" for i in range(upto)]
    if layer is None:
        parts.append(cache[f"blocks.{L - 1}.hook_resid_post"])
        labels.append("final_post")
    stack = torch.stack(parts)
    return (stack, labels) if return_labels else stack


def decompose_resid(cache, layer: int | None = None, *, return_labels: bool = False):
    """[components, batch, pos, D]: what block 0 received ("embed"), then what each block's attention and MLP
    added before `layer` (all blocks for None). They add up to the stream entering `layer` (after the last block
    for None), to float32 rounding, in a pre-norm model."""
    upto = _layers(cache) if layer is None else layer
    parts, labels = [cache["blocks.0.hook_resid_pre"]], ["embed"]
    for i in range(upto):
        parts += [cache[f"blocks.{i}.hook_attn_out"], cache[f"blocks.{i}.hook_mlp_out"]]
        labels += [f"{i}_attn_out", f"{i}_mlp_out"]
    stack = torch.stack(parts)
    return (stack, labels) if return_labels else stack


def stack_head_results(loaded: LoadedModel, cache, layer: int | None = None, *, return_labels: bool = False):
    """[heads, batch, pos, D]: each head's output before the sum, z_h W_O^h (hook_z and weights(model).W_O), for
    every head of the layers before `layer` (all for None), layer by layer. W_O's bias is no head's."""
    w_o = weights(loaded).W_O  # (L, H, d, D)
    upto = w_o.shape[0] if layer is None else layer
    parts, labels = [], []
    for i in range(upto):
        z = cache[f"blocks.{i}.attn.hook_z"].float()  # [batch, pos, H, d]
        parts.append(torch.einsum("bphd,hdD->hbpD", z, w_o[i].to(z.device)))
        labels += [head_name(i, h) for h in range(w_o.shape[1])]
    stack = torch.cat(parts)
    return (stack, labels) if return_labels else stack


def apply_ln_to_stack(loaded: LoadedModel, cache, stack: torch.Tensor, pos: int | None = None) -> torch.Tensor:
    """The final norm applied to each component of `stack` [components, batch, pos, D] (or [components, batch, D]
    at one position `pos`), its scale frozen at the whole stream's at that position (the last block's
    hook_resid_post), its weight applied, its bias left out (logit_constant has it). float64."""
    norm = loaded.anatomy.final_norm
    if norm is None:
        raise ValueError(f"{loaded.spec.name} has no final norm to apply (a BERT-style encoder normalises in each "
                         "block)")
    total = cache[f"blocks.{_layers(cache) - 1}.hook_resid_post"].double()  # [batch, pos, D]
    if pos is not None:
        return _frozen(norm, total[:, pos], stack.double())
    out = torch.empty_like(stack, dtype=torch.float64)
    for p in range(total.shape[1]):
        out[:, :, p] = _frozen(norm, total[:, p], stack[:, :, p].double())
    return out


def _frozen(norm, total: torch.Tensor, stack: torch.Tensor) -> torch.Tensor:
    """stack [components, batch, D] through the norm frozen at each batch row's total [batch, D]."""
    out = torch.empty_like(stack)
    for b in range(total.shape[0]):
        apply, _ = frozen_norm(norm, total[b])
        out[:, b] = apply(stack[:, b])
    return out


def _ids(loaded: LoadedModel, tokens) -> list[int]:
    """Token ids of a token or a list of them: ids as given, strings of one token each (to_single_token)."""
    return [t if isinstance(t, int) else to_single_token(loaded, t)
            for t in (tokens if isinstance(tokens, list | tuple) else [tokens])]


def _signed(loaded: LoadedModel, rows: torch.Tensor, tokens, incorrect_tokens) -> torch.Tensor:
    """rows [V, ...] at the tokens' ids (minus the incorrect tokens'), times the logit scale: [k, ...]."""
    out = rows[_ids(loaded, tokens)]
    if incorrect_tokens is not None:
        out = out - rows[_ids(loaded, incorrect_tokens)]
    return out * loaded.anatomy.logit_scale


def _direction(loaded: LoadedModel, tokens, incorrect_tokens=None) -> torch.Tensor:
    """W_U's column of each token (minus the incorrect one's), times the logit scale: (D,) or (D, k)."""
    u = _signed(loaded, parameter(loaded.anatomy.unembed).detach().double().cpu(), tokens, incorrect_tokens).T
    return u[:, 0] if u.shape[1] == 1 else u


def logit_attrs(loaded: LoadedModel, cache, stack: torch.Tensor, tokens, incorrect_tokens=None, *,
                pos: int = -1) -> torch.Tensor:
    """Each component's direct share of the logit of `tokens` (minus `incorrect_tokens`') at position `pos`:
    apply_ln_to_stack, then the unembedding's column(s). [components, batch] (a token each) or
    [components, batch, k]. Tokens: ids or strings of one token each."""
    if loaded.anatomy.unembed is None:
        raise ValueError(f"{loaded.spec.name} has no unembedding (no language-model head)")
    normed = apply_ln_to_stack(loaded, cache, stack[:, :, pos], pos=pos)  # [components, batch, D]
    return normed @ _direction(loaded, tokens, incorrect_tokens).to(normed.device)


def logit_constant(loaded: LoadedModel, cache, tokens, incorrect_tokens=None, *, pos: int = -1) -> torch.Tensor:
    """What no component writes: the final norm's bias and the unembedding's bias, in the same logit (or
    difference), [batch]. A complete decomposition's logit_attrs summed, plus this, is the model's logit."""
    parts = loaded.anatomy
    total = cache[f"blocks.{_layers(cache) - 1}.hook_resid_post"].double()[:, pos]  # [batch, D]
    u = _direction(loaded, tokens, incorrect_tokens)
    out = []
    for b in range(total.shape[0]):
        _, beta = frozen_norm(parts.final_norm, total[b])
        out.append(beta.cpu() @ u)
    constant = torch.stack(out)
    bias = getattr(parts.unembed, "bias", None)
    if bias is not None:
        b_u = _signed(loaded, bias.detach().double().cpu(), tokens, incorrect_tokens)
        constant = constant + (b_u[0] if b_u.numel() == 1 else b_u)
    return constant
