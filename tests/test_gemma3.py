"""Gemma 3 270M, the third bundled model: local and global layers, QK-norm, one KV head.

Its weights are held to the model's own eager attention (transformers' code, loaded again from the same
converted folder), at a short text and past its 512-token window; its layers' kinds to the masks the model
itself applied; the joined file to the sha256 its carrier publishes.
"""

import hashlib

import numpy as np
import pytest
import torch

from attention import figures
from attention.models import BUNDLED, ModelUnavailable, attend, carriers, zoom
from attention.models.forward import bundled

pytestmark = pytest.mark.slow

SHORT = "I sat on the river bank and watched the otters slide into the water."
LONG = " ".join(["The river bank was muddy after the storm, and the otters slid along it."] * 45)  # 766 tokens


@pytest.fixture(scope="module")
def eager_gemma3(gemma3):
    """Gemma 3 loaded again with transformers' own eager attention: the reference, no code of ours."""
    from transformers import AutoModelForCausalLM

    folder = bundled.gemma3_dir(lambda message: None)
    return AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()


@pytest.mark.parametrize("text", [SHORT, LONG], ids=["short", "past-the-window"])
def test_weights_equal_gemma3s_own_eager_attention(gemma3, eager_gemma3, text):
    att = attend(gemma3, text)
    ids = torch.as_tensor(att.token_ids)[None]
    with torch.inference_mode():
        own = eager_gemma3(ids, output_attentions=True).attentions  # L x (1, H, n, n)
    assert len(own) == att.n_layers == 18 and own[0].shape[1] == att.n_heads == 4
    gap = max(float(np.abs(att.self_attn.layer_weights(layer).numpy() - own[layer][0].float().numpy()).max())
              for layer in range(att.n_layers))
    assert gap < 1e-5, gap
    if len(att.tokens) > 512:  # a local layer gives nothing beyond its window, a global one does
        assert len(att.tokens) > 700
        assert float(own[0][0, :, -1, : len(att.tokens) - 512].abs().max()) == 0.0
        assert float(own[5][0, :, -1, : len(att.tokens) - 512].sum()) > 0.0


def test_layer_kinds_are_the_masks_the_model_applied(gemma3):
    att = attend(gemma3, LONG)
    n = len(att.tokens)
    assert n > 512
    for layer in range(att.n_layers):
        mask = att.self_attn.mask_of(layer)
        seen = n if mask is None else int(mask[-1].sum())  # keys the last query may see
        window = att.window(layer)
        assert seen == (n if window is None else window), (layer, seen, window)
    assert [i for i in range(att.n_layers) if att.layer_kind(i) == "global"] == [5, 11, 17]
    assert att.layer_kind(0) == "local, window 512"
    assert "past token 512" in att.windows_note() and "fit" in attend(gemma3, SHORT).windows_note()


def test_a_local_layers_window_is_drawn_on_its_heatmap(gemma3):
    att = attend(gemma3, LONG)
    local, full = zoom(att, "head", layer=0, head=0), zoom(att, "head", layer=5, head=0)
    assert "local, window 512" in local.title and "global" in full.title
    edge = figures.view_heatmap(local).layout.shapes
    assert len(edge) == 1 and figures.view_heatmap(full).layout.shapes == ()
    # the edge runs along the first key each query sees: for the last query (row n - 1) key n - 512, in the
    # cells of the block maxima (a token edge t at t / b - 0.5)
    n, b, line = len(att.tokens), local.block, edge[0]
    at_last = line.x0 + ((n - 0.5) / b - 0.5 - line.y0) * (line.x1 - line.x0) / (line.y1 - line.y0)
    assert at_last == pytest.approx((n - 512) / b - 0.5)
    short = attend(gemma3, SHORT)
    assert figures.view_heatmap(zoom(short, "head", layer=0, head=0)).layout.shapes == ()  # all in the window


def test_gemma3_is_installed_by_install_models_with_its_parts():
    spec = BUNDLED["gemma3"]
    assert spec.carrier in carriers() and all(part in carriers() for part in spec.parts) and len(spec.parts) == 4


def test_joined_parts_are_checked_against_the_sha256(tmp_path):
    parts = [tmp_path / f"p{i}" for i in range(3)]
    for i, part in enumerate(parts):
        part.write_bytes(bytes([i]) * 1000)
    whole = b"".join(p.read_bytes() for p in parts)
    bundled._join(parts, tmp_path / "whole", hashlib.sha256(whole).hexdigest())
    assert (tmp_path / "whole").read_bytes() == whole
    with pytest.raises(ModelUnavailable, match="sha256"):
        bundled._join(parts[::-1], tmp_path / "mixed", hashlib.sha256(whole).hexdigest())  # parts out of order


def test_gemma3_reads_the_same_words_as_smollm2_and_compares_with_it(gemma3, smollm2):
    """Its tokenizer calls the whole text one word (no pre-tokenizer in the GGUF file): words come from the
    offsets, so the two models are compared on the words SmolLM2's tokenizer finds."""
    from attention.models import compare_results, word_groups

    text = "I sat on the river-bank, and watched the otters."
    g, s = attend(gemma3, text), attend(smollm2, text)
    assert [w for w, sp in zip(word_groups(g).words, word_groups(g).special, strict=True) if not sp] == \
        [w for w, sp in zip(word_groups(s).words, word_groups(s).special, strict=True) if not sp]
    cmp = compare_results(s, g)
    assert cmp.words and cmp.distance.shape == (30, 9) and cmp.match.shape == (30, 9, 2)
    assert (cmp.match[..., 0] < 18).all() and (cmp.match[..., 1] < 4).all()
