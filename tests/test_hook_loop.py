"""A researcher's loop with hooks (issue 72): blocks that nest as TransformerLens's do, hooks left on until
reset, and gradients at every hook point. Every nesting runs under a timeout (it hung before: the model's lock was
taken twice by one thread); gradients are held to torch.autograd on transformers' own eager twin of the model
(the same random weights, no hooks of ours), never to an earlier output of this package."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from attention.models import (
    add_hook,
    generate,
    hooks,
    reset_hooks,
    run_with_cache,
    run_with_hooks,
    to_single_token,
    to_str_tokens,
    to_tokens,
)
from tests.numerics import assert_float32_close
from tests.tiny_models import TEXT, build

NEST_TIMEOUT_S = 60  # each nesting finishes in well under a second; a hang fails here instead of stalling the suite


@pytest.fixture(scope="module")
def llama(tok):
    """(ours, reference, ids): a tiny random Llama (grouped-query attention) and its plain eager twin."""
    ours, reference = build("llama", tok)
    return ours, reference, torch.tensor(tok(TEXT)["input_ids"])[None]


def finishes(fn, timeout: float = NEST_TIMEOUT_S):
    """fn() run in a thread; its result, or a failure that says it hung (a daemon thread: the suite goes on)."""
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as err:  # noqa: BLE001 - handed back to the test
            out["error"] = err

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"still running after {timeout} s: a nesting of hooks hung"
    if "error" in out:
        raise out["error"]
    return out.get("value")


def steer(t, hook):
    return t + 1.0  # every position pushed along one direction: changes what the model says


def test_every_call_nests_inside_a_hooks_block_and_runs_through_its_hooks(llama):
    m, _, ids = llama
    base = run_with_hooks(m, ids)
    steered_alone = run_with_hooks(m, ids, [("blocks.1.hook_resid_pre", steer)])
    assert not torch.equal(base, steered_alone)  # the steering does something

    def nested():
        with hooks(m, [("blocks.1.hook_resid_pre", steer)]):
            logits, cache = run_with_cache(m, ids, "blocks.1.hook_resid_pre")
            inner = run_with_hooks(m, ids)
            with hooks(m, [("hook_embed", lambda t, hook: None)]):  # a block inside a block
                deeper = run_with_hooks(m, ids)
            text = generate(m, TEXT, max_new_tokens=2)
        return logits, cache, inner, deeper, text
    logits, cache, inner, deeper, text = finishes(nested)
    for got in (logits, inner, deeper):
        assert torch.equal(got, steered_alone)
    assert text is not None
    after = run_with_hooks(m, ids)
    assert torch.equal(after, base)  # every block's hooks gone with it


def test_a_hooks_block_still_keeps_other_threads_out(llama):
    m, _, ids = llama
    entered, done = threading.Event(), threading.Event()

    def other():
        entered.set()
        run_with_hooks(m, ids)
        done.set()
    with hooks(m, [("blocks.0.hook_resid_pre", steer)]):
        thread = threading.Thread(target=other, daemon=True)
        thread.start()
        entered.wait(NEST_TIMEOUT_S)
        assert not done.wait(0.5)  # waits for the block: it would otherwise run through these hooks
    assert done.wait(NEST_TIMEOUT_S)


def test_hooks_left_on_until_reset_as_transformer_lens_does(llama):
    m, _, ids = llama
    base = run_with_hooks(m, ids)
    steered = run_with_hooks(m, ids, [("blocks.1.hook_resid_pre", steer)])
    with hooks(m, [("blocks.1.hook_resid_pre", steer)], reset_hooks_end=False):
        pass
    assert torch.equal(run_with_hooks(m, ids), steered)  # still on after the block
    add_hook(m, "blocks.0.hook_resid_pre", lambda t, hook: None, is_permanent=True)  # reads only
    assert reset_hooks(m) == 1  # the block's; the permanent one stays
    assert torch.equal(run_with_hooks(m, ids), base)
    add_hook(m, "blocks.1.hook_resid_pre", steer, is_permanent=True)
    assert torch.equal(run_with_hooks(m, ids), steered)
    assert reset_hooks(m, including_permanent=True) == 2
    assert torch.equal(run_with_hooks(m, ids), base)
    with pytest.raises(ValueError, match="'fwd' or 'bwd'"):
        add_hook(m, "hook_embed", steer, dir="both")


def reference_grads(reference, ids, metric=None):
    """torch.autograd on transformers' own model: d(scalar)/d(the embedding's output, each block's input, each
    block's W_O input), the embedding output made a leaf by hand and W_O's inputs kept by plain torch hooks."""
    embeds = reference.get_input_embeddings()(ids).detach().requires_grad_(True)
    z_in, inner = [], {"mid": [], "post": []}  # and the MLP norm's input, the down projection's input
    handles = [layer.self_attn.o_proj.register_forward_pre_hook(lambda mod, args: z_in.append(args[0]))
               for layer in reference.model.layers]
    handles += [module.register_forward_pre_hook(lambda mod, args, k=k: inner[k].append(args[0]))
                for layer in reference.model.layers
                for k, module in (("mid", layer.post_attention_layernorm), ("post", layer.mlp.down_proj))]
    try:
        out = reference(inputs_embeds=embeds, labels=None if metric else ids, output_hidden_states=True)
    finally:
        for handle in handles:
            handle.remove()
    scalar = metric(out.logits) if metric else out.loss
    blocks_in = out.hidden_states[1:len(reference.model.layers)]  # block l's input, l >= 1
    L = len(reference.model.layers)
    grads = torch.autograd.grad(scalar, [embeds, *blocks_in, *z_in, *inner["mid"], *inner["post"]])
    reference.inner_grads = {"hook_resid_mid": grads[2 * L:3 * L], "mlp.hook_post": grads[3 * L:]}
    return grads[0], grads[1:L], grads[L:2 * L], out.logits.detach()


@pytest.mark.parametrize("metric", [None, lambda logits: logits[0, -1, 7] - logits[0, -1, 11]],
                         ids=["next-token loss", "logit difference"])
def test_gradients_at_every_point_equal_torch_autograd_on_transformers_own_model(llama, metric):
    m, reference, ids = llama
    logits, cache = run_with_cache(m, ids, incl_bwd=True, metric=metric)
    embed, blocks_in, z_in, reference_logits = reference_grads(reference, ids, metric)
    d_model, n_heads = m.network.config.hidden_size, m.network.config.num_attention_heads
    assert not logits.requires_grad
    assert_float32_close(logits, reference_logits, terms=d_model, err_msg="logits")
    assert_float32_close(cache["hook_embed_grad"], embed, terms=d_model, err_msg="hook_embed")
    for layer, expected in enumerate(blocks_in, start=1):
        assert_float32_close(cache[f"blocks.{layer}.hook_resid_pre_grad"], expected, terms=d_model,
                             err_msg=f"layer {layer}")
    for layer, expected in enumerate(z_in):
        got = cache[f"blocks.{layer}.attn.hook_z_grad"]
        assert got.shape[2] == n_heads  # [batch, pos, head_index, d_head]
        assert_float32_close(got.flatten(-2), expected, terms=d_model)
    for point, expected in reference.inner_grads.items():  # inside the block (the MLP's norm, its down projection)
        for layer, grad in enumerate(expected):
            assert_float32_close(cache[f"blocks.{layer}.{point}_grad"], grad, terms=d_model, err_msg=point)
    assert all(p.grad is None for p in m.network.parameters())  # the weights got none
    assert cache["blocks.0.attn.hook_pattern_grad"].shape == cache["blocks.0.attn.hook_pattern"].shape


def test_a_backward_hook_sees_the_gradient_and_can_replace_it(llama):
    """Doubling the gradient at block 1's input doubles it at the embedding exactly (every path from the embedding
    to the logits passes block 1's input, and backpropagation is linear in the gradient)."""
    m, _, ids = llama
    _, cache = run_with_cache(m, ids, ["hook_embed", "blocks.1.hook_resid_pre"], incl_bwd=True)
    seen = {}

    def read(grad, hook):
        seen[hook.name] = grad.clone()

    def double(grad, hook):
        return grad * 2

    with pytest.warns(UserWarning, match="reset_hooks_end=False"):
        run_with_hooks(m, ids, bwd_hooks=[("hook_embed", read)])  # removed before any backward: said
    logits = run_with_hooks(m, ids, bwd_hooks=[("blocks.1.hook_resid_pre", double), ("hook_embed", read)],
                            reset_hooks_end=False)
    torch.nn.functional.cross_entropy(logits[0, :-1], ids[0, 1:]).backward()
    reset_hooks(m)
    assert torch.equal(seen["hook_embed"], 2 * cache["hook_embed_grad"])
    with hooks(m, bwd_hooks=[("blocks.1.hook_resid_pre", read)]):  # inside a block: forward, then backward
        logits = run_with_hooks(m, ids, grad=True)  # the block's bwd hooks are not the call's: it asks for a graph
        torch.nn.functional.cross_entropy(logits[0, :-1], ids[0, 1:]).backward()
    assert torch.equal(seen["blocks.1.hook_resid_pre"], cache["blocks.1.hook_resid_pre_grad"])


