"""What a loaded model supports, in one place: each feature -> None (it works here) or why not, in words.

    >>> capabilities(load_model("minilm"))["logit lens"]
    'minilm predicts no next token, so there is no logit lens to read.'

Each rule reads the model's registry entry (its architecture and inputs) and its family's entry in the anatomy
(attention.models.forward.anatomy.FAMILIES: the parts, how heads write to the stream, what "why this key" reads),
never a trial run. Every analysis's guard asks `require(loaded, feature)` before it starts, so the reason a page
shows, the reason docs/models.md writes (benchmarks.families) and the reason a notebook's error gives are one
sentence; tests/test_families.py holds these answers equal to what each tiny family actually does.

What depends on a text as well (its length, what its pass captured) is still checked where the text is read.
"""

from __future__ import annotations

from collections.abc import Callable

from attention.models.forward.anatomy import ENCODER_DECODER, NOT_SPLIT, Anatomy, MissingAnatomy, has_lm_head
from attention.models.forward.model import LoadedModel, rotary_base


def _parts(loaded: LoadedModel) -> Anatomy | MissingAnatomy:
    return loaded.found_anatomy


def _hook_points(m: LoadedModel) -> str | None:
    name, parts = m.spec.name, _parts(m)
    if m.spec.inputs != "text" or m.spec.architecture == "encoder-decoder":
        kind = "image model" if m.spec.inputs != "text" else "encoder-decoder"
        return f"{name} is an {kind}: hook points cover text decoders and encoders here"
    if isinstance(parts, MissingAnatomy):
        return f"{name} has no hook points: {parts}"
    if parts.family.shared_layers:
        return (f"{name} ({parts.model_type}) runs one block for every layer: a hook on it cannot tell the layers "
                "apart, so it has no hook points")
    return None


def _head_effects(m: LoadedModel) -> str | None:
    name, parts = m.spec.name, _parts(m)
    if m.spec.architecture == "encoder-decoder":
        return f"{name} is an encoder-decoder model: head effects are measured here on encoders and decoders only."
    if isinstance(parts, MissingAnatomy):
        return f"{name}'s heads cannot be removed here: {parts}."
    if parts.family.shared_layers:
        return (f"{name} runs one shared block for every layer ({parts.model_type}): removing a head from one layer "
                "alone would remove it from all of them, so head effects are not shown.")
    return None


def _readout(m: LoadedModel, what: str) -> str | None:
    name, parts = m.spec.name, _parts(m)
    if m.spec.architecture != "decoder-only" or not has_lm_head(m.network):
        return f"{name} predicts no next token, so there is no {what} to read."
    if isinstance(parts, MissingAnatomy):
        return f"{name}: {parts}."
    if parts.final_norm is None or parts.unembed is None:
        return f"{name}'s final norm or unembedding is not known here, so its {what} cannot be read."
    return None


def _direct_attribution(m: LoadedModel) -> str | None:
    if (why := _readout(m, "logit difference")) is not None:
        return why
    if not _parts(m).family.linear_heads:
        return (f"{m.spec.label} normalises what each attention layer writes before adding it to the residual "
                "stream (a norm after attention, as in Gemma 2 and 3 and OLMo-2): a head's direct share of the "
                "logits is not defined for it. The effect of removing each head is measured for any model.")
    if m.logit_softcap:
        return f"{m.spec.name} soft-caps its logits: they are not a sum of parts."
    return None


def _generation(m: LoadedModel) -> str | None:
    if has_lm_head(m.network):
        return None
    return (f"{m.spec.name} is an encoder: it has no language-model head and predicts no next token. Choose a "
            "decoder (SmolLM2).")


def _reads_text(what: str) -> Callable[[LoadedModel], str | None]:
    """A rule for a feature that runs heads on a text of its own: an encoder-decoder's decoder reads none."""
    def rule(m: LoadedModel) -> str | None:
        return f"{m.spec.name} {ENCODER_DECODER}: {what}" if m.spec.architecture == "encoder-decoder" else None
    return rule


def _composition(m: LoadedModel) -> str | None:
    parts = _parts(m)
    if isinstance(parts, MissingAnatomy):
        return f"{m.spec.name}: {parts}."
    if parts.family.qkv is None:
        return (f"{m.spec.name} ({parts.model_type}) computes q, k and v in one fused projection: composition "
                "scores are computed here for families with separate ones.")
    return None


def _why_this_key(m: LoadedModel) -> str | None:
    name, parts = m.spec.name, _parts(m)
    if m.spec.architecture == "encoder-decoder":
        return f"{name} {ENCODER_DECODER}: its scores are not split here."
    if isinstance(parts, MissingAnatomy):
        return f"{name}: {parts}."
    kind, qk = parts.model_type, parts.family.qk
    if qk == NOT_SPLIT:
        return f"{name} ({kind}): {NOT_SPLIT}, so its scores are not split into parts here."
    if isinstance(qk, str):
        return f"{name} ({kind}) {qk}: its scores are not split into parts here."
    if kind == "opt" and not getattr(m.network.config, "do_layer_norm_before", True):
        return f"{name} normalises after each block (OPT-350m's layout): its scores are not split here."
    return None


def _rotary_view(m: LoadedModel) -> str | None:
    if rotary_base(m) is None:
        return (f"{m.spec.name} has no plain rotary positions over whole heads (learned positions, a scaled or "
                "partial rotary, or a family not known here), so its positions are not drawn as rotations.")
    return None


FEATURES: dict[str, tuple[str, Callable[[LoadedModel], str | None]]] = {  # feature -> (what it needs, its rule)
    "hook points": ("a text model whose blocks are its own, parts named in the anatomy", _hook_points),
    "head effects": ("blocks of its own whose W_O the anatomy names (any encoder or decoder)", _head_effects),
    "direct attribution": ("an LM head, a final norm, and heads written to the stream unnormalised",
                           _direct_attribution),
    "logit lens": ("an LM head and a final norm the anatomy names", lambda m: _readout(m, "logit lens")),
    "generation": ("a decoder with a language-model head", _generation),
    "roles": ("heads that read the probe itself (an encoder or a decoder)", _reads_text(
        "head roles are measured here on encoders and decoders, whose heads read the probe itself.")),
    "corpus survey": ("heads that read the corpus's text itself (an encoder or a decoder)",
                      _reads_text(
        "the corpus survey reads encoders and decoders, whose heads read the text itself.")),
    "composition": ("separate q, k and v projections the anatomy names", _composition),
    "why this key": ("where q and k read the stream, in the family's entry, and no position bias", _why_this_key),
    "rotary view": ("plain rotary positions over whole heads (LLaMA's rotate_half)", _rotary_view),
}


def why_not(loaded: LoadedModel, feature: str) -> str | None:
    """Why `loaded` cannot have `feature` (a key of FEATURES), in words for a page; None when it can."""
    if feature not in FEATURES:
        raise KeyError(f"unknown feature {feature!r}; one of {', '.join(FEATURES)}")
    return FEATURES[feature][1](loaded)


def capabilities(loaded: LoadedModel) -> dict[str, str | None]:
    """Every feature of FEATURES -> None (it works on this model) or why not, in words."""
    return {feature: why_not(loaded, feature) for feature in FEATURES}


def require(loaded: LoadedModel, feature: str, error: type[Exception] = ValueError) -> None:
    """Raise `error` with the reason when `loaded` cannot have `feature`: the guard every analysis starts with."""
    if (why := why_not(loaded, feature)) is not None:
        raise error(why)
