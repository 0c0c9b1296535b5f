"""Hook points with TransformerLens's names (attention.models.forward.hook_points), each held to transformers
itself: its own hidden states, eager attentions and logits, and edits made here by plain torch hooks on a
reference model (the same weights, loaded or built apart with attn_implementation="eager").

Tiny random-weight models of every family with hook points (tests/tiny_models.py) run in milliseconds; SmolLM2
and MiniLM (marked slow, as every test loading them) check the bundled models against their own folders."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention.models import HeadName, HookCache, HookPointError, hook_names, hooks, run_with_cache, run_with_hooks
from attention.naming import head_name
from tests.numerics import assert_float32_close
from tests.tiny_models import EVERY, TEXT, build

# the families of the table and those read from their module trees (tests.tiny_models.OUTSIDE); these four refuse
HOOKED = [name for name in EVERY if name not in ("albert", "t5", "bart", "marian")]
FUSED = ("falcon", "bloom")  # q, k, v from a fused projection of a layout not known here
NO_WRITES = ("opt", "falcon", "bloom", "deberta_v2")  # no hook_attn_out, hook_mlp_out
POST_NORM = ("bert", "roberta", "electra", "distilbert")  # TL's HookedEncoder names


@pytest.fixture(scope="module")
def tiny(tok):
    """family -> (ours, reference, ids): each built once for the module."""
    built = {}

    def get(name):
        if name not in built:
            ours, reference = build(name, tok)
            built[name] = ours, reference, torch.tensor(tok(TEXT)["input_ids"])[None]
        return built[name]
    return get


def reference_pass(reference, ids, **kwargs):
    with torch.no_grad():
        return reference(input_ids=ids, output_hidden_states=True, output_attentions=True, **kwargs)


def logits_of(out) -> torch.Tensor:
    return out.logits if getattr(out, "logits", None) is not None else out.last_hidden_state


def close(actual, expected, *, terms: int, what: str = "", magnitude: float | None = None):
    assert tuple(actual.shape) == tuple(expected.shape), what
    assert_float32_close(actual.numpy(), expected.numpy(), terms=terms, magnitude=magnitude, err_msg=what)


def heads_of(network) -> tuple[int, int]:
    config = network.config
    return config.num_attention_heads, getattr(config, "num_key_value_heads", None) or config.num_attention_heads


def zero_z_slices(reference, w_o: str, layer: int, heads, d: int):
    """A plain torch pre-hook on the reference's W_O at `layer` that zeroes these heads' slices of its input."""
    def hook(module, args):
        z = args[0].clone()
        for h in heads:
            z[..., h * d:(h + 1) * d] = 0
        return (z, *args[1:])
    return reference.get_submodule(w_o.format(layer=layer)).register_forward_pre_hook(hook)


@pytest.mark.parametrize("name", HOOKED)
def test_cache_equals_transformers_own_hidden_states_attentions_and_logits(tiny, name):
    ours, reference, ids = tiny(name)
    logits, cache = run_with_cache(ours, ids)
    out = reference_pass(reference, ids)
    n, D, L = ids.shape[1], ours.network.config.hidden_size, len(out.attentions)
    H, H_kv = heads_of(ours.network)
    close(logits, logits_of(out), terms=D, what="logits")
    for layer in range(L):
        close(cache["resid_pre", layer], out.hidden_states[layer], terms=D, what=f"{name} resid_pre {layer}")
        close(cache["pattern", layer], out.attentions[layer], terms=n, what=f"{name} pattern {layer}")
        after = "normalized_resid_post" if name in POST_NORM else "resid_post"
        if layer < L - 1:  # transformers' last hidden state is after the final norm in decoders
            close(cache[after, layer], out.hidden_states[layer + 1], terms=D, what=f"{name} {after} {layer}")
        d = cache["z", layer].shape[-1]
        assert cache["z", layer].shape == (1, n, H, d) and cache["pattern", layer].shape == (1, H, n, n)
        if name not in FUSED:
            assert cache["q", layer].shape == (1, n, H, d)
            assert cache["k", layer].shape == cache["v", layer].shape == (1, n, H_kv, d)
    width = getattr(ours.network.config, "embedding_size", D)  # ELECTRA embeds in 16 and projects to 32
    if ours.spec.architecture == "decoder-only" and ours.anatomy.family.rotary is not None:
        scale = getattr(ours.network.config, "embedding_multiplier", 1.0)  # Granite scales them on the way in
        assert torch.equal(cache["embed"] * scale, cache["resid_pre", 0])  # nothing added (Gemma: scaled in embed)
    assert cache["embed"].shape == (1, n, width) and cache["resid_pre", -1] is cache[f"blocks.{L - 1}.hook_resid_pre"]


@pytest.mark.parametrize("name", [n for n in HOOKED if n not in NO_WRITES])
def test_what_attention_and_the_mlp_add_makes_the_next_stream(tiny, name):
    """Pre-norm blocks: resid_post = resid_pre + attn_out + mlp_out (Gemma 2/3 and OLMo-2 with their norms
    after each term). BERT-style blocks (TL's HookedEncoder): the block's last LayerNorm of resid_post is its
    output, and resid_post - mlp_out is what the attention sublayer returned (its own LayerNorm of the sum)."""
    ours, reference, ids = tiny(name)
    _, cache = run_with_cache(ours, ids, names_filter=lambda n: n.startswith("blocks."))
    out = reference_pass(reference, ids)
    for layer in range(len(out.attentions)):
        pre, attn, mlp, post = (cache[p, layer] for p in ("resid_pre", "attn_out", "mlp_out", "resid_post"))
        if name not in POST_NORM:
            close(post, pre + attn + mlp, terms=3, magnitude=max(float(t.abs().max()) for t in (pre, attn, mlp)),
                  what=f"{name} {layer}")
            continue
        block = reference.base_model.get_submodule(ours.anatomy.family.layers)[layer]
        last, first = ("output_layer_norm", "sa_layer_norm") if name == "distilbert" else (
            "output.LayerNorm", "attention.output.LayerNorm")
        with torch.no_grad():
            close(block.get_submodule(last)(post), cache["normalized_resid_post", layer], terms=64)
            close(post - mlp, block.get_submodule(first)(pre + attn), terms=64, what=f"{name} {layer}")


@pytest.mark.parametrize("name", [n for n in HOOKED if EVERY[n].w_o is not None])
def test_zeroing_a_head_in_hook_z_equals_zeroing_its_slice_of_w_o_input(tiny, name):
    ours, reference, ids = tiny(name)
    H, _ = heads_of(ours.network)
    layer, head = 0, 1

    def knock_out(z, hook):
        assert hook.name == hook == f"blocks.{layer}.attn.hook_z" and hook.layer == layer
        z[:, :, head] = 0  # in place: the view reaches the model

    edited = run_with_hooks(ours, ids, [(f"blocks.{layer}.attn.hook_z", knock_out)])
    d = ours.anatomy.output_weight(layer).shape[0] // H
    handle = zero_z_slices(reference, EVERY[name].w_o, layer, [head], d)
    try:
        expected = logits_of(reference_pass(reference, ids))
    finally:
        handle.remove()
    close(edited, expected, terms=ours.network.config.hidden_size)
    assert (edited - logits_of(reference_pass(reference, ids))).abs().max() > 1e-6  # the edit did something


@pytest.mark.parametrize("name", [n for n in HOOKED if n not in FUSED and EVERY[n].w_o is not None])
def test_zeroing_a_kv_head_in_hook_v_zeroes_its_query_heads_z(tiny, name):
    """v of KV head g is zero -> every query head reading it outputs z = pattern @ 0 = 0: the split of a
    fused projection (GPT-2, Phi-3, ModernBERT side by side; GPT-NeoX by head) must pick v's own part."""
    ours, reference, ids = tiny(name)
    H, H_kv = heads_of(ours.network)
    layer, g = 1, 0
    edited = run_with_hooks(ours, ids, [(f"blocks.{layer}.attn.hook_v",
                                         lambda v, hook: torch.where(torch.arange(H_kv)[:, None] == g, 0.0, v))])
    d = ours.anatomy.output_weight(layer).shape[0] // H
    group = H // H_kv
    handle = zero_z_slices(reference, EVERY[name].w_o, layer, range(g * group, (g + 1) * group), d)
    try:
        expected = logits_of(reference_pass(reference, ids))
    finally:
        handle.remove()
    close(edited, expected, terms=ours.network.config.hidden_size)


@pytest.mark.parametrize("name", ["gpt2", "bert", "distilbert"])
def test_pattern_is_softmax_of_hook_q_and_hook_k_without_rotary(tiny, name):
    """Families without rotary positions: softmax(q k^T / √d + mask) of the cached q and k is the pattern."""
    ours, _, ids = tiny(name)
    _, cache = run_with_cache(ours, ids, names_filter=lambda n: n.startswith("blocks.1.attn."))
    q, k = cache["q", 1][0].transpose(0, 1), cache["k", 1][0].transpose(0, 1)  # (H, n, d)
    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    if name == "gpt2":
        scores = scores.masked_fill(~torch.ones(ids.shape[1], ids.shape[1], dtype=torch.bool).tril(), -torch.inf)
    close(torch.softmax(scores, -1), cache["pattern", 1][0], terms=q.shape[-1])


@pytest.mark.parametrize("name", ["gpt2", "llama", "qwen2", "bert"])
def test_editing_resid_pre_at_one_position_equals_editing_transformers_block_input(tiny, name):
    ours, reference, ids = tiny(name)
    torch.manual_seed(1)
    nudge = torch.randn(ours.network.config.hidden_size)

    def add(x, hook):
        x = x.clone()
        x[:, 3] += nudge
        return x

    edited = run_with_hooks(ours, ids, [("blocks.1.hook_resid_pre", add)])
    block = reference.base_model.get_submodule(ours.anatomy.family.layers)[1]

    def by_hand(module, args, kwargs):
        x = (args[0] if args else kwargs["hidden_states"]).clone()
        x[:, 3] += nudge
        return ((x, *args[1:]), kwargs) if args else (args, {**kwargs, "hidden_states": x})

    handle = block.register_forward_pre_hook(by_hand, with_kwargs=True)
    try:
        expected = logits_of(reference_pass(reference, ids))
    finally:
        handle.remove()
    close(edited, expected, terms=ours.network.config.hidden_size)


@pytest.mark.parametrize("name", ["gpt2", "llama", "gemma2", "modernbert"])
def test_ln_final_is_what_transformers_final_norm_outputs(tiny, name):
    ours, reference, ids = tiny(name)
    _, cache = run_with_cache(ours, ids, names_filter="ln_final.hook_normalized")
    seen = {}
    norm = reference.base_model.get_submodule(ours.anatomy.family.final_norm)
    handle = norm.register_forward_hook(lambda module, args, out: seen.__setitem__("x", out))
    try:
        out = reference_pass(reference, ids)
    finally:
        handle.remove()
    close(cache["normalized"], seen["x"], terms=64)
    close(cache["normalized"], out.hidden_states[-1], terms=64)  # transformers' last hidden state, after the norm
    assert list(cache) == ["ln_final.hook_normalized"]


def hooks_on(network) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in network.modules())


