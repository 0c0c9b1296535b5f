"""What the guard measured when a model loaded (ModelCheck), the gaps it allows (allowed_gap), and its refusal
(ModelRefused).

The guard (attention.models.forward.guard) holds the weights we rebuild to the model's own at every layer;
this is its record, kept with the LoadedModel, and the sentences the pages say with it. In float32 a gap over
GUARD_GAP is refused; in 16 bits the model's own rounding is stated beside it, usually within allowed_gap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from attention.models.forward.registry import ModelUnavailable

GUARD_GAP = 1e-4  # largest |rebuilt - own| weight difference a float32 model may show
ROUNDING_UNITS = 16  # a half-precision model may differ by this many unit roundoffs of its dtype more
OWN_WEIGHTS_MAX_TOKENS = 512  # token limit of a family whose weights are stored whole (L x H x n x n floats)


class ModelRefused(ModelUnavailable):
    """The guard's verdict on a model it loaded (attention.models.forward.guard): its numbers overflow its
    precision, or cannot be rebuilt exactly. The same each time it loads in that precision, so an app may
    remember it instead of loading the model again."""


@dataclass(frozen=True)
class ModelCheck:
    """What the guard measured when the model was loaded."""

    captured: bool  # weights are rebuilt from q and k captured inside the model (False: its own weights)
    gap: float  # largest |rebuilt - the model's own eager weight| over every layer of every stack (0 when own):
    # in 16 bits, our error and the model's own rounding together
    output_gap: float  # largest |our kernel's output - the eager kernel's| / its largest |value| over the
    # layers our kernel made (0 when it made none: own weights, or half precision, where the model's own runs)
    layers: tuple[int, ...]  # the self-attention layers compared, 0-based: every one
    probe_tokens: int  # the probe text's length
    own_weights: bool  # the weights shown are the model's own (output_attentions: bias, or not captured)
    dtype: str = "float32"  # the network's parameters' dtype
    allowed: float = GUARD_GAP  # the largest gap shown without a note (allowed_gap): in float32 the refusal line
    # too; in 16 bits what its rounding of ordinary scores explains
    layer_gaps: tuple[float, ...] = ()  # the weight gap of each self-attention layer, measured on its own inputs
    worst: str = ""  # where `gap` is: "layer 30", or "decoder layer 2" / "cross layer 1" (1-based)
    checked: int = 0  # attention layers checked, every stack's (an encoder-decoder's: encoder, decoder, cross)
    kernel_layers: int = 0  # of those, the layers whose output our kernel made (float32 on the CPU), held to
    # the model's own by output_gap; the others' output is the model's own kernel's
    exact_gap: float = 0.0  # largest |rebuilt - the model's own eager kernel run on the same q, k and mask in
    # float32|: our error alone, held to GUARD_GAP (in float32, the same as gap)
    top_score: float = 0.0  # largest |score| the probe met (16 bits: the rounding of a score grows with it)

    @property
    def coarse(self) -> bool:
        """The model's own 16-bit kernel rounds its weights by more than the allowance (sharp heads, large
        scores): ours stay exact for its q and k, and the pages say how far its own are from them."""
        return self.gap > self.allowed

    @property
    def note(self) -> str:
        """What the pages say beside the model when its own rounding is coarse ("" otherwise)."""
        if not self.coarse:
            return ""
        return (f"This model runs in {self.dtype}, and its sharpest heads' scores are large (up to "
                f"{self.top_score:.0f}): its own kernel rounds them so that its weights move by up to "
                f"{self.gap:.1e} ({self.worst}), more than the {self.allowed:.1e} {self.dtype} usually explains. "
                f"The weights shown are the exact ones for its q and k (they equal its own kernel run without "
                f"the rounding {_to(self.exact_gap)}); choose float32 to make its own match them too.")

    @property
    def short(self) -> str:
        """A few words for under a model's name; `summary` says how it was measured."""
        if self.own_weights:
            return "Exact: the model's own attention weights"
        if self.coarse:
            return (f"Exact for its q and k; its own {self.dtype} rounding moves its weights by up to "
                    f"{plain(self.gap)}")
        if self.dtype not in ("float32", "float64"):
            return (f"Equals the model's own {self.dtype} attention {within(self.gap)} "
                    f"(its rounding allows {plain(self.allowed)})")
        return "Exact: equals the model's own attention " + within(self.gap)

    def stated(self, gap: float) -> str:
        """A gap measured against the model's own weights, as the pages say it, in plain decimals for a learner
        ("at most 0.000001"; `summary` gives it exactly), and in half precision what its rounding allows."""
        if self.dtype in ("float32", "float64"):
            return plain(gap, bound=True)
        past = "; its sharpest heads' large scores take it past that: ours are exact for its q and k" \
            if gap > self.allowed else ""
        return f"{plain(gap, bound=True)} ({self.dtype}'s rounding usually allows up to {plain(self.allowed)}{past})"

    @property
    def summary(self) -> str:
        """One sentence for the pages."""
        if self.own_weights:
            return ("weights are the model's own (output_attentions): its scores cannot be rebuilt from q and k, "
                    f"so texts are kept to {OWN_WEIGHTS_MAX_TOKENS} tokens")
        to = f"to {self.gap:.1e} (largest at {self.worst})" if self.gap > 0 else "exactly"
        half = "" if self.dtype in ("float32", "float64") else (
            f" (the model runs in {self.dtype}, whose rounding allows up to {self.allowed:.1e}"
            + (", here exceeded: its scores reach " + f"{self.top_score:.0f}" if self.coarse else "")
            + "; ours are computed in float32 from its q and k, and equal its own kernel run on them in float32 "
            f"{_to(self.exact_gap)})")
        equal = f"to {self.output_gap:.0e} of its largest value" if self.output_gap > 0 else "exactly"
        if self.kernel_layers == self.checked:
            output = f", and the output our attention kernel makes for each layer equals the model's own {equal}"
        elif self.kernel_layers:
            output = (f", and the output our attention kernel makes for {self.kernel_layers} of them equals the "
                      f"model's own {equal} (the others' output is the model's own kernel's)")
        else:
            output = ", and each layer's output is the model's own kernel's"
        return (f"weights rebuilt from q and k equal the model's own {to} at every one of its {self.checked} "
                f"attention layers, each fed the inputs it has in the pass the pages show{half}{output}: checked "
                f"on a {self.probe_tokens}-token probe when it loaded")


