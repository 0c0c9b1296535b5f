"""Families without an entry in the anatomy's table (Granite, GPT-BigCode): their parts read from the module tree
and confirmed by a pass (attention.models.forward.anatomy_inferred), loaded from a saved folder as a user's model
is, and every causal tool held to transformers' own model (the same weights, loaded apart, eager attention):
its logits with a head's slice of W_O's input zeroed, its logit difference, its next-token probabilities. A reading
the model does not confirm is refused with the gap measured, and the attention itself is still shown exactly.
(The hook points of these families are held to transformers in tests/test_hooks.py.)"""

from __future__ import annotations

import copy

import pytest
import torch

from attention.models import (
    MissingAnatomy,
    attend,
    contrast,
    direct_logit_attribution,
    from_model,
    head_ablation,
    load_model,
    logit_lens,
    run_with_hooks,
)
from tests.numerics import assert_float32_close, float32_approx
from tests.tiny_models import OUTSIDE, TEXT, own_attentions, saved

PROMPT = "the cat sat on the mat because the dog was"


@pytest.fixture(scope="module")
def folders(tmp_path_factory, tok):
    """family -> (the model loaded from its folder by load_model, transformers' own model of the folder)."""
    loaded = {}

    def get(name):
        if name not in loaded:
            folder = tmp_path_factory.mktemp(name)
            saved(name, folder, tok)
            import transformers as tf

            reference = tf.AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
            loaded[name] = load_model(str(folder)), reference
        return loaded[name]
    return get


def own_logits(reference, tok, text: str, edit=None) -> torch.Tensor:
    """transformers' logits at the last token (V,), with `edit` (a plain torch pre-hook) on one module if given."""
    ids = torch.tensor(tok(text)["input_ids"])[None]
    handle = None if edit is None else edit[0].register_forward_pre_hook(edit[1])
    try:
        with torch.no_grad():
            return reference(input_ids=ids).logits[0, -1]
    finally:
        if handle is not None:
            handle.remove()


@pytest.mark.parametrize("name", list(OUTSIDE))
def test_a_folder_of_a_family_outside_the_table_gets_its_parts_read_and_confirmed(folders, name):
    loaded, reference = folders(name)
    parts = loaded.anatomy
    assert parts.inferred and "confirmed" in parts.inferred
    w_o = OUTSIDE[name].w_o
    for layer, module in enumerate(parts.outputs):  # the test's own path to each W_O
        assert module is loaded.network.get_submodule(w_o.format(layer=layer))
    config = reference.config
    assert parts.write_scale == getattr(config, "residual_multiplier", 1.0)
    assert parts.logit_scale == 1 / getattr(config, "logits_scaling", 1.0)
    att = attend(loaded, TEXT)  # and its attention is exact, as the guard holds every model
    for ours, own in zip(att.self_attn.weights, own_attentions(reference, att), strict=True):
        assert_float32_close(ours, own, terms=len(att.tokens))


@pytest.mark.parametrize("name", list(OUTSIDE))
def test_causal_tools_on_a_family_outside_the_table_equal_transformers_own_model(folders, tok, name):
    loaded, reference = folders(name)
    att = attend(loaded, PROMPT)
    logits = own_logits(reference, tok, PROMPT)
    target, foil = (tok.decode([int(i)]) for i in torch.argsort(logits, descending=True)[:2])
    c = contrast(att, tok, target, foil)
    t, f = c.target.token_id, c.foil.token_id
    m = float(logits[t] - logits[f])
    D = reference.config.hidden_size
    # direct attribution: heads, MLPs, embeddings and biases add up to transformers' own logit difference
    dla = direct_logit_attribution(loaded, att, c)
    assert dla.total == float32_approx(m, terms=D * 4, magnitude=float(logits.abs().max()))
    # removing a head: transformers' model with that head's slice of W_O's input zeroed by a plain pre-hook
    effects = head_ablation(loaded, att, c)
    layer, head = 1, 2
    d = D // reference.config.num_attention_heads
    w_o = reference.get_submodule(OUTSIDE[name].w_o.format(layer=layer))

    def zero(module, args):
        z = args[0].clone()
        z[..., head * d:(head + 1) * d] = 0
        return (z,)
    ablated = own_logits(reference, tok, PROMPT, (w_o, zero))
    assert effects.effect[layer, head] == float32_approx(float(ablated[t] - ablated[f]) - m, terms=D * 4,
                                                          magnitude=float(logits.abs().max()))
    # the same through hook_z, by name: transformers' own logits with the slice zeroed
    def knock_out(z, hook):
        z[:, :, head] = 0
    hooked = run_with_hooks(loaded, PROMPT, fwd_hooks=[(f"blocks.{layer}.attn.hook_z", knock_out)])[0, -1]
    assert_float32_close(hooked.numpy(), ablated.numpy(), terms=D * 4)
    # the logit lens's last row is the model's own next-token prediction (Granite divides its logits by 8)
    lens = logit_lens(loaded, att)
    probabilities = torch.softmax(logits.double(), -1)
    assert lens.top_ids[-1, -1] == int(torch.argmax(logits))
    assert lens.top_probability[-1, -1] == float32_approx(float(probabilities.max()), terms=D)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_reading_the_model_does_not_confirm_is_refused_with_the_gap_and_attention_still_shown(tok, dtype):
    """A Granite whose blocks scale what they add by another factor than its config says: the parts read from
    its tree would give direct attributions that do not sum to its logit difference; refused, saying so. In
    bfloat16 too, where what attention writes is smaller than the stream's rounding (the confirming pass adds
    a vector as large as the stream to each write)."""
    import transformers as tf

    family = OUTSIDE["granite"]
    torch.manual_seed(0)
    config = family.config()
    config._attn_implementation = "eager"
    reference = family.model(config).eval().to(dtype)
    for block in reference.model.layers:
        block.residual_multiplier = 0.3  # the config still says 0.22
    loaded = from_model(copy.deepcopy(reference), tok, name="odd granite")
    with pytest.raises(MissingAnatomy, match=r"granite.*not confirm.*off by"):
        _ = loaded.anatomy
    att = attend(loaded, PROMPT)
    with pytest.raises(ValueError, match="not confirm"):
        direct_logit_attribution(loaded, att, contrast(att, tok, " the", " a"))
    if dtype == torch.float32:  # (in bfloat16 the model's own weights are rounded: the guard's rule holds them)
        for ours, own in zip(att.self_attn.weights, own_attentions(reference, att), strict=True):
            assert_float32_close(ours, own, terms=len(att.tokens))
    assert loaded.check.gap <= loaded.check.allowed
    for block in reference.model.layers:
        block.residual_multiplier = tf.GraniteConfig(residual_multiplier=0.22).residual_multiplier  # as it says
    assert from_model(copy.deepcopy(reference), tok, name="granite").anatomy.inferred


def test_a_tree_whose_q_k_v_are_not_found_is_refused_each_heads_output_unconfirmed(tok, monkeypatch):
    from attention.models.forward import anatomy_inferred
    from tests.tiny_models import build

    monkeypatch.setattr(anatomy_inferred, "NAMES", {**anatomy_inferred.NAMES, "separate": (), "fused": ()})
    loaded, _ = build("granite", tok)  # its q_proj, k_proj, v_proj now go unrecognised
    with pytest.raises(MissingAnatomy, match="each head's output .* cannot be confirmed"):
        _ = loaded.anatomy