@pytest.mark.numeric
@pytest.mark.parametrize("name", ["gpt2", "llama", "bert"])  # learned positions, rotary, an encoder
def test_a_list_of_texts_of_different_lengths_is_padded_and_each_gives_what_it_gives_alone(tiny, tok, name):
    ours, reference, _ = tiny(name)
    texts = [TEXT, "the river bank", "a dog"]
    logits, cache = run_with_cache(ours, texts, names_filter=lambda n: n.endswith(("hook_resid_pre", "hook_z")))
    D = ours.network.config.hidden_size
    for b, text in enumerate(texts):
        ids = torch.tensor(tok(text)["input_ids"])[None]
        out = reference_pass(reference, ids)
        n = ids.shape[1]
        close(logits[b, :n], logits_of(out)[0], terms=D, what=f"{name} logits of {text!r}")
        close(cache["resid_pre", 1][b, :n], out.hidden_states[1][0], terms=D, what=f"{name} resid_pre of {text!r}")
    assert cache["z", 0].shape[:2] == (3, len(tok(TEXT)["input_ids"]))
    knocked = run_with_hooks(ours, texts, [("blocks.0.attn.hook_z", lambda z, hook: z.zero_())])
    assert knocked.shape == logits.shape and not torch.allclose(knocked, logits)