def plain(x: float, *, bound: bool = False) -> str:
    """A small non-negative number in plain decimals, as a learner reads it (never "8e-07"): 0 as "0", from 0.001
    on to three decimals, below that the power of ten just above it ("0.000001"), with `bound` as "at most
    0.000001"."""
    if x <= 0:
        return "0 (exactly equal)" if bound else "0"
    if x >= 1e-3:
        return f"{x:.3f}"
    exponent = math.ceil(math.log10(x))
    above = f"{10.0 ** exponent:.{-exponent}f}"
    return f"at most {above}" if bound else above


def within(gap: float) -> str:
    """"to within 0.000001" (plain), or "exactly" for 0: how far two sets of weights are apart, in words."""
    return f"to within {plain(gap)}" if gap > 0 else "exactly"


def _to(gap: float) -> str:
    """"to 7e-06", or "exactly" for 0."""
    return f"to {gap:.0e}" if gap > 0 else "exactly"


def allowed_gap(dtype) -> float:
    """The largest |rebuilt - own| weight difference a model whose parameters are in `dtype` shows without a
    note (module docstring): GUARD_GAP in float32 (and float64), where it is also the refusal line; more by
    ROUNDING_UNITS unit roundoffs in half precision, what its own rounding of ordinary scores explains."""
    if dtype in (torch.float32, torch.float64):
        return GUARD_GAP
    return GUARD_GAP + ROUNDING_UNITS * float(torch.finfo(dtype).eps) / 2
