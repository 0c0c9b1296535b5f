"""Every family the app knows, as a tiny random-weight model: exact or refused, never wrong.

Each model is built twice from the same weights (tests/tiny_models.py): through our loader
(`from_model`, the guard included) and as a plain eager twin. References are the twin's own
output_attentions, a copy of the twin with one head's columns of W_O zeroed (found by this file's own
paths, not the anatomy), and the twin's full forward pass over a generated text.
"""

import copy

import numpy as np
import pytest
import torch

from attention.models import ModelUnavailable, attend, from_model, load_model
from attention.models.analyses.head_effects import head_ablation, head_ablation_cosine
from attention.models.analyses.predictions import generate
from attention.models.analyses.target_foil import contrast
from attention.models.forward.survey_pass import survey
from tests.numerics import assert_float32_close
from tests.tiny_models import EVERY, FAMILIES, TEXT, build, feature_trials, own_attentions

DECODERS = [n for n, f in FAMILIES.items() if f.architecture == "decoder-only"]


@pytest.fixture(scope="module")
def built(tok):
    """name -> (loaded, reference, att on TEXT), built once per family for the module."""
    cache = {}

    def get(name):
        if name not in cache:
            loaded, reference = build(name, tok)
            cache[name] = loaded, reference, attend(loaded, TEXT)
        return cache[name]
    return get


@pytest.mark.numeric
@pytest.mark.parametrize("name", list(FAMILIES))
def test_weights_equal_the_models_own_eager_attention(name, built):
    loaded, reference, att = built(name)
    assert len(att.tokens) > 4 * 2  # longer than every window of the tiny configs (4 tokens)
    own = own_attentions(reference, att)
    assert len(own) == att.n_layers
    for layer, weights in enumerate(own):
        np.testing.assert_allclose(att.weights[layer], weights, atol=1e-5, err_msg=f"{name} layer {layer + 1}")
    assert loaded.check.gap <= 1e-4 and loaded.check.summary
    # The head survey, made inside the forward pass where our kernel made the attention, from the twin's weights.
    found = survey(att)
    own = np.stack(own)  # (L, H, n, m)
    np.testing.assert_allclose(found.column_mass, own.mean(2), atol=1e-5, err_msg=name)
    entropy = -(own * np.log(np.where(own > 0, own, 1))).sum(-1).mean(-1)
    np.testing.assert_allclose(found.entropy, entropy, atol=1e-4, err_msg=name)


@pytest.mark.parametrize("name", [n for n, f in FAMILIES.items() if f.architecture != "encoder-decoder"])
def test_hidden_states_made_with_our_kernel_equal_the_eager_twins(name, built):
    """Every layer's output came from our attention kernel (or, for families outside the attention
    interface, the model's own): the hidden states equal the eager twin's."""
    loaded, reference, att = built(name)
    with torch.no_grad():
        states = reference(input_ids=torch.tensor(att.token_ids)[None], output_hidden_states=True).hidden_states
    expected = np.stack([h[0].numpy() for h in states])
    assert att.hidden.shape == expected.shape
    np.testing.assert_allclose(att.hidden, expected, atol=1e-5 * max(1.0, float(np.abs(expected).max())), err_msg=name)
    assert loaded.check.output_gap <= 1e-4


def _zeroed_copy(reference, name: str, layer: int, head: int, n_heads: int):
    """The twin with head `head` of `layer` removed by hand: its slice of W_O's input set to read nothing."""
    edited = copy.deepcopy(reference)
    linear = edited.get_submodule(FAMILIES[name].w_o.format(layer=layer))
    with torch.no_grad():
        if type(linear).__name__ == "Conv1D":  # GPT-2 stores (in, out)
            d = linear.weight.shape[0] // n_heads
            linear.weight[head * d:(head + 1) * d, :] = 0
        else:  # (out, in)
            d = linear.weight.shape[1] // n_heads
            linear.weight[:, head * d:(head + 1) * d] = 0
    return edited