def test_hooks_are_removed_after_a_fn_raises_and_the_model_is_as_before(tiny):
    ours, reference, ids = tiny("llama")
    before = hooks_on(ours.network)

    def broken(x, hook):
        raise RuntimeError("a researcher's bug")

    with pytest.raises(RuntimeError, match="a researcher's bug"):
        run_with_hooks(ours, ids, [("blocks.1.hook_resid_pre", broken), ("blocks.0.attn.hook_z", lambda z, h: None)])
    assert hooks_on(ours.network) == before
    with pytest.raises(RuntimeError), hooks(ours, [(lambda n: n.endswith("hook_mlp_out"), broken)]) as hooked:
        assert hooked == ["blocks.0.hook_mlp_out", "blocks.1.hook_mlp_out"] and hooks_on(ours.network) == before + 2
        ours.network(input_ids=ids)
    assert hooks_on(ours.network) == before
    with torch.no_grad():  # no hook left behind, and the lock was given back (run_with_hooks takes it again)
        close(run_with_hooks(ours, ids, []), logits_of(reference_pass(reference, ids)), terms=32)


def test_names_filter_keeps_only_what_it_names(tiny):
    ours, _, ids = tiny("gpt2")
    names = hook_names(ours)
    per_block = 18  # 11 before issue 72's points inside the block (GPT-2: no hook_pre_linear, no rotary)
    assert names[0] == "hook_embed" and names[-2:] == ["ln_final.hook_scale", "ln_final.hook_normalized"]
    assert len(names) == 3 + 2 * per_block
    _, cache = run_with_cache(ours, ids, names_filter=["blocks.1.attn.hook_z", "hook_embed"])
    assert isinstance(cache, HookCache) and list(cache) == ["hook_embed", "blocks.1.attn.hook_z"]
    _, cache = run_with_cache(ours, ids, names_filter=lambda n: n.endswith("hook_pattern"))
    assert list(cache) == ["blocks.0.attn.hook_pattern", "blocks.1.attn.hook_pattern"]
    with pytest.raises(KeyError, match="was not kept"):
        cache["z", 0]