def test_a_metric_that_is_not_a_scalar_and_a_model_without_logits_say_so(llama, tok):
    m, _, ids = llama
    with pytest.raises(ValueError, match="one number"):
        run_with_cache(m, ids, "hook_embed", incl_bwd=True, metric=lambda logits: logits[0, -1])
    bert, _ = build("bert", tok)
    with pytest.raises(ValueError, match="pass metric=fn"):
        run_with_cache(bert, ids, "hook_embed", incl_bwd=True)
    _, cache = run_with_cache(bert, ids, "hook_embed", incl_bwd=True, metric=lambda hidden: hidden[0, 0, 0])
    assert cache["hook_embed_grad"].shape == cache["hook_embed"].shape


@pytest.mark.slow
def test_tokens_with_and_without_bos_as_transformer_lens_reads_them(smollm2, minilm):
    tok = smollm2.tokenizer
    plain = tok("When Mary and John")["input_ids"]  # SmolLM2's tokenizer adds no BOS
    assert to_tokens(smollm2, "When Mary and John").tolist() == [plain]
    assert to_tokens(smollm2, "When Mary and John", prepend_bos=True).tolist() == [[tok.bos_token_id, *plain]]
    assert to_tokens(smollm2, "When Mary and John", prepend_bos=False).tolist() == [plain]
    assert to_str_tokens(smollm2, "When Mary") == ["When", " Mary"]
    assert to_single_token(smollm2, " Mary") == tok(" Mary")["input_ids"][0]
    with pytest.raises(ValueError, match="not one"):
        to_single_token(smollm2, " Maryland's")
    batch = to_tokens(smollm2, ["When Mary", "When Mary and John went"])
    assert batch.shape == (2, len(tok("When Mary and John went")["input_ids"]))
    ids = to_tokens(minilm, "the bank")  # MiniLM's own [CLS] ... [SEP], kept by default
    assert to_str_tokens(minilm, ids) == ["[CLS]", "the", "bank", "[SEP]"]
    with pytest.raises(ValueError, match="no BOS token"):
        to_tokens(minilm, "the bank", prepend_bos=True)
    logits, _ = run_with_cache(smollm2, to_tokens(smollm2, "When Mary", prepend_bos=True), "hook_embed")
    assert logits.shape[1] == 3  # the ids go in as they are


