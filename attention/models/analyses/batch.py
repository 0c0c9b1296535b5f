"""Analyses over a batch of prompt pairs (what IOI studies do over hundreds of pairs): the logit difference on
clean and corrupted prompts, and every head's direct share of it, per prompt and averaged.

    >>> pairs = ioi_pairs(m.tokenizer, 100)                       # attention.models.analyses.batch_pairs
    >>> m_of = logit_differences(m, pairs)                        # m_of.clean (100,), m_of.spread("clean").mean
    >>> dla = batch_attribution(m, pairs)                         # dla.heads (100, L, H)
    >>> [(str(h), round(s, 2)) for h, s in dla.top_heads(3)]      # [('L24H4', 2.38), ('L30H2', 1.31), ...]
    >>> patched = batch_patching(m, pairs)                        # attention.models.analyses.batch_patching

m = logit(target) − logit(foil) at each prompt's last token, from the model's own logits of one padded pass
(attention.models.analyses.batch_inputs: equal to each prompt alone). Direct logit attribution, per prompt, as
the app's single-prompt readout does it: the final norm is affine once its scale is frozen at that prompt's
final residual stream x (N(p) = A p + β, attention.models.analyses.readout.frozen_norm), so every part written
to the stream has a direct share (A p) · (W_U[target] − W_U[foil]) = p · v with v = Aᵀ u, and

    m = Σ_heads z_h W_O^h · v  +  Σ_layers mlp_l · v  +  embeddings · v  +  biases        (exactly, per prompt)

z_h is hook_z at the last real token, W_O^h the head's rows of the output projection; mlp_l is what the rest of
block l writes (resid_pre[l + 1] − resid_pre[l] − attn_out[l]); biases are W_O's bias, β · u and the
unembedding's bias. Values are per prompt; `spread(name)` gives the mean, std (over prompts, ddof 0), min and max.

Shapes: B prompts, L layers, H heads, d head size, D model size.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch

from attention.models.analyses.batch_inputs import chunks, last_logits, pad_batch, run_rows
from attention.models.analyses.batch_pairs import PromptPairs
from attention.models.analyses.readout import frozen_norm
from attention.models.analyses.target_foil import choose_token, logit_difference
from attention.models.forward.capabilities import require
from attention.models.forward.device import work_threads
from attention.models.forward.model import LoadedModel
from attention.naming import HeadName


@dataclass(frozen=True)
class Spread:
    """One quantity over prompts: mean, std (ddof 0), min and max, each of the quantity's own shape; prompts
    whose value is NaN (a patching ratio with no gap to restore) are left out, and `n` counts the rest."""

    mean: np.ndarray  # (...) the quantity's shape (a scalar's: ())
    std: np.ndarray  # (...)
    min: np.ndarray  # (...)
    max: np.ndarray  # (...)
    n: np.ndarray  # (...) prompts counted


def spread(values) -> Spread:
    """The Spread of per-prompt values over their first axis. Shapes: (B, ...) -> each field (...)."""
    v = np.asarray(values, dtype=np.float64)
    v = np.where(np.isfinite(v), v, np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a quantity NaN on every prompt: NaN, and n says 0
        return Spread(np.nanmean(v, 0), np.nanstd(v, 0), np.nanmin(v, 0), np.nanmax(v, 0), np.isfinite(v).sum(0))


def pair_token_ids(tokenizer, pairs: PromptPairs) -> tuple[np.ndarray, np.ndarray]:
    """(targets, foils): each row's target and foil as token ids (attention.models.analyses.target_foil.
    choose_token). ValueError for a row whose two are one token, or either of which is more than one token: m
    compares the next token's logits, and a word of several tokens would be read as its first alone (the rows,
    counted from 1 as a file's lines are, are named). Shapes: (B,), (B,)."""
    targets, foils, longer = [], [], []
    for i, row in enumerate(pairs):
        t, f = choose_token(tokenizer, row.target, "target"), choose_token(tokenizer, row.foil, "foil")
        if t.token_id == f.token_id:
            raise ValueError(f"row {i + 1}: the target {row.target!r} and the foil {row.foil!r} are one token")
        longer += [f"row {i + 1}'s {what} {word!r} ({c.pieces} tokens)" for what, word, c in
                   (("target", row.target, t), ("foil", row.foil, f)) if c.pieces > 1]
        targets.append(t.token_id)
        foils.append(f.token_id)
    if longer:
        raise ValueError(f"m compares one next token, and {len(longer)} target or foil words are more than one "
                         f"token for this model: {'; '.join(longer[:5])}{' …' if len(longer) > 5 else ''}. Give "
                         "each as the single token the model should predict next, with its leading space (“ Paris”)")
    return np.array(targets), np.array(foils)


