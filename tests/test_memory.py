"""Memory is checked before it is spent: a model's size from its config alone, and a refusal, with the figures,
before anything is loaded."""

import pytest
import torch
import transformers as tf

from attention.models import (
    MEMORY_ENV,
    ModelUnavailable,
    NotEnoughMemory,
    attend,
    load_model,
    plan_memory,
    weight_bytes,
)
from tests.tiny_models import FAMILIES, saved

LLAMA_8B = dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                num_key_value_heads=8, vocab_size=128256, max_position_embeddings=131072)  # Llama-3.1-8B's shapes


@pytest.mark.parametrize("family", ["llama", "gpt2", "bert", "gemma2"])
def test_the_size_from_the_config_is_the_built_models_own(family):
    tiny = FAMILIES[family]
    config = tiny.config()
    built = tiny.model(config)
    own = sum(t.numel() * t.element_size() for t in {id(t): t for t in (*built.parameters(),
                                                                         *built.buffers())}.values())
    assert weight_bytes(config, tiny.model) == own
    assert weight_bytes(config, tiny.model, torch.bfloat16) < own  # half the floating-point bytes


def test_an_8b_model_in_float32_is_refused_on_24_gb_with_its_figures(monkeypatch):
    monkeypatch.setenv(MEMORY_ENV, "24")
    config = tf.LlamaConfig(**LLAMA_8B)
    with pytest.raises(NotEnoughMemory) as err:
        plan_memory(config, tf.LlamaForCausalLM, max_tokens=512, name="Llama-3.1-8B")
    said = str(err.value)
    assert "32.1 GB in float32" in said and "19.2 GB usable" in said and "16.1 GB" in said  # half precision
    assert "Nothing was loaded" in said
    monkeypatch.setenv(MEMORY_ENV, "64")
    assert plan_memory(config, tf.LlamaForCausalLM, max_tokens=512).max_tokens == 512


def test_a_folder_too_large_is_refused_before_its_weights_are_read_and_a_tight_one_reads_fewer_tokens(
        tmp_path, monkeypatch, tok):
    from attention.models.forward import loading

    tiny = FAMILIES["llama"]
    config = saved("llama", tmp_path, tok).config
    weights = weight_bytes(config, tiny.model)
    plan = plan_memory(config, tiny.model, max_tokens=512)  # on this machine's memory
    per_token, while_loading = plan.per_token, plan.loading
    read = []
    real = loading._from_pretrained
    monkeypatch.setattr(loading, "_from_pretrained", lambda *a, **k: read.append(a) or real(*a, **k))
    monkeypatch.setenv(MEMORY_ENV, str(weights / 2 / 1e9))
    with pytest.raises(ModelUnavailable, match="does not fit"):
        load_model(str(tmp_path))
    assert not read  # refused from the config alone
    monkeypatch.setenv(MEMORY_ENV, str((weights + while_loading + 100 * per_token) / 0.8 / 1e9))
    loaded = load_model(str(tmp_path))
    assert 64 <= loaded.spec.max_tokens < 512 and read


def test_a_70b_shaped_model_is_refused_from_its_config_with_nothing_allocated(monkeypatch):
    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096

    config = tf.LlamaConfig(hidden_size=8192, intermediate_size=28672, num_hidden_layers=80, num_attention_heads=64,
                            num_key_value_heads=8, vocab_size=128256, max_position_embeddings=131072)
    monkeypatch.setenv(MEMORY_ENV, "24")
    before = rss()
    with pytest.raises(NotEnoughMemory) as err:
        plan_memory(config, tf.LlamaForCausalLM, max_tokens=4096, name="Llama-3.1-70B")
    assert rss() - before < 50e6  # the meta device: shapes only
    said = str(err.value)
    # Llama-3.1-70B: 70.55 B parameters (its model card): 282.2 GB in float32, 141.1 GB in bfloat16
    assert "282.2 GB in float32" in said and "141.1 GB" in said and "Nothing was loaded" in said


SPLIT = {"model.embed_tokens": "cpu", "model.layers.0": "cpu", "model.layers.1": "disk", "model.norm": "cpu",
         "model.rotary_emb": "cpu", "lm_head": "cpu"}


def test_a_model_split_between_memory_and_disk_shows_its_own_attention_and_every_analysis_runs(tmp_path, tok,
                                                                                                 monkeypatch):
    """accelerate's device_map with the last layer on disk: its weights are read in as it runs (hooks), and
    what reads weights outside the pass reads them from the offload files (anatomy.parameter)."""
    import numpy as np

    from attention.models import (
        composition,
        contrast,
        direct_logit_attribution,
        head_ablation,
        logit_lens,
        qk_attribution,
    )
    from tests.tiny_models import TEXT, own_attentions

    monkeypatch.setenv("ATTENTION_EXPLORER_CACHE", str(tmp_path / "cache"))
    reference = saved("llama", tmp_path / "model", tok)
    split = load_model(str(tmp_path / "model"), device_map=SPLIT)
    assert split.network.hf_device_map["model.layers.1"] == "disk"
    assert split.network.model.layers[1].self_attn.o_proj.weight.device.type == "meta"  # really not in memory
    whole = load_model(str(tmp_path / "model"))
    reference.set_attn_implementation("eager")
    att, whole_att = attend(split, TEXT), attend(whole, TEXT)
    for layer, own in enumerate(own_attentions(reference, att)):
        assert np.abs(att.weights[layer] - own).max() <= 1e-5
    c, whole_c = contrast(att, tok, "the", "a"), contrast(whole_att, tok, "the", "a")
    pairs = [(head_ablation(split, att, c).effect, head_ablation(whole, whole_att, whole_c).effect),
             (direct_logit_attribution(split, att, c).heads, direct_logit_attribution(whole, whole_att, whole_c).heads),
             (logit_lens(split, att).top_probability, logit_lens(whole, whole_att).top_probability),
             (qk_attribution(split, att, 1, 0, 5, 2).matrix, qk_attribution(whole, whole_att, 1, 0, 5, 2).matrix),
             (composition(split, 1, 0).q, composition(whole, 1, 0).q)]
    for on_disk, in_memory in pairs:  # the whole model in memory: held to the model itself by their own tests
        np.testing.assert_allclose(on_disk, in_memory, rtol=1e-5, atol=1e-6)