LAYER, HEAD, QUERY, KEY = 1, 2, 5, 0  # a knockout: head L2H3's query 5 may not look at the first token


def hand_edited_eager(edit):
    """Llama's eager attention written out by hand, with `edit(weights_or_scores, stage)` between its steps."""
    from transformers.models.llama.modeling_llama import repeat_kv

    def eager(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
        k, v = repeat_kv(key, module.num_key_value_groups), repeat_kv(value, module.num_key_value_groups)
        scores = torch.matmul(query, k.transpose(2, 3)) * scaling
        if attention_mask is not None:
            scores = scores + attention_mask
        scores = edit(scores, "scores", module.layer_idx)
        weights = torch.nn.functional.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
        weights = edit(weights, "pattern", module.layer_idx)
        return torch.matmul(weights, v).transpose(1, 2).contiguous(), weights
    return eager


def test_a_knockout_in_hook_attn_scores_equals_editing_transformers_eager_attention_by_hand(llama, monkeypatch):
    from transformers.models.llama import modeling_llama

    m, reference, ids = llama

    def knock(scores, hook):
        scores[:, HEAD, QUERY, KEY] = float("-inf")

    def by_hand(t, stage, layer):
        if stage == "scores" and layer == LAYER:
            t = t.clone()
            t[:, HEAD, QUERY, KEY] = float("-inf")
        return t
    with monkeypatch.context() as patched, torch.no_grad():  # (our copy reads the same module's function)
        patched.setattr(modeling_llama, "eager_attention_forward", hand_edited_eager(by_hand))
        expected = reference(input_ids=ids).logits
    knocked = run_with_hooks(m, ids, [(f"blocks.{LAYER}.attn.hook_attn_scores", knock)])
    base = run_with_hooks(m, ids)
    assert not torch.equal(knocked, base)
    assert_float32_close(knocked, expected, terms=m.network.config.hidden_size)
    with hooks(m, [(f"blocks.{LAYER}.attn.hook_attn_scores", knock)]):
        _, cache = run_with_cache(m, ids, f"blocks.{LAYER}.attn.hook_pattern")
    assert cache["pattern", LAYER][0, HEAD, QUERY, KEY] == 0  # what the layer used is what the cache holds


def test_pattern_patching_equals_replacing_the_weights_in_eager_attention_by_hand(llama, monkeypatch):
    from transformers.models.llama import modeling_llama

    m, reference, ids = llama
    n = ids.shape[1]
    uniform = torch.tril(torch.ones(n, n)) / torch.arange(1, n + 1)[:, None]  # each query: every key it sees alike

    def patch(pattern, hook):
        out = pattern.clone()
        out[:, HEAD] = uniform
        return out

    def by_hand(t, stage, layer):
        if stage == "pattern" and layer == LAYER:
            t = t.clone()
            t[:, HEAD] = uniform
        return t
    with monkeypatch.context() as patched, torch.no_grad():
        patched.setattr(modeling_llama, "eager_attention_forward", hand_edited_eager(by_hand))
        expected = reference(input_ids=ids).logits
    got = run_with_hooks(m, ids, [(f"blocks.{LAYER}.attn.hook_pattern", patch)])
    assert not torch.equal(got, run_with_hooks(m, ids))
    assert_float32_close(got, expected, terms=m.network.config.hidden_size)


def test_an_edited_pattern_refuses_a_pass_that_would_show_other_weights(llama):
    from attention.models import attend

    m, _, ids = llama
    with hooks(m, [(f"blocks.{LAYER}.attn.hook_pattern", lambda p, hook: p * 1.0)]):
        with pytest.raises(ValueError, match="weights this layer did not use"):
            attend(m, TEXT)
    attend(m, TEXT)  # the block is gone: attend runs again


def test_a_transformer_lens_name_not_given_here_says_why_and_what_to_read(llama):
    m, _, ids = llama
    for name, why in (("blocks.0.hook_attn_in", "use_split_qkv_input"), ("blocks.1.hook_mlp_in", "hook_resid_mid"),
                      ("hook_pos_embed", "hook_embed")):
        with pytest.raises(ValueError, match=f"{name} is TransformerLens's, not a hook point here: .*{why}"):
            run_with_hooks(m, ids, [(name, lambda t, hook: None)])


def test_generate_samples_within_top_k_and_top_p_stops_at_a_stop_token_and_goes_past_the_pages_cap(llama, tok):
    from attention.models import MAX_NEW_TOKENS

    m, reference, _ = llama
    prompt = "the river bank"
    ids = torch.tensor(tok(prompt)["input_ids"])[None]
    with torch.no_grad():  # transformers' own greedy generation on the same weights: the reference
        theirs = reference.generate(ids, max_new_tokens=6, do_sample=False, pad_token_id=0)[0, ids.shape[1]:].tolist()
    greedy = [s.token_id for s in generate(m, prompt, max_new_tokens=6).steps]
    assert greedy == theirs
    for narrow in ({"top_k": 1}, {"top_p": 1e-6}):  # one token left: sampling is greedy
        assert [s.token_id for s in generate(m, prompt, max_new_tokens=6, greedy=False, seed=3, **narrow).steps] \
            == theirs
    with torch.no_grad():
        first = reference(input_ids=ids).logits[0, -1]
    top3 = set(torch.topk(first, 3).indices.tolist())
    drawn = {generate(m, prompt, max_new_tokens=1, greedy=False, top_k=3, seed=s).steps[0].token_id for s in range(12)}
    assert drawn <= top3 and len(drawn) > 1
    stopped = generate(m, prompt, max_new_tokens=6, stop=theirs[2])
    assert stopped.stopped == "stop token"
    assert [s.token_id for s in stopped.steps] == theirs[:theirs.index(theirs[2]) + 1]
    assert len(generate(m, prompt, max_new_tokens=MAX_NEW_TOKENS + 6).steps) == MAX_NEW_TOKENS + 6
    with pytest.raises(ValueError, match="Generate between 1 and"):
        generate(m, prompt, max_new_tokens=10**7)
    with pytest.raises(ValueError, match="top_p a share"):
        generate(m, prompt, greedy=False, top_p=1.5)


def test_attribution_patching_on_a_metric_of_ones_own_equals_the_estimate_made_by_hand(llama):
    """(0 - z) . d metric / d z for each head, z and its gradient taken from transformers' own model by plain hooks
    on W_O's input (reference_grads), against attribution_patching(..., metric=fn)."""
    from attention.models import attend, attribution_patching

    m, reference, ids = llama

    def metric(logits):
        return logits[0, -1, 7] - logits[0, -3, 9]
    effects = attribution_patching(m, attend(m, TEXT), metric=metric, metric_name="two logits")
    z_in = []
    handles = [layer.self_attn.o_proj.register_forward_pre_hook(lambda mod, args: z_in.append(args[0].detach()))
               for layer in reference.model.layers]
    with torch.no_grad():
        reference(input_ids=ids)
    for handle in handles:
        handle.remove()
    _, _, grads, logits = reference_grads(reference, ids, metric)
    H = m.network.config.num_attention_heads
    for layer, (z, grad) in enumerate(zip(z_in, grads, strict=True)):
        by_hand = (-z.double() * grad.double()).view(*z.shape[:2], H, -1).sum((0, 1, 3))
        np.testing.assert_allclose(effects.effect[layer], by_hand.numpy(), rtol=1e-5, atol=1e-7)
    assert effects.metric == "two logits" and effects.baseline == pytest.approx(float(metric(logits)), abs=1e-5)
    with pytest.raises(ValueError, match="a contrast .* or metric=fn"):
        attribution_patching(m, attend(m, TEXT))


def test_cache_tools_add_up_to_transformers_own_streams_outputs_and_logit_difference(llama):
    from attention.models import (
        accumulated_resid,
        decompose_resid,
        logit_attrs,
        logit_constant,
        stack_head_results,
    )

    m, reference, ids = llama
    _, cache = run_with_cache(m, ids)
    outs = []
    handles = [layer.self_attn.o_proj.register_forward_hook(lambda mod, args, out: outs.append(out))
               for layer in reference.model.layers]
    with torch.no_grad():
        theirs = reference(input_ids=ids, output_hidden_states=True)
    for handle in handles:
        handle.remove()
    L, H, D = len(reference.model.layers), m.network.config.num_attention_heads, m.network.config.hidden_size
    stack, labels = accumulated_resid(cache, return_labels=True)
    assert labels[0] == "0_pre" and labels[-1] == "final_post" and stack.shape[0] == L + 1
    for layer in range(L):  # transformers' hidden_states[l] is what block l receives (its last: after the norm)
        assert_float32_close(stack[layer], theirs.hidden_states[layer], terms=D)
        assert_float32_close(decompose_resid(cache, layer).sum(0), theirs.hidden_states[layer], terms=4 * D)
    heads, names = stack_head_results(m, cache, return_labels=True)
    assert names[:2] == ["L1H1", "L1H2"] and heads.shape[0] == L * H
    for layer in range(L):
        assert_float32_close(heads[layer * H:(layer + 1) * H].sum(0), outs[layer], terms=D)
    parts, labels = decompose_resid(cache, return_labels=True)
    assert labels[:3] == ["embed", "0_attn_out", "0_mlp_out"]
    shares = logit_attrs(m, cache, parts, 7, 11)  # token ids: the logit of 7 minus the logit of 11
    assert shares.shape == (2 * L + 1, 1)
    total = float(shares.sum() + logit_constant(m, cache, 7, 11)[0])
    expected = float(theirs.logits[0, -1, 7] - theirs.logits[0, -1, 11])
    assert total == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize("name", ["llama", "gpt2", "granite"])  # W_O as Linear, as GPT-2's Conv1D, scaled writes
def test_hook_result_adds_up_to_w_os_output_and_zeroing_a_heads_result_zeroes_its_slice_of_z(tok, name):
    from tests.tiny_models import EVERY

    ours, reference = build(name, tok)
    ids = torch.tensor(tok(TEXT)["input_ids"])[None]
    path = EVERY[name].w_o.format(layer=1)
    written = []
    handle = reference.get_submodule(path).register_forward_hook(lambda mod, args, out: written.append(out))
    with torch.no_grad():
        reference(input_ids=ids)
    handle.remove()
    _, cache = run_with_cache(ours, ids, ["blocks.1.attn.hook_result", "blocks.1.hook_attn_out"])
    result = cache["blocks.1.attn.hook_result"]  # [batch, pos, head_index, d_model]
    bias = getattr(reference.get_submodule(path), "bias", None)
    scale = float(getattr(reference.config, "residual_multiplier", 1.0))
    D = result.shape[-1]
    assert_float32_close(result.sum(2) / scale + (0 if bias is None else bias.detach()), written[0], terms=D)
    H = result.shape[2]
    d = ours.network.config.hidden_size // H

    def zero_head(r, hook):
        r[:, :, HEAD] = 0

    def zero_slice(module, args):
        z = args[0].clone()
        z[..., HEAD * d:(HEAD + 1) * d] = 0
        return (z, *args[1:])
    handle = reference.get_submodule(path).register_forward_pre_hook(zero_slice)
    with torch.no_grad():
        expected = reference(input_ids=ids).logits
    handle.remove()
    got = run_with_hooks(ours, ids, [("blocks.1.attn.hook_result", zero_head)])
    assert_float32_close(got, expected, terms=D)
    with pytest.raises(ValueError, match="put the backward hook on blocks.1.attn.hook_z"):
        run_with_hooks(ours, ids, bwd_hooks=[("blocks.1.attn.hook_result", zero_head)])
