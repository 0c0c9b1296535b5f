"""The GPU's fused survey (attention.models.forward.fused_survey), run on the CPU by Triton's interpreter: every
sum it makes equals the chunked torch path's (attention.models.forward.survey_sums), which other tests hold to
the model's own attentions. Exactly causal and grouped-query (Llama), sliding-window and full layers in one
model (Gemma 3), every key visible (BERT). The same comparison runs compiled on a GPU in tests/test_cuda.py.

Small sizes (the interpreter runs each tile in numpy): a grid of few cells, so that a cell is at least a
tile wide at ~300 tokens, as it is from FUSED_MIN_TOKENS on with the real grid.
"""

import copy
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from attention.models import attend, from_model, survey
from attention.models.forward import fused_survey, survey_sums
from tests.tiny_models import FAMILIES, TEXT

SUMS = ("tiles", "entropy", "column_mass", "majority_share", "offset_mass", "special_mass", "previous",
        "mean_distance", "sink_mass")


def compare(family: str) -> None:
    """The fused survey against the chunked one on a tiny model of `family`, in this process (which must have
    TRITON_INTERPRET=1 from its start: Triton reads it when its own functions are defined)."""
    from tests.tiny_models import tokenizer

    assert fused_survey.interpreted()
    tiny = FAMILIES[family]
    torch.manual_seed(0)
    att = attend(from_model(tiny.model(tiny.config()).eval(), tokenizer(), name=family), " ".join([TEXT] * 20))
    s = att.self_attn  # ~300 tokens
    survey_sums.GRID_CELLS = 40  # 4 x 4 cells a head, each ~75 tokens: at least a tile (64) wide
    windows = [fused_survey.band_window(s, layer) for layer in range(s.n_layers)]
    assert windows == {"llama": [0, 0], "gemma3": [4, 0], "bert": [0, 0]}[family], windows

    fused_survey.FUSED_MIN_TOKENS = 0
    block = survey_sums.SurveySums(s.n_layers, s.n_heads, s.n_queries, s.n_keys).block
    assert fused_survey.supported(s, 0, block) == windows[0]
    for field, value in (("softcap", 30.0), ("own_weights", np.zeros(1))):  # what the kernels do not do
        other = copy.copy(s)
        object.__setattr__(other, field, value)
        assert fused_survey.supported(other, 0, block) is None, field
    assert fused_survey.supported(s, 0, fused_survey.TILE - 1) is None  # a grid cell narrower than a tile

    fused_layers = []
    original = fused_survey.layer_sums
    fused_survey.layer_sums = lambda *a: fused_layers.append(a[1]) or original(*a)
    s.derived.survey = None  # the CPU's forward pass surveyed as it went: survey again, as a GPU's first view does
    fused = survey(att)
    assert fused_layers == list(range(s.n_layers)) and fused.block >= fused_survey.TILE

    s.derived.survey = None
    fused_survey.FUSED_MIN_TOKENS = 10 ** 9
    chunked = survey(att)
    assert len(fused_layers) == s.n_layers  # the torch path this time
    for name in SUMS:
        np.testing.assert_allclose(getattr(fused, name), getattr(chunked, name), rtol=1e-4, atol=2e-6,
                                   err_msg=f"{family}: {name}")
    np.testing.assert_array_equal(fused.head_types, chunked.head_types)
    print(family, "n =", s.n_queries, "block =", fused.block, "same")