def differences(logits: torch.Tensor, targets: np.ndarray, foils: np.ndarray) -> np.ndarray:
    """Each row's m from its logits. Shapes: logits (B, V), targets and foils (B,) -> (B,)."""
    rows = np.arange(len(targets))
    picked = logits.double().cpu().numpy()[rows[:, None], np.stack([targets, foils], 1)]  # (B, 2)
    return logit_difference(picked, 0, 1)


@dataclass(frozen=True)
class LogitDifferences:
    """m = logit(target) − logit(foil) on every clean and corrupted prompt."""

    clean: np.ndarray  # (B,)
    corrupted: np.ndarray  # (B,)
    targets: np.ndarray  # (B,) token ids
    foils: np.ndarray  # (B,) token ids
    pairs: PromptPairs

    def spread(self, which: str = "clean") -> Spread:
        """"clean", "corrupted" or "gap" (clean − corrupted) over prompts."""
        return spread({"clean": self.clean, "corrupted": self.corrupted,
                       "gap": self.clean - self.corrupted}[which])

    @property
    def accuracy(self) -> float:
        """The share of clean prompts on which the model prefers the target (m > 0)."""
        return float((self.clean > 0).mean())


def logit_differences(loaded: LoadedModel, pairs: PromptPairs, *, side: str | None = None) -> LogitDifferences:
    """m on every clean and corrupted prompt: two padded passes (batch_inputs.last_logits)."""
    targets, foils = pair_token_ids(loaded.tokenizer, pairs)
    clean = differences(last_logits(loaded, [r.clean for r in pairs], side=side), targets, foils)
    corrupted = differences(last_logits(loaded, [r.corrupted for r in pairs], side=side), targets, foils)
    return LogitDifferences(clean, corrupted, targets, foils, pairs)


@dataclass(frozen=True)
class BatchAttribution:
    """Every part's direct share of m on each clean prompt (module docstring): per prompt, they add up to
    `model`, the model's own m."""

    heads: np.ndarray  # (B, L, H) each head's share
    mlps: np.ndarray  # (B, L) what the rest of each block writes
    embeddings: np.ndarray  # (B,) the stream entering the first block
    biases: np.ndarray  # (B,) W_O's biases, the final norm's β and the unembedding's bias
    total: np.ndarray  # (B,) the sum of every share
    model: np.ndarray  # (B,) the model's own m on the padded pass
    pairs: PromptPairs

    def spread(self, name: str = "heads") -> Spread:
        """A field ("heads", "mlps", "embeddings", "biases", "total", "model") over prompts."""
        return spread(getattr(self, name))

    def top_heads(self, k: int = 10) -> list[tuple[HeadName, float]]:
        """The k heads of largest mean |share|, with their mean share (signed): str(head) says "L24H4"."""
        mean = self.heads.mean(0)  # (L, H)
        order = np.argsort(-np.abs(mean), axis=None)[:k]
        return [(HeadName(*map(int, np.unravel_index(i, mean.shape))), float(mean.flat[i])) for i in order]


