"""The guard: before a model reads anyone's text, the weights we rebuild are held to the model's own.

`check_model(loaded)` runs the model on a probe text longer than every attention window its
configuration declares (a sliding window only shows on texts longer than it; capped at the token limit),
with the first, middle and last layer of each attention stack on transformers' eager kernel, and
compares their weights with the ones rebuilt from the captured q and k. It also compares the last hidden
state of that pass, in which our SurveyKernel made every layer's attention output, with the model's own
(its fused kernels). Above GUARD_GAP (for the hidden state: relative to its largest value) the model is
refused with the measured gap, rather than shown wrong; below it, the gap is what the pages state.
A model in half precision (bfloat16, float16) has its weights rebuilt in float32 from its own q and k, while
its eager kernel computes scores and weights in its dtype and rounds them: the two differ by what that
rounding explains, and the guard allows GUARD_GAP + ROUNDING_UNITS x the dtype's unit roundoff
(bfloat16: 2^-8, float16: 2^-11), states the gap beside the roundoff, and refuses above it (docs/models.md
writes the rule down). Our kernel stands in for the model's only in float32; in half precision each layer's
output is the model's own.
Families whose weights are the model's own output_attentions (T5's position bias, the families that do
not use transformers' attention interface) have nothing rebuilt: their gap is 0, and their texts are
kept to OWN_WEIGHTS_MAX_TOKENS, since they hold L x H x n² weights.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from attention.models.forward.anatomy import model_type
from attention.models.forward.model import LoadedModel
from attention.models.forward.registry import ModelUnavailable
from attention.models.forward.running import attend, attend_image, own_attentions, own_output

GUARD_GAP = 1e-4  # largest |rebuilt - own| weight difference a float32 model may show
ROUNDING_UNITS = 16  # a half-precision model may differ by this many unit roundoffs of its dtype more
PROBE_MIN_TOKENS = 32
OWN_WEIGHTS_MAX_TOKENS = 512  # token limit of a family whose weights are stored whole (L x H x n x n floats)
PROBE_SENTENCE = "The otter dove into the cold river and came back up with a silver fish. "
WINDOW_FIELDS = ("sliding_window", "local_attention", "attention_window")  # config fields that bound attention


@dataclass(frozen=True)
class ModelCheck:
    """What the guard measured when the model was loaded."""

    captured: bool  # weights are rebuilt from q and k captured inside the model (False: its own weights)
    gap: float  # largest |rebuilt - the model's own eager weight| over the layers compared (0 when own)
    output_gap: float  # largest |ours - own| of the last hidden state / its largest |value| (0 when own)
    layers: tuple[int, ...]  # the self-attention layers compared, 0-based
    probe_tokens: int  # the probe text's length
    own_weights: bool  # the weights shown are the model's own output_attentions (bias, or not captured)
    dtype: str = "float32"  # the network's parameters' dtype
    allowed: float = GUARD_GAP  # the largest gap the guard accepts in that dtype (allowed_gap)

    @property
    def short(self) -> str:
        """A few words for under a model's name; `summary` says how it was measured."""
        if self.own_weights:
            return "Exact: the model's own attention weights"
        return "Exact: equals the model's own attention " + (f"(to {self.gap:.0e})" if self.gap > 0 else "exactly")

    @property
    def summary(self) -> str:
        """One sentence for the pages."""
        if self.own_weights:
            return ("weights are the model's own (output_attentions): its scores cannot be rebuilt from q and k, "
                    f"so texts are kept to {OWN_WEIGHTS_MAX_TOKENS} tokens")
        layers = ", ".join(str(layer + 1) for layer in self.layers)
        to = f"to {self.gap:.0e}" if self.gap > 0 else "exactly"
        if self.dtype != "float32":
            to += (f" (the model runs in {self.dtype}, whose rounding allows up to {self.allowed:.0e}: ours are "
                   "computed in float32 from its q and k)")
        output = f" to {self.output_gap:.0e}" if self.output_gap > 0 else " exactly"
        return (f"weights rebuilt from q and k equal the model's own {to} (its first, middle and last layers: "
                f"{layers}), and its output made "
                f"with our attention kernel equals its own{output}: checked on a {self.probe_tokens}-token probe "
                "when it loaded")


def allowed_gap(dtype) -> float:
    """The largest |rebuilt - own| weight difference accepted for a model whose parameters are in `dtype`
    (module docstring): GUARD_GAP in float32 (and float64), more by ROUNDING_UNITS unit roundoffs in half
    precision."""
    if dtype in (torch.float32, torch.float64):
        return GUARD_GAP
    return GUARD_GAP + ROUNDING_UNITS * float(torch.finfo(dtype).eps) / 2