def test_the_fused_survey_gives_what_the_chunked_survey_gives():
    """Exactly causal with grouped queries (Llama), a sliding window beside a full layer (Gemma 3), every key
    visible (BERT): each in a fresh process under Triton's interpreter."""
    script = "import sys; from tests.test_fused_survey import compare; [compare(f) for f in sys.argv[1:]]"
    done = subprocess.run([sys.executable, "-c", script, "llama", "gemma3", "bert"], capture_output=True, text=True,
                          env={**os.environ, "TRITON_INTERPRET": "1"}, cwd=Path(__file__).parent.parent, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr[-5000:]
    assert done.stdout.count("same") == 3, done.stdout


def test_only_masks_the_kernels_know_are_fused(tok):
    """A mask that is neither causal, a causal window nor absent goes the torch way (None), and so does an
    exactly causal layer in a stack that is not causal as a whole (the kernels read causality from the stack).
    What else the kernels refuse (soft caps, the model's own weights) is checked where they can run: compare."""
    tiny = FAMILIES["llama"]
    torch.manual_seed(0)
    att = attend(from_model(tiny.model(tiny.config()).eval(), tok, name="llama"), TEXT)
    s = att.self_attn
    assert fused_survey.band_window(s, 0) == 0
    mask = s.masks[0].copy()
    mask[5, 1] = False  # a hole in the causal mask
    holed = copy.copy(s)
    object.__setattr__(holed, "masks", (mask, *s.masks[1:]))
    object.__setattr__(holed, "exactly_causal", (False, *s.exactly_causal[1:]))
    assert fused_survey.band_window(holed, 0) is None
    window = np.tril(np.ones_like(mask)) & np.triu(np.ones_like(mask), -2)  # query i sees i - 2 .. i
    object.__setattr__(holed, "masks", (window, *s.masks[1:]))
    assert fused_survey.band_window(holed, 0) == 3
    mixed = copy.copy(s)
    object.__setattr__(mixed, "causal", False)  # as when another layer had no mask
    assert fused_survey.band_window(mixed, 0) is None


@pytest.mark.parametrize("family", ["llama", "gemma3", "bert"])
def test_pairs_counted_from_a_masks_shape_are_the_ones_read_from_it(family, tok):
    """What finish_survey counts for a causal, sliding-window or open mask (band_pairs) equals what the mask
    itself holds (visible_pairs reads it), offset by offset, and the uniform entropy with it."""
    from attention.models.forward.survey_sums import band_pairs, visible_pairs

    tiny = FAMILIES[family]
    torch.manual_seed(0)
    s = attend(from_model(tiny.model(tiny.config()).eval(), tok, name=family), TEXT + " " + TEXT).self_attn
    for layer in range(s.n_layers):
        window = fused_survey.band_window(s, layer)
        read = visible_pairs(s, s.mask_of(layer), 7)
        counted = band_pairs(s.n_queries, s.n_keys, s.causal, window)
        np.testing.assert_array_equal(counted[0], read[0])
        assert counted[1] == pytest.approx(read[1], rel=1e-12)


def test_the_kernels_compile_for_a_gpu_without_one(monkeypatch):
    """Triton compiles both kernels for an H100 (sm_90) here, its own ptxas included: a kernel the interpreter
    runs may still fail to compile (one did, under the GPU machine's Triton 3.6; this uses the pinned Triton,
    and benchmarks/NOTES.md says how to check another version the same way). Two variants take every branch
    between them: bfloat16, causal with a sliding window, a head size padded to a power of two; float16, every
    key visible, tiles read without bounds."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from attention.models.forward import fused_survey_kernels as kernels

    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")  # Triton 3.9 warns that its default will change
    for dtype, constants in (("bf16", dict(CAUSAL=True, WINDOW=512, D=128, PAD=True, BM=64, BN=64)),
                             ("fp16", dict(CAUSAL=False, WINDOW=0, D=64, PAD=False, BM=64, BN=64))):
        pointers = {"Q": f"*{dtype}", "K": f"*{dtype}", "LSE": "*fp32", "ORDER": "*i32", "TILES": "*fp32",
                    "WS": "*fp64", "COLUMN_MASS": "*fp32", "COLUMN_MAJORITY": "*fp32", "BANDS": "*fp32",
                    "scale": "fp32"}
        for kernel in (kernels.lse_kernel, kernels.sums_kernel):
            names = kernel.arg_names
            signature = {a: "constexpr" if a in constants else pointers.get(a, "i32") for a in names}
            source = ASTSource(fn=kernel, signature=signature,
                               constexprs={(names.index(a),): v for a, v in constants.items()})
            compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": 2})
            assert compiled.asm["cubin"]


def test_a_device_the_kernels_cannot_run_on_is_said_once_and_surveyed_by_torch(tok, monkeypatch):
    """A kernel that fails there (too little shared memory for the head size, a Triton that cannot compile
    it) gives no sums: a warning names the device, and that kind of layer is not tried again."""
    tiny = FAMILIES["llama"]
    torch.manual_seed(0)
    s = attend(from_model(tiny.model(tiny.config()).eval(), tok, name="llama"), TEXT).self_attn

    def fails(*args):
        raise RuntimeError("out of resource: shared memory")

    monkeypatch.setattr(fused_survey, "layer_sums", fails)
    monkeypatch.setattr(fused_survey, "_failed", {})
    with pytest.warns(UserWarning, match="could not run on cpu .*shared memory.*torch operations instead"):
        assert fused_survey.try_layer_sums(s, 0, 64, 0) is None
    assert list(fused_survey._failed.values()) == ["RuntimeError: out of resource: shared memory"]
    monkeypatch.setattr(fused_survey, "available", lambda device: True)  # as on a GPU
    monkeypatch.setattr(fused_survey, "interpreted", lambda: True)  # float32 allowed, as interpreted
    monkeypatch.setattr(fused_survey, "FUSED_MIN_TOKENS", 0)
    assert fused_survey.supported(s, 0, block=64) is None  # not tried again
    monkeypatch.setattr(fused_survey, "_failed", {})
    assert fused_survey.supported(s, 0, block=64) == 0  # (what it says without the failure)
