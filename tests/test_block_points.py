"""The hook points inside a block that TransformerLens names (issue 72): ln1/ln2 scale and normalized, hook_resid_mid,
mlp.hook_pre/pre_linear/post, attn.hook_rot_q/k, ln_final.hook_scale. Each is held to transformers' own model: the
norm module's own output, the MLP's own modules run by hand, transformers' own rotary function, and edits made on
the plain eager twin (the same random weights) by torch hooks of the test's own, never to this package's output."""

from __future__ import annotations

import importlib

import pytest
import torch
from transformers.activations import ACT2FN

from attention.models import HookPointError, hooks, run_with_cache, run_with_hooks
from tests.numerics import assert_float32_close
from tests.tiny_models import TEXT, build

LAYER = 1
# family -> (ln1, ln2, gate or up projection, up projection where gated, down projection, the norm's output from
# its normalized input and its module: the family's own formula, written out here)
FAMILIES = {
    "llama": ("input_layernorm", "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj",
              lambda n, m: m.weight * n),
    "qwen3": ("input_layernorm", "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj",
              lambda n, m: m.weight * n),
    "gemma3": ("input_layernorm", "pre_feedforward_layernorm", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj",
               lambda n, m: n * (1.0 + m.weight)),
    "gpt2": ("ln_1", "ln_2", "mlp.c_fc", None, "mlp.c_proj", lambda n, m: n * m.weight + m.bias),
    "phi3": ("input_layernorm", "post_attention_layernorm", "mlp.gate_up_proj", "mlp.gate_up_proj", "mlp.down_proj",
             lambda n, m: m.weight * n),
}


def _block(model, layer: int):
    base = model.base_model
    return (base.h if hasattr(base, "h") else base.layers)[layer]


def _seen(model, path: str, side: str) -> list:
    """A raw torch hook of the test's own on transformers' module: its input ("in") or output ("out")."""
    seen = []
    module = _block(model, LAYER).get_submodule(path)
    if side == "in":
        handle = module.register_forward_pre_hook(lambda mod, args: seen.append(args[0].detach().clone()))
    else:
        handle = module.register_forward_hook(lambda mod, args, out: seen.append(out.detach().clone()))
    return seen, handle


@pytest.mark.parametrize("name", list(FAMILIES))
def test_the_points_inside_a_block_are_transformers_own_tensors(tok, name):
    ln1, ln2, up, linear, down, affine = FAMILIES[name]
    ours, reference = build(name, tok)
    ids = torch.tensor(tok(TEXT)["input_ids"])[None]
    at = f"blocks.{LAYER}."
    watched = {key: _seen(reference, path, side) for key, path, side in
               (("ln1_in", ln1, "in"), ("ln1_out", ln1, "out"), ("ln2_in", ln2, "in"), ("ln2_out", ln2, "out"),
                ("up", up, "out"), ("down_in", down, "in"), ("down_out", down, "out"))}
    with torch.no_grad():
        reference(input_ids=ids)
    for _, handle in watched.values():
        handle.remove()
    got = {key: seen[0][0] for key, (seen, _) in watched.items()}  # batch 0
    _, cache = run_with_cache(ours, ids)
    D = ours.network.config.hidden_size
    for ln in ("ln1", "ln2"):
        norm = _block(reference, LAYER).get_submodule(FAMILIES[name][0 if ln == "ln1" else 1])
        normalized, scale = cache[f"{at}{ln}.hook_normalized"][0], cache[f"{at}{ln}.hook_scale"][0]
        assert scale.shape == (ids.shape[1], 1)
        x = got[f"{ln}_in"]
        centred = x - x.mean(-1, keepdim=True) if isinstance(norm, torch.nn.LayerNorm) else x
        assert_float32_close(normalized * scale, centred, terms=D)  # TransformerLens's: x = normalized * scale
        assert_float32_close(affine(normalized, norm).detach(), got[f"{ln}_out"], terms=D)  # the norm's own output
    # the stream between attention and the MLP: what the block's sum made, resid_pre + attn_out, bit for bit
    assert torch.equal(cache[f"{at}hook_resid_mid"][0], got["ln2_in"])
    assert torch.equal(cache[f"{at}hook_resid_mid"], cache[f"{at}hook_resid_pre"] + cache[f"{at}hook_attn_out"])
    pre, post = cache[f"{at}mlp.hook_pre"][0], cache[f"{at}mlp.hook_post"][0]
    config = reference.config.to_dict()
    act = ACT2FN[next(config[k] for k in ("hidden_activation", "hidden_act", "activation_function") if config.get(k))]
    if linear is None:
        assert torch.equal(pre, got["up"])
        assert_float32_close(post, act(pre), terms=1)
    else:
        gate, up_out = got["up"].chunk(2, dim=-1) if linear == up else (got["up"], None)
        if up_out is None:
            seen_up, handle = _seen(reference, linear, "out")
            with torch.no_grad():
                reference(input_ids=ids)
            handle.remove()
            up_out = seen_up[0][0]
        assert torch.equal(pre, gate) and torch.equal(cache[f"{at}mlp.hook_pre_linear"][0], up_out)
        assert_float32_close(post, act(pre) * up_out, terms=1)
    assert torch.equal(post, got["down_in"])
    assert cache["ln_final.hook_scale"].shape == (1, ids.shape[1], 1)


