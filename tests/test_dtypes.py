"""Half precision: a model in bfloat16 or float16 shows weights computed in float32 from its own q and k,
held to its own eager kernel in its dtype within what that dtype's rounding explains (the guard's rule)."""

import copy

import numpy as np
import pytest
import torch

from attention.models import ModelUnavailable, attend, from_model, load_model
from attention.models.forward.check import ROUNDING_UNITS, allowed_gap
from tests.tiny_models import FAMILIES, TEXT, own_attentions


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bfloat16", "float16"])
@pytest.mark.parametrize("family", ["llama", "gemma2", "gpt2", "bert"])
def test_a_half_precision_model_is_held_to_its_own_eager_kernel_in_its_dtype(family, dtype, tok):
    tiny = FAMILIES[family]
    torch.manual_seed(0)
    config = tiny.config()
    config._attn_implementation = "eager"
    reference = tiny.model(config).eval().to(dtype)
    loaded = from_model(copy.deepcopy(reference), tok, name=family)
    assert loaded.check.dtype == str(dtype).removeprefix("torch.") and loaded.check.allowed == allowed_gap(dtype)
    assert next(loaded.network.parameters()).dtype == dtype  # nothing was converted
    att = attend(loaded, TEXT)
    for layer, own in enumerate(own_attentions(reference, att)):
        ours = att.weights[layer]
        assert ours.dtype == np.float32  # computed in float32
        assert np.abs(ours - own.astype(np.float32)).max() <= ROUNDING_UNITS * torch.finfo(dtype).eps / 2 + 1e-4
        np.testing.assert_allclose(ours.sum(-1), 1.0, atol=1e-5)  # its own rows sum to 1 only up to rounding
    assert "float32 from its q and k" in loaded.check.summary


def test_load_model_takes_a_dtype_and_refuses_an_unknown_one():
    m = load_model("minilm", dtype="bfloat16")
    assert next(m.network.parameters()).dtype == torch.bfloat16 and m.check.dtype == "bfloat16"
    assert m.check.gap <= m.check.allowed
    assert next(load_model("minilm").network.parameters()).dtype == torch.float32  # "auto": small, on the CPU
    with pytest.raises(ModelUnavailable, match="dtype must be one of"):
        load_model("minilm", dtype="int8")


@pytest.mark.slow
def test_smollm2_in_bfloat16_reads_its_heads_effects_and_why_this_key_like_float32(smollm2, smollm2_bf16):
    """Two analyses refused or raised in bfloat16 (issue 42): attribution patching ("Got unsupported ScalarType
    BFloat16") and why this key (its norms "neither a layer norm nor an RMS norm"). In bfloat16 each now ranks
    and adds up as in float32, within that dtype's rounding."""
    from attention.models import attribution_patching, contrast, qk_attribution

    half = smollm2_bf16
    text = "When Mary and John went to the store, John gave a drink to"
    estimates = []
    for model in (smollm2, half):
        att = attend(model, text)
        estimates.append(attribution_patching(model, att, contrast(att, model.tokenizer, " Mary", " John")).effect)
        why = qk_attribution(model, att, 18, 4, len(att.tokens) - 1, 3)  # L19H5, the last token on " John"
        assert why.total == pytest.approx(why.score, rel=max(why.rounding, 1e-3), abs=max(why.rounding, 1e-3))
        assert (why.rounding > 0) == (model is half)
    ranks = [np.argsort(np.argsort(e.ravel(), kind="stable"), kind="stable") for e in estimates]
    assert np.corrcoef(*ranks)[0, 1] > 0.8  # Spearman's rho: the same heads matter
