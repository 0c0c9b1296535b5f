"""On a CUDA device everything runs there: models, our kernel, surveys, effects, readouts, why-this-key.

Weights are held to the model's own eager attention on the same device in the same dtype (the guard's rule);
each analysis on the GPU gives what the same analysis gives on the CPU, where other tests hold it to the model
itself. Skipped, with the reason, where no CUDA device is present (this project's CI); the device logic that
runs on the CPU is tested in test_memory.py and test_dtypes.py.
"""

import copy
import dataclasses

import numpy as np
import pytest
import torch

from attention.models import (
    ModelSpec,
    ModelUnavailable,
    attend,
    contrast,
    corpus_survey,
    direct_logit_attribution,
    from_model,
    generate,
    head_ablation,
    head_roles,
    load_model,
    logit_lens,
    qk_attribution,
    survey,
)
from attention.models.forward.check import ROUNDING_UNITS
from attention.models.forward.device_arrays import DeviceArray
from attention.models.forward.memory import LONG_INPUT_TOKENS
from tests.test_guard import gpt_oss, overflowing_llama, said_in_words, sharpened
from tests.tiny_models import FAMILIES, TEXT, own_attentions, saved

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="needs a CUDA device, and this machine has none (run it where one is: "
                                       "ATTENTION_EXPLORER_DEVICE=cuda pytest tests/test_cuda.py)")


@pytest.fixture
def on_cuda(monkeypatch):
    monkeypatch.setenv("ATTENTION_EXPLORER_DEVICE", "cuda")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("family", ["llama", "gemma2", "gpt2", "bert"])
def test_weights_on_the_gpu_are_the_models_own_there(family, dtype, tok, on_cuda):
    tiny = FAMILIES[family]
    torch.manual_seed(0)
    config = tiny.config()
    config._attn_implementation = "eager"
    reference = tiny.model(config).eval().to("cuda", dtype)
    loaded = from_model(copy.deepcopy(reference), tok, name=family)
    assert loaded.device.type == "cuda" and loaded.check.gap <= loaded.check.allowed
    att = attend(loaded, TEXT)
    s = att.self_attn
    assert all(isinstance(a, DeviceArray) and a.tensor.is_cuda for a in (s.q, s.k, s.v, att.hidden))
    assert s.q.tensor.dtype == dtype  # kept where the model made it, in its dtype (issue 47)
    allowed = 2e-5 if dtype == torch.float32 else ROUNDING_UNITS * torch.finfo(dtype).eps / 2 + 1e-4
    for layer, own in enumerate(own_attentions(reference, att)):
        assert np.abs(att.weights[layer] - own).max() <= allowed
    found = survey(att)  # recomputed from q and k on the GPU
    assert np.isfinite(found.tiles).all()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bfloat16", "float16"])
@pytest.mark.parametrize("kind, n_layers", [("llama", 32), ("bert", 24)])
def test_deep_models_with_sharp_heads_open_on_the_gpu_in_16_bits(kind, n_layers, dtype, tok, on_cuda):
    """The guard's check on the GPU (tests/test_guard.py on the CPU): every layer's eager weights beside the
    pass, from that layer's own q and k there; a Llama-1B-shaped model of this kind was refused at 0.33 on
    an H200 before (issue 57)."""
    loaded = from_model(sharpened(kind, n_layers).to("cuda", dtype), tok, name=kind)
    check = loaded.check
    assert loaded.device.type == "cuda" and len(check.layer_gaps) == n_layers and check.gap <= check.allowed


def test_the_gpu_refuses_what_the_cpu_refuses_for_the_same_cause(tok, on_cuda):
    """gpt-oss's sinks (scores not rebuilt) at layer 1, in bfloat16; float16's overflow by layer 2."""
    with pytest.raises(ModelUnavailable) as refused:
        from_model(gpt_oss().to("cuda", torch.bfloat16), tok, name="gpt-oss-tiny")
    assert "at layer 1 the attention weights rebuilt" in said_in_words(refused.value)
    with pytest.raises(ModelUnavailable) as refused:
        from_model(overflowing_llama().to("cuda", torch.float16), tok, name="llama-tiny")
    assert "exceed float16's range by layer 2" in said_in_words(refused.value)


def _tiny_llama(tok, device: str):
    tiny = FAMILIES["llama"]
    torch.manual_seed(0)
    return from_model(tiny.model(tiny.config()).eval().to(device), tok, name="llama")


def _same(a, b, path="result"):
    """Every array and number of two results equal within float32 rounding (dataclasses walked)."""
    if dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            if f.name not in ("probe", "att"):
                _same(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
    elif isinstance(a, np.ndarray) and a.dtype.kind in "fc":
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4, err_msg=path)
    elif isinstance(a, (float, np.floating)):
        assert a == pytest.approx(b, rel=1e-3, abs=1e-4), path
    elif isinstance(a, (tuple, list)) and a and dataclasses.is_dataclass(a[0]):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{path}[{i}]")