@pytest.mark.parametrize("name", [n for n, f in FAMILIES.items() if f.w_o])
def test_removing_a_head_equals_zeroing_its_columns_in_a_copy(name, built, tok):
    loaded, reference, att = built(name)
    ids = torch.tensor(att.token_ids)[None]
    decoder = att.next_logits is not None
    if decoder:
        pair = contrast(att, tok, " dog", " cat")
        effects = head_ablation(loaded, att, pair)
        t, f = pair.target.token_id, pair.foil.token_id
    else:
        effects = head_ablation_cosine(loaded, att, "fox")
        with torch.no_grad():
            clean = reference(input_ids=ids).last_hidden_state[0, effects.token]
    for layer, head in [(0, 1), (att.n_layers - 1, 3)]:
        edited = _zeroed_copy(reference, name, layer, head, att.n_heads)
        with torch.no_grad():
            if decoder:
                logits = edited(input_ids=ids).logits[0, -1]
                expected = float(logits[t] - logits[f]) - effects.baseline
            else:
                moved = edited(input_ids=ids).last_hidden_state[0, effects.token]
                expected = 1 - float(torch.nn.functional.cosine_similarity(moved, clean, dim=0))
        assert effects.effect[layer, head] == pytest.approx(expected, abs=2e-5), (name, layer, head)


@pytest.mark.parametrize("name", DECODERS)
def test_generation_rows_equal_one_full_pass(name, built):
    loaded, reference, _ = built(name)
    gen = generate(loaded, "the cat sat on the mat", max_new_tokens=3)
    with torch.no_grad():
        attentions = reference(input_ids=torch.tensor(gen.ids)[None], output_attentions=True).attentions
    for step in gen.steps:
        expected = np.stack([a[0, :, step.position, :step.position + 1].numpy() for a in attentions])
        np.testing.assert_allclose(step.rows, expected, atol=1e-5, err_msg=f"{name} step at {step.position}")


@pytest.mark.parametrize("name", ["albert", "t5"])
def test_what_a_family_cannot_have_is_refused_with_its_reason(name, built, tok):
    loaded, _, att = built(name)
    with pytest.raises(ValueError, match="shared block|encoder-decoder"):
        head_ablation_cosine(loaded, att, "fox")
    if name == "t5":  # its scores carry a learned position bias: shown as the model's own, never rebuilt
        assert loaded.check.own_weights
        with pytest.raises(ValueError, match="position bias"):
            att.head_trace(0, 0)


@pytest.mark.numeric
def test_the_guard_refuses_a_model_whose_attention_output_is_wrong(monkeypatch, tok):
    """Our kernel's output broken on purpose (the values 1 % too large) must refuse the model, with the gap."""
    from attention.models.forward.kernel import SurveyKernel

    right = SurveyKernel.__call__
    monkeypatch.setattr(SurveyKernel, "__call__", lambda self, call: None if (out := right(self, call)) is None
                        else out * 1.01)
    with pytest.raises(ModelUnavailable, match=r"at layer 1 the output this app's attention kernel makes differs "
                                               r"from the model's own by \d\.\de-\d+ .*fed the same q, k and v"):
        build("llama", tok)


@pytest.mark.numeric
def test_the_guard_refuses_a_model_whose_rebuilt_weights_are_wrong(monkeypatch, tok):
    """A recomputation broken on purpose (the scale off by 10 %) must refuse the model, with the gap."""
    import attention.models.forward.attention_stack as attention_stack

    right = attention_stack.layer_weights
    monkeypatch.setattr(attention_stack, "layer_weights",
                        lambda q, k, *, scale, **kw: right(q, k, scale=scale * 1.1, **kw))
    with pytest.raises(ModelUnavailable, match=r"refused rather than shown wrong: at layer 1 the attention weights "
                                               r"rebuilt from its q and k differ from its own by \d\.\de-\d+"):
        build("llama", tok)