@pytest.mark.parametrize("name", ["llama", "gpt2", "phi3"])
def test_edits_inside_a_block_equal_the_same_edit_on_transformers_own_modules(tok, name):
    _, ln2, up, linear, down, _ = FAMILIES[name]
    ours, reference = build(name, tok)
    ids = torch.tensor(tok(TEXT)["input_ids"])[None]
    at, D = f"blocks.{LAYER}.", ours.network.config.hidden_size
    block = _block(reference, LAYER)

    def logits_with(path, pre=None, post=None):
        module = block.get_submodule(path)
        handle = module.register_forward_pre_hook(pre) if pre else module.register_forward_hook(post)
        with torch.no_grad():
            out = reference(input_ids=ids).logits
        handle.remove()
        return out

    # the MLP switched off after its activation: the down projection reads zeros
    expected = logits_with(down, pre=lambda mod, args: (torch.zeros_like(args[0]),))
    got = run_with_hooks(ours, ids, [(at + "mlp.hook_post", lambda t, hook: torch.zeros_like(t))])
    assert_float32_close(got, expected, terms=D)
    # the gate halved before its activation (for Phi-3, the first half of the fused projection's output)
    def halve_gate(mod, args, out):
        out = out.clone()
        out[..., :out.shape[-1] // 2 if linear == up else out.shape[-1]] *= 0.5
        return out
    expected = logits_with(up, post=halve_gate)
    got = run_with_hooks(ours, ids, [(at + "mlp.hook_pre", lambda t, hook: t * 0.5)])
    assert_float32_close(got, expected, terms=D)
    # the stream between attention and the MLP moved: the MLP's norm and the block's sum both see it
    shift = torch.linspace(-1, 1, D)

    def moved(mod, args):
        args[0].add_(shift)  # in place: the residual the block adds the MLP's output to is this tensor
    expected = logits_with(ln2, pre=moved)
    got = run_with_hooks(ours, ids, [(at + "hook_resid_mid", lambda t, hook: t + shift)])
    assert_float32_close(got, expected, terms=D)


def test_rotated_q_and_k_are_transformers_own_rotary_and_a_zeroed_q_gives_uniform_attention(tok):
    ours, reference = build("llama", tok)
    ids = torch.tensor(tok(TEXT)["input_ids"])[None]
    at, n = f"blocks.{LAYER}.attn.", ids.shape[1]
    modeling = importlib.import_module(type(reference).__module__)
    _, cache = run_with_cache(ours, ids)
    positions = torch.arange(n)[None]
    cos, sin = reference.model.rotary_emb(cache[f"blocks.{LAYER}.hook_resid_pre"], positions)
    q, k = cache[at + "hook_q"].transpose(1, 2), cache[at + "hook_k"].transpose(1, 2)  # [batch, heads, pos, d]
    rot_q, rot_k = modeling.apply_rotary_pos_emb(q, k, cos, sin)  # transformers' own function
    d = q.shape[-1]
    assert_float32_close(cache[at + "hook_rot_q"], rot_q.transpose(1, 2), terms=d)
    assert_float32_close(cache[at + "hook_rot_k"], rot_k.transpose(1, 2), terms=d)

    def zero_head0(t, hook):
        t[:, :, 0] = 0
    with hooks(ours, [(at + "hook_rot_q", zero_head0)]):
        _, edited = run_with_cache(ours, ids, [at + "hook_pattern"])
    causal = torch.tril(torch.ones(n, n)) / torch.arange(1, n + 1)[:, None]  # every score 0: uniform on the past
    assert_float32_close(edited[at + "hook_pattern"][0, 0], causal, terms=n)
    assert not torch.allclose(edited[at + "hook_pattern"][0, 1], causal)  # the other heads are their own


def test_norm_points_are_read_only_and_a_parallel_block_or_an_encoder_says_why(tok):
    ours, _ = build("llama", tok)
    ids = torch.tensor(tok(TEXT)["input_ids"])[None]
    with pytest.raises(HookPointError, match="read only here"):
        run_with_hooks(ours, ids, [("blocks.0.ln1.hook_scale", lambda t, hook: t * 2)])
    with pytest.raises(HookPointError, match="read only here"):
        run_with_hooks(ours, ids, [("ln_final.hook_scale", lambda t, hook: t.mul_(2))])
    run_with_hooks(ours, ids, [("blocks.0.ln2.hook_normalized", lambda t, hook: t)])  # reading is fine
    with pytest.raises(HookPointError, match="no gradient of its own"):
        run_with_hooks(ours, ids, bwd_hooks=[("blocks.0.ln1.hook_normalized", lambda g, hook: None)])
    phi, _ = build("phi", tok)
    with pytest.raises(HookPointError, match="side by side"):
        run_with_hooks(phi, torch.tensor(tok(TEXT)["input_ids"])[None], [("blocks.0.hook_resid_mid", print)])
    bert, _ = build("bert", tok)
    with pytest.raises(HookPointError, match="norms and its MLP's inside is not in"):
        run_with_hooks(bert, ids, [("blocks.0.ln1.hook_scale", print)])
    gpt2, _ = build("gpt2", tok)
    with pytest.raises(HookPointError, match="no rotary positions"):
        run_with_hooks(gpt2, ids, [("blocks.0.attn.hook_rot_q", print)])


def test_transformer_lens_short_names_hook_layer_and_ctx_and_what_keeps_no_gradient(tok):
    from attention.models import generate, get_act_name

    ours, _ = build("llama", tok)
    ids = torch.tensor(tok(TEXT)["input_ids"])[None]
    _, cache = run_with_cache(ours, ids)
    for short, full in ((("resid_mid", 1), "blocks.1.hook_resid_mid"),
                        (("scale", 1, "ln1"), "blocks.1.ln1.hook_scale"), ("pre1", "blocks.1.mlp.hook_pre"),
                        (("rot_q", 1), "blocks.1.attn.hook_rot_q"), (("result", 1), "blocks.1.attn.hook_result"),
                        (("attn_scores", 0), "blocks.0.attn.hook_attn_scores"),
                        ("normalized", "ln_final.hook_normalized"), (("attn", 1), "blocks.1.attn.hook_pattern")):
        assert cache[short] is cache[full], short
        assert get_act_name(*(short if isinstance(short, tuple) else (short,))) == full
    assert cache["z", -1] is cache["blocks.1.attn.hook_z"]  # the cache counts a negative layer from the end
    seen = []

    def read(t, hook):
        hook.ctx["seen"] = hook.ctx.get("seen", 0) + 1
        seen.append((hook.layer(), hook.layer == 1, hook.ctx["seen"]))
    run_with_hooks(ours, ids, [("blocks.1.hook_resid_mid", read)])
    assert seen == [(1, True, 1)]
    with pytest.raises(ValueError, match="none of the points kept.*has one"):
        run_with_cache(ours, ids, lambda n: n.endswith("hook_result"), incl_bwd=True)
    _, grads = run_with_cache(ours, ids, lambda n: n.endswith(("hook_result", "hook_z")), incl_bwd=True)
    with pytest.raises(KeyError, match="keeps no gradient"):
        grads["blocks.1.attn.hook_result_grad"]
    with hooks(ours, [("blocks.1.attn.hook_pattern", lambda p, hook: None)]):  # reading lets generate record
        generate(ours, "the river bank", max_new_tokens=2)
    with hooks(ours, [("blocks.1.attn.hook_pattern", lambda p, hook: p * 0.5)]):
        with pytest.raises(ValueError, match="a hook changed its scores, pattern"):
            generate(ours, "the river bank", max_new_tokens=2)