def attention_window(config) -> int | None:
    """The longest attention window the configuration declares (sliding or local), or None."""
    sizes = []
    for name in WINDOW_FIELDS:
        value = getattr(config, name, None)
        values = value if isinstance(value, list | tuple) else [value]
        sizes += [int(v) for v in values if isinstance(v, int) and not isinstance(v, bool) and v > 0]
    return max(sizes) if sizes else None


def probe_text(loaded: LoadedModel) -> str:
    """A text of at least PROBE_MIN_TOKENS tokens, and longer than the model's attention window when its
    token limit allows."""
    window = attention_window(loaded.network.config) or 0
    want = max(PROBE_MIN_TOKENS, window + 16)
    per_sentence = max(1, len(loaded.tokenizer(PROBE_SENTENCE, add_special_tokens=False)["input_ids"]))
    return PROBE_SENTENCE * (want // per_sentence + 1)


def probe_image() -> np.ndarray:
    """An image model's probe: a fixed 64 x 64 RGB pattern (smooth gradients and seeded noise), which every
    processor resizes to its own size."""
    y, x = np.mgrid[0:64, 0:64] / 63.0
    noise = np.random.default_rng(0).random((64, 64))
    rgb = np.stack([x, y, 0.5 * (x + y) * 0.5 + 0.5 * noise], axis=2)
    return np.rint(rgb * 255).astype(np.uint8)


def check_model(loaded: LoadedModel) -> LoadedModel:
    """`loaded` with its ModelCheck (and, for a model whose own weights are kept, its token limit lowered);
    ModelUnavailable, with the measured gap, when rebuilt weights differ from the model's own."""
    att = attend_image(loaded, probe_image()) if loaded.spec.inputs == "image" else attend(loaded, probe_text(loaded))
    s = att.self_attn
    dtype = next(loaded.network.parameters()).dtype
    if not s.captured or s.bias:
        check = ModelCheck(captured=s.captured, gap=0.0, output_gap=0.0, layers=(), probe_tokens=len(att.tokens),
                           own_weights=True, dtype=str(dtype).removeprefix("torch."), allowed=allowed_gap(dtype))
        spec = replace(loaded.spec, max_tokens=min(loaded.spec.max_tokens, OWN_WEIGHTS_MAX_TOKENS),
                       max_tokens_gpu=None)
        return replace(loaded, spec=spec, check=check)
    stacks = {stack: tuple(sorted({0, a.n_layers // 2, a.n_layers - 1}))
              for stack, a in (("self", s), ("decoder", att.decoder_attn), ("cross", att.cross_attn)) if a is not None}
    own = own_attentions(loaded, att, stacks)
    gaps = {(stack, layer): att.attention_stack(stack).rebuild_gap(layer, own[stack, layer])
            for stack, layers in stacks.items() for layer in layers}
    (stack, layer), gap = max(gaps.items(), key=lambda item: item[1])
    allowed = allowed_gap(dtype)
    if not gap <= allowed:  # NaN refuses too
        raise ModelUnavailable(
            f"{loaded.spec.label}: the attention weights rebuilt from its q and k differ from the model's own by "
            f"{gap:.1e} ({stack} attention, layer {layer + 1}), above the {allowed:.1e} this app allows in "
            f"{str(dtype).removeprefix('torch.')}, so it is "
            f"refused rather than shown wrong. Its family ({model_type(loaded.network)}) computes its scores in a "
            "way attention/models/forward/recompute.py does not rebuild.")
    own_state = own_output(loaded, att)
    output_gap = float(np.abs(att.hidden[-1] - own_state).max() / max(float(np.abs(own_state).max()), 1e-12))
    if not output_gap <= allowed:
        raise ModelUnavailable(
            f"{loaded.spec.label}: with this app's attention kernel its last hidden state differs from the model's "
            f"own by {output_gap:.1e} of its largest value, above the {allowed:.1e} this app allows, so it is refused "
            f"rather than shown wrong. Its family ({model_type(loaded.network)}) computes attention's output in a "
            "way attention/models/forward/kernel.py does not.")
    check = ModelCheck(captured=True, gap=gap, output_gap=output_gap, layers=stacks["self"],
                       probe_tokens=len(att.tokens), own_weights=False, dtype=str(dtype).removeprefix("torch."),
                       allowed=allowed)
    return replace(loaded, check=check)
