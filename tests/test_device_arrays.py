"""Results kept on the device (issue 47): what a GPU's pass keeps, checked on the CPU.

On a GPU q, k, v, the masks and the hidden states stay there in the model's dtype (DeviceArrays) and the
model's own fused kernel makes each layer's output. resident_on("cpu") takes the same path here: the weights
are held to the model's own eager attention, and every analysis to what the numpy path gives (which other
tests hold to the model itself). tests/test_cuda.py repeats this on a GPU.
"""

import numpy as np
import pytest
import torch

from attention.models import (
    attend,
    contrast,
    direct_logit_attribution,
    export_npz,
    from_model,
    head_ablation,
    load_npz,
    logit_lens,
    qk_attribution,
    survey,
)
from attention.models.forward.device_arrays import DeviceArray, resident_on
from tests.test_cuda import _same
from tests.tiny_models import FAMILIES, TEXT, own_attentions

PROMPT = "when mary and john went to the store john gave a drink to"


def _tiny(tok, dtype=torch.float32):
    tiny = FAMILIES["llama"]
    torch.manual_seed(0)
    config = tiny.config()
    config._attn_implementation = "eager"
    reference = tiny.model(config).eval().to(dtype)
    import copy
    return reference, from_model(copy.deepcopy(reference), tok, name="llama")


