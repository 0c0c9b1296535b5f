"""Which heads matter for what the model does here: every head ablated exactly, and a one-pass estimate.

A head's output z_h (its slice of the output projection's input; TransformerLens's hook_z) is removed:
set to zero ("zero"), or to its mean over the text's positions ("mean"), at every position. The metric:
    decoders   logit(target) - logit(foil) at the last position (does the model prefer " Mary" to " John"?)
    encoders   1 - cos(h, h_ablated) of one token's final vector (how much the head moves "bank")
effect = metric(ablated) - metric(clean): negative means the head supported the target; the pages draw its
opposite, `HeadEffects.drop` (how much m falls without the head: positive and blue, the head helped). For decoders the
clean metric is the Contrast's baseline (attention.models.analyses.target_foil): target and foil are tokenized once,
and the scans, the estimate and the page all read the same m.

head_ablation runs every ablation exactly, a batch of prompt copies at a time, each copy with one head
removed; attribution_patching estimates them all from one forward and one backward pass (Nanda 2023):
    effect_h ~ sum over positions and dimensions of (z_h ablated - z_h) * d metric / d z_h

Every function takes the clean result `att` (attend() on the text) rather than the text: its token ids,
modules and head size are what the scans run on, so the text is not read again.

Shapes: L layers, H heads, d head size, n tokens; effects (L, H).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from attention.models.analyses.edits import edit_setup, head_slices, hooked_z, linear_metric, run_from, scan, z_of
from attention.models.analyses.target_foil import Contrast
from attention.models.forward.device import LONG_WORK_TOKENS, work_threads
from attention.models.forward.hook_runs import run_with_cache
from attention.models.forward.model import LoadedModel
from attention.models.forward.model_attention import ModelAttention
from attention.models.forward.tokens import find_word
from attention.toy.rounding import number

ABLATIONS = {"zero": "set to zero", "mean": "set to its mean over the text's positions"}  # how a head is removed


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

    @property
    def drop(self) -> np.ndarray:
        """(L, H) baseline - ablated: how much the metric falls when the head is removed. For a decoder's m, positive
        means the head supported the target: the pages show this, so that a head that helps reads positive and blue,
        as a direct share does (a first-year read the effect's "negative means it helped" backwards: issue 68)."""
        return -self.effect

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
    """How well attribution patching ranks the heads as the exact scan does, and where it fails outright: the
    heads whose estimate has the opposite sign of their exact effect (it says the head helps where removing it
    hurts, or the reverse)."""

    estimate: HeadEffects
    exact: HeadEffects
    spearman: float  # rank correlation of the two over all heads: 1 = the same order
    opposite: np.ndarray  # (L, H) bool: the estimate's sign is the opposite of the exact effect's

    def opposite_heads(self) -> list[tuple[int, int, float, float]]:
        """(layer, head, exact, estimate) of every head whose estimate has the wrong sign, 0-based, the largest
        exact effect first."""
        layers, heads = np.nonzero(self.opposite)
        found = [(int(i), int(h), float(self.exact.effect[i, h]), float(self.estimate.effect[i, h]))
                 for i, h in zip(layers, heads, strict=True)]
        return sorted(found, key=lambda row: -abs(row[2]))

    @property
    def largest(self) -> float:
        """The largest |effect| of the two: one colour scale for both, side by side (the estimate's ±1.3 and the
        scan's ±3.8 drew as the same reds and blues)."""
        return float(max(np.abs(self.exact.effect).max(), np.abs(self.estimate.effect).max()))

    def pair(self, layer: int, head: int, *, flag: bool = True, drop: bool = False) -> str:
        """One head's exact effect and its estimate as the pages say them, with the estimate's failure beside it
        when its sign is wrong: "exact −3.850, estimate +0.330 (the wrong sign)" (flag=False: where the sentence
        around it says so already). drop=True: their drops (HeadEffects.drop), as the pages draw them."""
        sign = -1.0 if drop else 1.0
        exact, estimate = sign * self.exact.effect[layer, head], sign * self.estimate.effect[layer, head]
        wrong = " (the wrong sign)" if flag and self.opposite[layer, head] else ""
        return f"exact {_signed(exact)}, estimate {_signed(estimate)}{wrong}"


def _moves(drop: float) -> str:
    return f"falls by {number(drop)}" if drop >= 0 else f"rises by {number(-drop)}"


def drop_in_words(drop: float) -> str:
    """A head's drop (HeadEffects.drop) as a first-year reads it, never a double negative ("m falls by −0.811"):
    "m falls by 0.811 (the head helped the target)" or "m rises by 0.811 (the head worked for the foil)"."""
    return f"m {_moves(drop)} " + ("(the head helped the target)" if drop >= 0 else "(the head worked for the foil)")


def said(agrees: ScanAgreement, layer: int, head: int) -> str:
    """One head's drop, exact and estimated, as a first-year reads it: "m rises by 1.281 (the head worked for the
    foil); estimated, it rises by 1.361", and "(the estimate has the wrong sign)" where it has. The pages write
    this after "Without it,"."""
    exact, estimate = agrees.exact.drop[layer, head], agrees.estimate.drop[layer, head]
    wrong = " (the estimate has the wrong sign)" if agrees.opposite[layer, head] else ""
    return f"{drop_in_words(exact)}; estimated, it {_moves(estimate)}{wrong}"


def _signed(value: float) -> str:
    return number(value, signed=True)  # one rule for the pages' numbers: "−3.850", "+0.330"


def opposite_signs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Where two arrays of effects disagree in sign (one positive, the other negative; a zero disagrees with
    nothing). Shapes: (L, H) x2 -> (L, H) bool."""
    return np.sign(a) * np.sign(b) < 0


def agreement(estimate: HeadEffects, exact: HeadEffects) -> ScanAgreement:
    """The estimate against the exact scan of the same metric; ValueError when they measure different things."""
    if estimate.metric != exact.metric or estimate.effect.shape != exact.effect.shape:
        raise ValueError(f"the estimate measures {estimate.metric} and the scan {exact.metric}: nothing to compare")
    return ScanAgreement(estimate, exact, rank_correlation(estimate.effect, exact.effect),
                         opposite_signs(estimate.effect, exact.effect))


def _check(ablation: str) -> None:
    if ablation not in ABLATIONS:
        raise ValueError(f"unknown ablation {ablation!r}; choose one of {', '.join(ABLATIONS)}")


def _ablations(loaded: LoadedModel, setup, ablation: str, read, progress, *, base: bool = False) -> np.ndarray:
    """The metric with each head removed in turn: (L, H)."""
    L, H = setup.n_layers, setup.n_heads
    means = [z.mean(0) for z in z_of(loaded, setup)] if ablation == "mean" else None  # L x [head_index, d_head]
    sites = [(layer, head) for layer in range(L) for head in range(H)]  # by layer: a batch starts at its first
    with work_threads(LONG_WORK_TOKENS):  # a batch holds dozens of copies of the text: long work
        values = scan(loaded, setup, sites, lambda part: hooked_z(loaded, head_slices(part, means)), read,
                      progress, base=base, verb="Ablated heads:")
    return values.reshape(L, H)


def head_ablation(loaded: LoadedModel, att: ModelAttention, contrast: Contrast, *, ablation: str = "zero",
                  progress: Callable[[float, str], None] | None = None) -> HeadEffects:
    """Remove each head in turn; effect on the contrast's logit(target) - logit(foil) at the last position.
    `att` is the clean result the contrast was read from."""
    _check(ablation)
    setup = edit_setup(loaded, att)
    read = linear_metric(loaded, contrast)
    ablated = _ablations(loaded, setup, ablation, read, progress, base=True)
    # Each effect against the clean run read the same way (float64 from the final hidden state): in half
    # precision the model's own logits are rounded (bfloat16 keeps ~3 digits: 0.125 apart near 20), and
    # ablated - contrast.baseline moved every head by that rounding (Compare two models, float32 vs bfloat16).
    with loaded.lock, torch.inference_mode():
        clean = float(read(run_from(loaded, setup, 0, 1, base=True))[0])
    return HeadEffects(baseline=contrast.baseline, effect=ablated - clean, ablation=ablation,
                       estimated=False, metric=contrast.metric, contrast=contrast)


def head_ablation_cosine(loaded: LoadedModel, att: ModelAttention, word: str | int, *, ablation: str = "zero",
                         progress: Callable[[float, str], None] | None = None) -> HeadEffects:
    """For encoders (no next token): remove each head in turn; effect on 1 - cos of `word`'s final vector
    with and without the head (0 on the clean model). `word`: the token's position, or a word (its first
    occurrence)."""
    _check(ablation)
    i = word if isinstance(word, int) else find_word(att.tokens, word)
    if not 0 <= i < len(att.tokens):
        raise ValueError(f"This text has {len(att.tokens)} tokens: there is no token {i} to follow.")
    setup = edit_setup(loaded, att)
    clean = setup.clean.last_hidden_state[0, i].double()  # (D,)

    def read(out):
        return 1 - torch.nn.functional.cosine_similarity(out.last_hidden_state[:, i].double(), clean[None], dim=-1)

    ablated = _ablations(loaded, setup, ablation, read, progress)
    return HeadEffects(baseline=0.0, effect=ablated, ablation=ablation, estimated=False, token=i,
                       metric=f"1 − cos(“{att.tokens[i]}” with the head, without it)")


def attribution_patching(loaded: LoadedModel, att: ModelAttention, contrast: Contrast | None = None, *,
                         ablation: str = "zero", metric: Callable[[torch.Tensor], torch.Tensor] | None = None,
                         metric_name: str = "your metric") -> HeadEffects:
    """Every head's ablation effect on a metric, estimated to first order from one forward and one backward pass:
    (z_ablated - z) . d metric / d z, summed over the head's slice (run_with_cache's gradients, incl_bwd).
    `metric`: any fn(logits [1, pos, vocab]) -> a scalar tensor (TransformerLens's habit; `metric_name` says what
    it is on the page); without it the contrast's logit(target) - logit(foil) at the last position."""
    _check(ablation)
    built_in = metric is None
    if built_in:
        if contrast is None:
            raise ValueError("attribution_patching needs a contrast (a target and a foil) or metric=fn")
        metric = functools.partial(_last_difference, contrast)
    setup = edit_setup(loaded, att)
    logits, cache = run_with_cache(loaded, setup.ids, lambda name: name.endswith(".attn.hook_z"), incl_bwd=True,
                                   metric=metric)
    L, H = setup.n_layers, setup.n_heads
    estimate = np.zeros((L, H))
    for layer in range(L):
        # In float64: a model in half precision has z and its gradient in bfloat16 or float16 (numpy has no
        # bfloat16: issue 42's walk found "Got unsupported ScalarType BFloat16" here), and a sum of n * d products
        # is better added up in float64 anyway. [pos, head_index, d_head]
        z, grad = cache["z", layer][0].double(), cache[f"blocks.{layer}.attn.hook_z_grad"][0].double()
        delta = -z if ablation == "zero" else z.mean(0, keepdim=True) - z
        estimate[layer] = (delta * grad).sum((0, 2)).cpu().numpy()
    if built_in:
        baseline, name = contrast.baseline, contrast.metric
    else:
        baseline, name = float(metric(logits)), metric_name
    return HeadEffects(baseline=baseline, effect=estimate, ablation=ablation, estimated=True, metric=name,
                       contrast=contrast)


def _last_difference(contrast: Contrast, logits: torch.Tensor) -> torch.Tensor:
    """The contrast's m at the last position: logits [1, pos, vocab] -> a scalar."""
    return contrast.difference(logits[0, -1])