def batch_attribution(loaded: LoadedModel, pairs: PromptPairs, *, side: str | None = None) -> BatchAttribution:
    """Each head's, MLP's and the embeddings' direct share of m on every clean prompt (module docstring), from
    one padded pass with hook_z, hook_resid_pre and hook_attn_out read at each prompt's last real token.
    ValueError for a family whose heads' outputs are normalised before they are added (Gemma 2 and 3, OLMo-2),
    whose logits are soft-capped, or whose final norm or unembedding is not known here."""
    parts = _readout_parts(loaded)
    targets, foils = pair_token_ids(loaded.tokenizer, pairs)
    batch = pad_batch(loaded, [r.clean for r in pairs], side=side)
    L = len(parts.blocks)
    names = [name.format(layer) for name in ("blocks.{}.attn.hook_z", "blocks.{}.hook_resid_pre",
                                             "blocks.{}.hook_attn_out") for layer in range(L)]
    names.append(f"blocks.{L - 1}.hook_resid_post")
    at, logits = _at_last_tokens(loaded, batch, names)
    z = torch.stack([at[f"blocks.{layer}.attn.hook_z"] for layer in range(L)], 1)  # (B, L, H, d)
    streams = torch.stack([at[f"blocks.{layer}.hook_resid_pre"] for layer in range(L)]
                          + [at[f"blocks.{L - 1}.hook_resid_post"]], 1)  # (B, L + 1, D)
    attn_out = torch.stack([at[f"blocks.{layer}.hook_attn_out"] for layer in range(L)], 1)  # (B, L, D)
    v, constant = _read_directions(loaded, parts, streams[:, L], targets, foils)  # (B, D), (B,)
    H, d = z.shape[2], z.shape[3]
    w_o = torch.stack([torch.from_numpy(w).double() for w in loaded.output_weights]).to(z.device)  # (L, H * d, D)
    w_o_v = torch.einsum("lkD,bD->blk", w_o, v).view(len(batch), L, H, d)  # (B, L, H, d): W_O^h · v per head
    heads = (z * w_o_v).sum(-1)  # (B, L, H)
    attn = torch.einsum("blD,bD->bl", attn_out, v)  # (B, L) what each attention layer wrote, its bias included
    mlps = torch.einsum("blD,bD->bl", streams[:, 1:] - streams[:, :-1] - attn_out, v)  # (B, L)
    embeddings = torch.einsum("bD,bD->b", streams[:, 0], v)  # (B,)
    biases = constant + (attn - heads.sum(-1)).sum(-1)  # (B,)
    total = heads.sum((1, 2)) + mlps.sum(1) + embeddings + biases
    model = differences(logits, targets, foils)
    cpu = lambda t: t.cpu().numpy()  # noqa: E731
    return BatchAttribution(cpu(heads), cpu(mlps), cpu(embeddings), cpu(biases), cpu(total), model, pairs)


def _at_last_tokens(loaded: LoadedModel, batch, names: list[str]) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """({hook point: its tensor at each prompt's last real token, float64}, logits there) from one padded pass
    a chunk. Shapes: {name: (B, ...) the point's shape without pos}, logits (B, V)."""
    kept: dict[str, list[torch.Tensor]] = {name: [] for name in names}
    logits = []
    T = batch.ids.shape[1]
    with work_threads(len(batch) * T):
        for part in chunks(len(batch), T):
            rows = torch.arange(len(batch))[part]
            last = batch.last[rows]

            def keep(t, hook, last=last):
                at = torch.arange(len(last), device=t.device), last.to(t.device)
                kept[hook.name].append(t[at].detach().double())  # (R, ...)

            logits.append(run_rows(loaded, batch, rows, fwd_hooks=[(name, keep) for name in names]))
    return {name: torch.cat(kept[name]) for name in names}, torch.cat(logits)


def _readout_parts(loaded: LoadedModel):
    """The anatomy, or ValueError (in words) for a model whose logit difference is not a sum of parts here."""
    require(loaded, "direct attribution")
    parts = loaded.anatomy
    if parts.final_norm is None or parts.unembed is None or loaded.output_weights is None:
        raise ValueError(f"{loaded.spec.name}'s final norm, unembedding or output projections are not known here")
    return parts


def _read_directions(loaded: LoadedModel, parts, finals: torch.Tensor, targets, foils):
    """(v, constant) per prompt: v = Aᵀ u reads a part's direct share as p · v, with A the final norm frozen at
    that prompt's final stream and u = W_U[target] − W_U[foil]; constant = β · u + b_U[target] − b_U[foil].
    Shapes: finals (B, D) float64 -> v (B, D), constant (B,)."""
    unembed = loaded.network.get_output_embeddings()
    w_u = unembed.weight.detach().double().to(finals.device)  # (V, D)
    b_u = None if getattr(unembed, "bias", None) is None else unembed.bias.detach().double()
    D = finals.shape[1]
    eye = torch.eye(D, dtype=torch.float64, device=finals.device)
    v, constant = [], []
    for x, t, f in zip(finals, targets, foils, strict=True):
        apply, beta = frozen_norm(parts.final_norm, x)
        u = (w_u[t] - w_u[f]) * parts.logit_scale  # (D,): the logits' scale (Granite) included
        v.append(apply(eye) @ u)  # row j of apply(eye) is A e_j: (A p) · u = p · (apply(eye) @ u)
        constant.append(float(beta @ u) + (0.0 if b_u is None else float(b_u[t] - b_u[f]) * parts.logit_scale))
    return torch.stack(v), torch.tensor(constant, dtype=torch.float64, device=finals.device)