def test_a_clear_error_for_a_name_or_point_that_is_not_there(tiny, tok):
    ours, _, ids = tiny("gpt2")
    before = hooks_on(ours.network)
    with pytest.raises(HookPointError, match="did you mean blocks.0.hook_resid_pre"):
        run_with_cache(ours, ids, names_filter=["blocks.0.hook_resid_pr"])
    with pytest.raises(HookPointError, match="l from 0 to 1"):
        run_with_hooks(ours, ids, [("blocks.7.hook_resid_pre", lambda x, h: None)])
    _, cache = run_with_cache(ours, ids, names_filter="blocks.0.hook_resid_pre")
    with pytest.raises(KeyError, match="'resid_mdi', 0.*names no hook point.*did you mean blocks.0.hook_resid_mid"):
        cache["resid_mdi", 0]  # a misspelt short name is not "not kept"
    with pytest.raises(KeyError, match="was not kept"):  # TransformerLens's get_act_name rules, as its cache's
        cache["resid_mid", 0]
    with pytest.raises(KeyError, match="'blocks.0.hook_z' names no hook point.*blocks.0.attn.hook_z"):
        cache["blocks.0.hook_z"]
    with pytest.raises(KeyError, match="was not kept.*names_filter"):
        cache["z", 0]
    bert, _, _ = tiny("bert")
    with pytest.raises(HookPointError, match="bert has no final norm"):
        run_with_cache(bert, ids, names_filter="ln_final.hook_normalized")
    falcon, _, _ = tiny("falcon")
    with pytest.raises(HookPointError, match="falcon: its q, k and v come from one fused projection"):
        run_with_cache(falcon, ids, names_filter="blocks.0.attn.hook_q")
    for name, why in (("albert", "one block for every layer"), ("t5", "encoder-decoder")):
        with pytest.raises(HookPointError, match=why):
            run_with_cache(build(name, tok)[0], ids)
    assert hooks_on(ours.network) == before


def test_hook_pattern_is_editable_inside_the_kernel_and_read_only_where_a_family_has_its_own(tiny):
    """Editable where the family runs transformers' attention function (tests/test_hook_loop.py holds an edit to
    one made by hand); GPT-J computes attention in its own code: its pattern reads, an edit says why."""
    ours, _, ids = tiny("qwen2")
    before = hooks_on(ours.network)
    base = run_with_hooks(ours, ids)
    assert not torch.equal(run_with_hooks(ours, ids, [("blocks.0.attn.hook_pattern", lambda p, h: p.flip(-1))]), base)
    with pytest.raises(HookPointError, match=r"returned shape \(1, 17, 4, 8\), not the point's \(1, 17, 2, 8\)"):
        run_with_hooks(ours, ids, [("blocks.0.attn.hook_k", lambda k, h: k.repeat(1, 1, 2, 1))])
    with pytest.raises(HookPointError, match=r"returned shape \(1, 4, 17\), not \(1, 4, 17, 17\)"):
        run_with_hooks(ours, ids, [("blocks.0.attn.hook_pattern", lambda p, h: p[..., 0])])
    assert hooks_on(ours.network) == before
    gptj, _, _ = tiny("gptj")
    for fn in (lambda p, h: p * 0, lambda p, h: p.zero_()):  # a replacement, or an edit in place
        with pytest.raises(HookPointError, match="read only on this family"):
            run_with_hooks(gptj, ids, [("blocks.0.attn.hook_pattern", fn)])
    with pytest.raises(HookPointError, match="gptj: its attention is its own code"):
        run_with_hooks(gptj, ids, [("blocks.0.attn.hook_attn_scores", lambda s, h: None)])