def test_a_device_array_reads_as_the_numpy_array_it_stands_for():
    t = torch.randn(3, 4, 5).to(torch.bfloat16)
    a, ref = DeviceArray(t), t.float().numpy()
    assert a.shape == ref.shape and a.ndim == 3 and len(a) == 3 and a.dtype == np.float32
    assert a.nbytes == t.numel() * 2  # bytes where it lives, in its own dtype
    np.testing.assert_array_equal(a[1, 2], ref[1, 2])
    np.testing.assert_array_equal(a[:, [0, 3]], ref[:, [0, 3]])
    np.testing.assert_array_equal(a[np.array([2, 0])], ref[[2, 0]])
    np.testing.assert_array_equal(np.asarray(a), ref)
    np.testing.assert_array_equal(a * 2, ref * 2)  # arithmetic on a copy
    assert a.sum() == pytest.approx(ref.sum(), rel=1e-6)  # any other ndarray method, likewise
    np.testing.assert_array_equal(a[np.array([2, 0], np.uint8)], ref[np.array([2, 0], np.uint8)])  # not a mask
    np.testing.assert_array_equal(a[::-1, 1], ref[::-1, 1])
    with pytest.raises(ValueError):
        bool(a)
    mask = DeviceArray(torch.tril(torch.ones(4, 4, dtype=torch.bool)))
    assert mask.dtype == bool and not mask.all() and mask.any()
    np.testing.assert_array_equal(mask | mask.T, np.tril(np.ones((4, 4), bool)) | np.triu(np.ones((4, 4), bool)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_kept_on_the_device_the_weights_are_the_models_own(tok, dtype):
    reference, loaded = _tiny(tok, dtype)
    with resident_on("cpu"):
        att = attend(loaded, TEXT)
    s = att.self_attn
    assert all(isinstance(a, DeviceArray) for a in (s.q, s.k, s.v, att.hidden))
    assert s.q.tensor.dtype == dtype  # the model's dtype: nothing made float32 to be kept
    assert s.derived.survey is None  # the model's own kernel ran: the survey waits for a view
    allowed = 2e-5 if dtype == torch.float32 else 1e-2
    for layer, own in enumerate(own_attentions(reference, att)):
        assert np.abs(s.layer_weights(layer).numpy() - own).max() <= allowed
    kept_there = sum(a.nbytes for a in (s.q, s.k, s.v, att.hidden))
    assert att.device_nbytes >= kept_there > 0 and att.host_nbytes == att.nbytes - att.device_nbytes


def test_every_analysis_of_a_result_kept_on_the_device_gives_what_the_numpy_one_gives(tok):
    _, loaded = _tiny(tok)
    results = {}
    for where in ("numpy", "device"):
        if where == "device":
            with resident_on("cpu"):
                att = attend(loaded, PROMPT)
        else:
            att = attend(loaded, PROMPT)
        c = contrast(att, tok, "mary", "john")
        results[where] = {
            "weights": att.weights, "hidden": np.asarray(att.hidden), "survey": survey(att),
            "ablation": head_ablation(loaded, att, c), "dla": direct_logit_attribution(loaded, att, c),
            "lens": logit_lens(loaded, att), "qk": qk_attribution(loaded, att, 1, 2, len(att.tokens) - 1, 2),
            "trace": att.head_trace(1, 2), "row": att.self_attn.query_rows(5)}
        results[where]["reopened"] = load_npz(export_npz(att)).weights
    for name, numpy_side in results["numpy"].items():
        if isinstance(numpy_side, np.ndarray):
            np.testing.assert_allclose(results["device"][name], numpy_side, rtol=1e-5, atol=1e-6, err_msg=name)
        else:
            _same(numpy_side, results["device"][name], name)


def test_the_views_of_a_result_kept_on_the_device_are_the_numpy_ones(tok):
    """The views a page draws, pooled (max_shown below the length: the mask pooled where it is) and not, and a
    comparison of two results, from DeviceArrays and from numpy arrays of the same pass."""
    from attention.models import Reading, compare_heads, head_pair, query_row, token_focus, zoom

    _, loaded = _tiny(tok)
    numpy_side = attend(loaded, TEXT)
    with resident_on("cpu"):
        device_side = attend(loaded, TEXT)
    assert isinstance(device_side.self_attn.masks[0], DeviceArray)
    n = len(numpy_side.tokens)

    def views(att):
        return [zoom(att, "head", layer=1, head=2), zoom(att, "mean", layer=0, max_shown=n // 3),
                zoom(att, "head", layer=1, head=0, reading=Reading(words=True, without_sinks=True)),
                query_row(att, n - 1, layer=1), token_focus(att, n - 2),
                head_pair(att, att, compare_heads(att, att), 1, 2, max_shown=n // 3)]

    for a, b in zip(views(numpy_side), views(device_side), strict=True):
        _same(a, b, type(a).__name__)
        for name in ("mask",):
            if getattr(a, name, None) is not None:
                np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


def test_copies_made_of_a_result_on_the_device_go_with_it(tok):
    """A bfloat16 layer is made float32 once for its chunks and kept (recompute.on_device); once the result is
    dropped, so are those copies (on a GPU they would hold its memory there)."""
    import gc

    from attention.models.forward import recompute

    _, loaded = _tiny(tok, torch.bfloat16)
    with resident_on("cpu"):
        att = attend(loaded, TEXT)
    survey(att)
    assert any(key[0] == "part" for key in recompute._copies)
    del att
    gc.collect()
    assert not any(key[0] == "part" for key in recompute._copies)


def test_a_gpu_out_of_memory_is_tried_again_once_then_said_plainly(tok, monkeypatch):
    from attention.models import NotEnoughMemory
    from attention.models.forward import running

    _, loaded = _tiny(tok)
    real, calls = running._attend, []

    def short_of_memory(*args, failures):
        calls.append(1)
        if len(calls) <= failures:
            raise torch.OutOfMemoryError("CUDA out of memory")
        return real(*args)

    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda *a: (1.5e9, 80e9))
    monkeypatch.setattr(running, "_attend", lambda *args: short_of_memory(*args, failures=1))
    assert attend(loaded, TEXT).tokens and len(calls) == 2  # freed, then read
    calls.clear()
    monkeypatch.setattr(running, "_attend", lambda *args: short_of_memory(*args, failures=2))
    with pytest.raises(NotEnoughMemory, match="1.5 GB free of 80.0 GB"):
        attend(loaded, TEXT)