def test_a_family_without_an_anatomy_entry_is_read_from_its_tree_or_shows_weights_and_says_what_is_missing(
        monkeypatch, tok):
    from attention.models.forward import anatomy

    tabled, _ = build("qwen2", tok)
    assert tabled.anatomy.inferred is None  # found now, from the table's entry
    monkeypatch.setattr(anatomy, "FAMILIES", {k: v for k, v in anatomy.FAMILIES.items() if k not in ("qwen2", "opt")})
    loaded, reference = build("qwen2", tok)  # a fresh load: the anatomy is looked up again, and read from the tree
    assert loaded.anatomy.inferred and [loaded.network.get_submodule(f"model.layers.{i}.self_attn.o_proj")
                                        for i in range(2)] == list(loaded.anatomy.outputs)
    att, same = attend(loaded, TEXT), attend(tabled, TEXT)
    c = contrast(att, tok, " dog", " cat")
    # (the table's entry restarts each pass at the block edited, the tree's runs it whole: float64 sums differ)
    assert_float32_close(head_ablation(loaded, att, c).effect, head_ablation(tabled, same, c).effect, terms=64)
    loaded, reference = build("opt", tok)  # its blocks have no module named as an MLP is: not read
    att = attend(loaded, TEXT)
    np.testing.assert_allclose(att.weights[1], own_attentions(reference, att)[1], atol=1e-5)
    with pytest.raises(ValueError, match="“opt” has no entry.*no MLP in a block"):
        head_ablation(loaded, att, contrast(att, tok, " dog", " cat"))


def test_a_notebooks_model_and_a_saved_folder_open_as_the_same_model(tmp_path, tok, monkeypatch):
    loaded, reference = build("gpt_neox", tok)
    folder = tmp_path / "models" / "pythia-tiny"
    reference.save_pretrained(folder)
    tok.save_pretrained(folder)
    from_disk = load_model(str(folder))
    assert from_disk.spec.architecture == "decoder-only" and from_disk.check.gap <= 1e-4
    np.testing.assert_allclose(attend(from_disk, TEXT).weights, attend(loaded, TEXT).weights, atol=1e-6)
    monkeypatch.setenv("ATTENTION_EXPLORER_MODEL_DIRS", str(tmp_path / "models"))
    assert load_model("local:models/pythia-tiny").spec.label == "models/pythia-tiny (local folder)"
    with pytest.raises(ModelUnavailable, match="no folder"):
        load_model(str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelUnavailable, match="no config.json"):
        load_model(str(tmp_path / "empty"))
    with pytest.raises(ModelUnavailable, match="allowlist"):  # the app never opens a typed path
        load_model(str(folder), paths=False)


def test_a_model_already_in_a_notebook_is_handed_over_without_a_copy(tok):
    import transformers as tf

    model = tf.LlamaForCausalLM(FAMILIES["llama"].config())  # sdpa attention, training mode: as a notebook has it
    loaded = from_model(model, tok)
    assert loaded.network is model and not model.training and loaded.spec.architecture == "decoder-only"
    assert attend(loaded, TEXT).self_attn.captured


def test_every_family_of_the_anatomys_table_has_a_tiny_model_and_no_tiny_model_is_outside_it():
    """A family added to the table (attention/models/forward/anatomy.py) without a tiny model here fails, so
    every family test sweeps it once it has one (docs/develop.md, "A model family")."""
    from attention.models.forward.anatomy import FAMILIES as TABLE

    tiny = {family.config().model_type for family in FAMILIES.values()}
    assert tiny == set(TABLE), (
        f"families of the table without a tiny model in tests/tiny_models.py FAMILIES: {sorted(set(TABLE) - tiny)}; "
        f"tiny models of families not in the table: {sorted(tiny - set(TABLE))} (a family that moves into the table "
        "from OUTSIDE, read from its module tree until then, moves its tiny model from OUTSIDE to FAMILIES too)")


@pytest.mark.parametrize("name", list(EVERY))
def test_capabilities_say_what_each_family_does(name, built, tok):
    """The table's answer for each feature equals a run of it: None where it runs, its reason word for word
    where it refuses (HookPointError is a ValueError too). A rule that promises too much or too little fails."""
    from attention.models import capabilities

    loaded, _, att = built(name)
    said = capabilities(loaded)
    for feature, run in feature_trials(loaded, att, tok).items():
        try:
            run()
        except ValueError as err:
            assert said[feature] == str(err), (name, feature, str(err), said[feature])
        else:
            assert said[feature] is None, (name, feature, "runs, but capabilities say", said[feature])