def test_head_name_meets_the_pages_name():
    assert HeadName.parse("L24H4") == (23, 3) and str(HeadName(23, 3)) == "L24H4" == head_name(23, 3)
    assert HeadName.parse(" l19 h7 ").words == "layer 19, head 7" and f"{HeadName(0, 0)}" == "L1H1"
    layer, head = HeadName.parse("L2H3")
    assert (layer, head) == (1, 2) and np.arange(12).reshape(3, 4)[HeadName(layer, head)] == 6
    for bad in ("L0H1", "H4L24", "L24", "layer 24 head 4"):
        with pytest.raises(ValueError, match="count|head's name"):
            HeadName.parse(bad)


@pytest.mark.slow
def test_smollm2_hooks_equal_its_own_eager_twin(smollm2):
    from transformers import AutoModelForCausalLM

    eager = AutoModelForCausalLM.from_pretrained(smollm2.folder, attn_implementation="eager").eval()
    text = "When Mary and John went to the store, John gave a drink to"
    logits, cache = run_with_cache(smollm2, text, names_filter=lambda n: n.endswith(
        ("hook_resid_pre", "hook_pattern", "ln_final.hook_normalized")))
    ids = torch.tensor(smollm2.tokenizer(text)["input_ids"])[None]
    out = reference_pass(eager, ids)
    close(logits, out.logits, terms=576)
    for layer in range(30):
        close(cache["resid_pre", layer], out.hidden_states[layer], terms=576, what=f"resid_pre {layer}")
        close(cache["pattern", layer], out.attentions[layer], terms=ids.shape[1], what=f"pattern {layer}")
    close(cache["normalized"], out.hidden_states[30], terms=576)
    layer, head = HeadName.parse("L24H4")  # the top name-mover head (NOTES)
    edited = run_with_hooks(smollm2, text, [(f"blocks.{layer}.attn.hook_z", lambda z, h: z.index_fill(2, torch.tensor(
        [head]), 0.0))])
    handle = zero_z_slices(eager, "model.layers.{layer}.self_attn.o_proj", layer, [head], 64)
    try:
        expected = reference_pass(eager, ids).logits
    finally:
        handle.remove()
    close(edited, expected, terms=576)


@pytest.mark.slow
def test_minilm_hooks_equal_its_own_eager_twin(minilm):
    from transformers import AutoModel

    eager = AutoModel.from_pretrained(minilm.folder, attn_implementation="eager").eval()
    text = "I sat on the river bank."
    hidden, cache = run_with_cache(minilm, text)
    ids = torch.tensor(minilm.tokenizer(text)["input_ids"])[None]
    out = reference_pass(eager, ids)
    close(hidden, out.last_hidden_state, terms=384)
    for layer in range(6):
        close(cache["resid_pre", layer], out.hidden_states[layer], terms=384)
        close(cache["normalized_resid_post", layer], out.hidden_states[layer + 1], terms=384)
        close(cache["pattern", layer], out.attentions[layer], terms=ids.shape[1])
    q, k = cache["q", 2][0].transpose(0, 1), cache["k", 2][0].transpose(0, 1)
    close(torch.softmax(q @ k.transpose(-1, -2) / 32 ** 0.5, -1), cache["pattern", 2][0], terms=32)
    edited = run_with_hooks(minilm, text, [("blocks.2.attn.hook_z",
                                            lambda z, h: z.index_fill(2, torch.tensor([5]), 0.0))])
    handle = zero_z_slices(eager, "encoder.layer.{layer}.attention.output.dense", 2, [5], 32)
    try:
        expected = reference_pass(eager, ids).last_hidden_state
    finally:
        handle.remove()
    close(edited, expected, terms=384)
