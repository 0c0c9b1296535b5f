"""Memory is checked before it is spent: a model's size from its config alone, and a refusal, with the figures,
before anything is loaded."""

import pytest
import torch
import transformers as tf

from attention.models import MEMORY_ENV, ModelUnavailable, NotEnoughMemory, load_model, plan_memory, weight_bytes
from benchmarks.families import FAMILIES

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
    config = tiny.config()
    tiny.model(config).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    weights = weight_bytes(config, tiny.model)
    per_token = plan_memory(config, tiny.model, max_tokens=512).per_token  # on this machine's memory
    read = []
    real = loading._from_pretrained
    monkeypatch.setattr(loading, "_from_pretrained", lambda *a, **k: read.append(a) or real(*a, **k))
    monkeypatch.setenv(MEMORY_ENV, str(weights / 2 / 1e9))
    with pytest.raises(ModelUnavailable, match="does not fit"):
        load_model(str(tmp_path))
    assert not read  # refused from the config alone
    monkeypatch.setenv(MEMORY_ENV, str((weights + 100 * per_token) / 0.8 / 1e9))
    loaded = load_model(str(tmp_path))
    assert 64 <= loaded.spec.max_tokens < 512 and read