def test_every_analysis_on_the_gpu_gives_what_it_gives_on_the_cpu(tok, monkeypatch):
    prompt = "when mary and john went to the store john gave a drink to"
    results = {}
    for device in ("cpu", "cuda"):
        monkeypatch.setenv("ATTENTION_EXPLORER_DEVICE", device)
        loaded = _tiny_llama(tok, device)
        att = attend(loaded, prompt)
        c = contrast(att, tok, "mary", "john")
        results[device] = {
            "survey": survey(att), "ablation": head_ablation(loaded, att, c),
            "dla": direct_logit_attribution(loaded, att, c), "lens": logit_lens(loaded, att),
            "qk": qk_attribution(loaded, att, 1, 2, len(att.tokens) - 1, 2, against="mean"),
            "roles": head_roles(loaded), "generate": generate(loaded, prompt, max_new_tokens=3),
            "corpus": corpus_survey(loaded, [prompt, TEXT.lower()], sample=50)}
    for name, on_cpu in results["cpu"].items():
        _same(on_cpu, results["cuda"][name], name)


def test_a_folder_loads_on_the_gpu_with_its_token_limit_from_the_gpus_memory(tmp_path, tok, on_cuda):
    saved("llama", tmp_path, tok, max_position_embeddings=1 << 20)
    loaded = load_model(str(tmp_path), dtype="bfloat16")
    assert loaded.device.type == "cuda" and next(loaded.network.parameters()).dtype == torch.bfloat16
    assert loaded.spec.token_limit(loaded.device) == LONG_INPUT_TOKENS["cuda"]  # a tiny model: the ceiling
    assert isinstance(loaded.spec, ModelSpec)


def test_a_model_split_over_the_gpu_the_cpu_and_disk_gives_what_it_gives_whole(tmp_path, tok, monkeypatch):
    """accelerate's device_map across devices: layer 0 on the GPU, layer 1 on disk (run on the GPU), the head
    on the CPU. Weights against the model's own eager attention; the analyses against the whole model's."""
    from attention.models import composition, logit_lens

    monkeypatch.setenv("ATTENTION_EXPLORER_DEVICE", "cuda")
    monkeypatch.setenv("ATTENTION_EXPLORER_CACHE", str(tmp_path / "cache"))
    reference = saved("llama", tmp_path / "model", tok)
    split = load_model(str(tmp_path / "model"), device_map={
        "model.embed_tokens": 0, "model.layers.0": 0, "model.layers.1": "disk", "model.norm": "cpu",
        "model.rotary_emb": 0, "lm_head": "cpu"})
    whole = load_model(str(tmp_path / "model"))
    reference.set_attn_implementation("eager")
    att, whole_att = attend(split, TEXT), attend(whole, TEXT)
    for layer, own in enumerate(own_attentions(reference, att)):
        assert np.abs(att.weights[layer] - own).max() <= 2e-5
    c, whole_c = contrast(att, tok, "the", "a"), contrast(whole_att, tok, "the", "a")
    _same(head_ablation(split, att, c), head_ablation(whole, whole_att, whole_c))
    _same(direct_logit_attribution(split, att, c), direct_logit_attribution(whole, whole_att, whole_c))
    _same(logit_lens(split, att), logit_lens(whole, whole_att))
    _same(qk_attribution(split, att, 1, 0, 5, 2), qk_attribution(whole, whole_att, 1, 0, 5, 2))
    _same(composition(split, 1, 0), composition(whole, 1, 0))


@pytest.mark.parametrize("family,dtype", [("llama", torch.float32), ("llama", torch.bfloat16),
                                          ("gemma3", torch.bfloat16), ("mistral", torch.bfloat16)])
def test_the_fused_survey_gives_what_the_chunked_survey_gives(family, dtype, tok, on_cuda, monkeypatch):
    """Issue 47: from FUSED_MIN_TOKENS on, a GPU surveys each 16-bit layer in two fused Triton passes (exactly
    causal and sliding-window layers); every sum equals the chunked torch path's on the same q and k. A float32
    model takes the torch path (faster there without tensor cores)."""
    from attention.models.forward import fused_survey

    tiny = FAMILIES[family]
    torch.manual_seed(0)
    config = tiny.config()
    config.max_position_embeddings = 4096
    loaded = from_model(tiny.model(config).eval().to("cuda", dtype), tok, name=family)
    att = attend(loaded, " ".join([TEXT] * 150))
    s = att.self_attn
    assert s.n_queries >= fused_survey.FUSED_MIN_TOKENS
    fused_layers = []
    original = fused_survey.layer_sums
    monkeypatch.setattr(fused_survey, "layer_sums", lambda *a: fused_layers.append(a[1]) or original(*a))
    fused = survey(att)
    assert fused_layers == ([] if dtype == torch.float32 else list(range(s.n_layers)))
    s.derived.survey = None
    monkeypatch.setattr(fused_survey, "FUSED_MIN_TOKENS", 10 ** 9)
    chunked = survey(att)
    assert len(fused_layers) == (0 if dtype == torch.float32 else s.n_layers)  # the torch path this time
    for name in ("tiles", "entropy", "column_mass", "majority_share", "offset_mass", "special_mass", "previous",
                 "mean_distance", "sink_mass"):
        np.testing.assert_allclose(getattr(fused, name), getattr(chunked, name), rtol=1e-4, atol=2e-6, err_msg=name)
    np.testing.assert_array_equal(fused.head_types, chunked.head_types)
