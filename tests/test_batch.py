"""Analyses over a batch of prompt pairs, each against an independent reference: a padded batch against every
prompt run alone by transformers' own model, patching against a hand-written torch pre-hook on a decoder layer,
direct attribution against the model's own m and the app's single-prompt readout, the generator against the
tokenizer."""

import json

import numpy as np
import pytest
import torch

from attention.models import (
    PromptPair,
    PromptPairs,
    attend,
    batch_attribution,
    batch_patching,
    contrast,
    direct_logit_attribution,
    ioi_pairs,
    last_logits,
    logit_differences,
    pad_batch,
    read_prompt_pairs,
    write_prompt_pairs,
)
from tests.numerics import assert_float32_close, float32_approx
from tests.tiny_models import build

TEXTS = ["the cat sat on the mat because the dog was", "a short one", "the dog", "one two three four five six"]
MIXED = PromptPairs((
    PromptPair("the cat sat on the mat because the dog was", "the dog sat on the mat because the cat was", " dog",
               " cat"),
    PromptPair("a bird and a fish", "a fish and a bird", " fish", " bird"),
    PromptPair("red green blue red green", "red green blue green red", " blue", " red"),
), "mixed lengths")


@pytest.fixture(scope="module")
def llama(tok):
    return build("llama", tok)


def alone(reference, loaded, text):
    """transformers' own model on one prompt, tokenized as attend() does: its logits at the last token (V,)."""
    ids = torch.tensor(attend(loaded, text).token_ids)[None]
    with torch.no_grad():
        return reference(input_ids=ids).logits[0, -1]


@pytest.mark.numeric
@pytest.mark.parametrize("family", ["llama", "gpt2"])  # rotary positions; learned positions (position ids matter)
@pytest.mark.parametrize("side", ["left", "right"])
def test_a_padded_batch_gives_each_prompt_what_it_gives_alone(family, side, tok):
    loaded, reference = build(family, tok)
    batch = pad_batch(loaded, TEXTS, side=side)
    assert len(set(batch.lengths)) > 2 and batch.side == side and not batch.aligned
    logits = last_logits(loaded, TEXTS, side=side)
    assert logits.shape == (len(TEXTS), reference.config.vocab_size)
    for text, row in zip(TEXTS, logits, strict=True):
        want = alone(reference, loaded, text)
        assert_float32_close(row.numpy(), want.numpy(), terms=64, err_msg=f"{family}, {side}: {text!r}")


@pytest.mark.numeric
def test_smollm2_batched_equals_one_by_one_on_either_side(smollm2):
    texts = ["When Mary and John went to the store, John gave a drink to", "The capital of France is",
             "One, two, three, four, five,", "Hello"]
    own = []
    for text in texts:
        ids = torch.tensor(smollm2.tokenizer(text)["input_ids"])[None]
        with torch.no_grad():
            own.append(smollm2.network(input_ids=ids, logits_to_keep=1).logits[0, -1].numpy())
    assert smollm2.tokenizer.padding_side == pad_batch(smollm2, texts).side == "right"  # the tokenizer's own
    for side in ("left", "right"):
        logits = last_logits(smollm2, texts, side=side).numpy()
        # a batch runs other kernels than one text: sums over the 1,536-wide MLP in other orders, 30 layers deep
        assert_float32_close(logits, np.stack(own), terms=1536 * 30, err_msg=side)
    assert int(np.argmax(logits[1])) == smollm2.tokenizer(" Paris", add_special_tokens=False)["input_ids"][0]


def test_the_ioi_generator_makes_single_token_names_and_abc_differs_at_s2_only(smollm2):
    tokenizer = smollm2.tokenizer
    pairs = ioi_pairs(tokenizer, 40, seed=3, names=("Mary", "John", "Bartholomew", "Alice", "Bob", "Emma"))
    assert pairs.skipped == ("Bartholomew",)  # three tokens after a space: skipped, never drawn
    assert pairs.rows == ioi_pairs(tokenizer, 40, seed=3, names=("Mary", "John", "Bartholomew", "Alice", "Bob",
                                                                 "Emma")).rows  # seeded
    one = lambda word: len(tokenizer(word, add_special_tokens=False)["input_ids"]) == 1  # noqa: E731
    for row in pairs:
        assert one(row.target) and one(row.foil) and row.target != row.foil
        assert "Bartholomew" not in row.clean + row.corrupted
        clean, corrupt = tokenizer(row.clean)["input_ids"], tokenizer(row.corrupted)["input_ids"]
        assert len(clean) == len(corrupt) == 14  # the template's length: every word one token
        differ = [i for i, (a, b) in enumerate(zip(clean, corrupt, strict=True)) if a != b]
        foil = tokenizer(row.foil, add_special_tokens=False)["input_ids"][0]
        assert differ == [9] and clean[9] == foil  # ABB -> ABC: only S2, the foil's second mention, changes
        assert clean.count(foil) == 2 and corrupt.count(foil) == 1
    assert {row.clean.split()[1] == row.target.strip() for row in pairs} == {True, False}  # ABBA and BABA
    swapped = ioi_pairs(tokenizer, 5, corruption="swap")
    assert all(r.corrupted.count(r.foil.strip()) == 1 and r.corrupted.count(r.target.strip()) == 2 for r in swapped)
    with pytest.raises(ValueError, match="corruption"):
        ioi_pairs(tokenizer, 5, corruption="shuffle")
    # one seed, the same clean prompts whatever the corruption: comparing corruptions compares like with like
    cleans = {c: [r.clean for r in ioi_pairs(tokenizer, 30, seed=4, corruption=c)] for c in ("abc", "xyz", "swap")}
    assert cleans["abc"] == cleans["xyz"] == cleans["swap"]
    xyz = ioi_pairs(tokenizer, 30, seed=4, corruption="xyz")
    assert all(not {r.target.strip(), r.foil.strip()} & set(r.corrupted.replace(",", " ").split()) for r in xyz)


def test_a_target_or_foil_of_several_tokens_is_refused_with_its_rows(smollm2):
    pairs = PromptPairs((
        PromptPair("The capital of France is", "The capital of Italy is", " Parisian city", " Rome"),
        PromptPair("The capital of France is", "The capital of Italy is", " Paris", " Rome"),
    ), "typed")
    with pytest.raises(ValueError, match=r"row 1's target ' Parisian city' \(\d tokens\)"):
        logit_differences(smollm2, pairs)


def test_pairs_read_back_from_jsonl_and_csv(tmp_path, tok):
    pairs = ioi_pairs(tok, 6, corruption="xyz")
    path = tmp_path / "ioi.jsonl"
    path.write_text(write_prompt_pairs(pairs))
    assert read_prompt_pairs(path).rows == pairs.rows
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    csv = "clean,corrupted,target,foil,note\n" + "".join(
        f'"{r["clean"]}","{r["corrupted"]}","{r["target"]}","{r["foil"]}",x\n' for r in rows)
    assert read_prompt_pairs("ioi.csv", csv.encode()).rows == pairs.rows
    with pytest.raises(ValueError, match="line 2: no foil"):
        read_prompt_pairs("bad.jsonl", b'{"clean": "a", "corrupted": "b", "target": " c", "foil": " d"}\n'
                                       b'{"clean": "a", "corrupted": "b", "target": " c"}\n')
    with pytest.raises(ValueError, match=".jsonl or .csv"):
        read_prompt_pairs("pairs.txt", b"")


BLOCKS = {"llama": ("model.layers", "model.norm"), "mistral": ("model.layers", "model.norm"),
          "gpt2": ("transformer.h", "transformer.ln_f")}


def hand_patched(reference, loaded, row: PromptPair, layer: int, position: int) -> float:
    """m of the corrupted prompt with the stream entering decoder layer `layer` (the final norm, for layer L) at
    `position` set to the clean prompt's, by a torch pre-hook on transformers' own module."""
    ids = lambda text: torch.tensor(attend(loaded, text).token_ids)[None]  # noqa: E731
    blocks, norm = (reference.get_submodule(path) for path in BLOCKS[reference.config.model_type])
    streams = []
    module = blocks[layer] if layer < len(blocks) else norm
    grab = module.register_forward_pre_hook(lambda m, args: streams.append(args[0].detach().clone()))
    with torch.no_grad():
        reference(input_ids=ids(row.clean))
    grab.remove()

    def patch(m, args):
        x = args[0].clone()
        x[0, position] = streams[0][0, position]
        return (x, *args[1:])

    handle = module.register_forward_pre_hook(patch)
    try:
        with torch.no_grad():
            logits = reference(input_ids=ids(row.corrupted)).logits[0, -1]
    finally:
        handle.remove()
    t, f = (loaded.tokenizer(w, add_special_tokens=False)["input_ids"][0] for w in (row.target, row.foil))
    return float(logits[t] - logits[f])


@pytest.mark.numeric
# a pass from a later block; the same with a 4-token window (its cache keeps 3 columns); hooks on every block
@pytest.mark.parametrize("family", ["llama", "mistral", "gpt2"])
def test_patching_equals_a_hand_written_pre_hook_on_the_decoder_layer(family, tok):
    loaded, reference = build(family, tok)
    pairs = ioi_pairs(tok, 5, seed=2)
    found = batch_patching(loaded, pairs)
    n = len(attend(loaded, pairs[0].clean).token_ids)
    assert found.recovery.shape == found.patched.shape == (5, 3, n) and found.positions == tuple(range(n))
    s2 = found.labels.index("S2")
    assert found.labels[1] == "when" and set(found.labels[2:5:2]) == {"IO/S1"}  # ABBA and BABA mixed
    for b, layer, position in [(0, 1, s2), (1, 0, n - 1), (2, 2, s2 + 1), (3, 1, n - 2)]:
        want = hand_patched(reference, loaded, pairs[b], layer, position)
        assert found.patched[b, layer, position] == float32_approx(want, terms=64, magnitude=max(1.0, abs(want)))
    before = found.patched[:, :, :s2]  # before S2 the prompts agree: exactly the corrupted m, not run
    np.testing.assert_array_equal(before, np.broadcast_to(found.corrupted[:, None, None], before.shape))
    assert_float32_close(found.patched[:, -1, -1], found.clean, terms=64, magnitude=1.0)  # the final stream: all of m
    counted = np.abs(found.clean - found.corrupted) >= 1e-3  # the others' recovery is NaN: no gap to restore
    assert np.isnan(found.recovery[~counted]).all() and (found.spread().n == counted.sum()).all()
    assert found.runs == 5 * 3 * (n - s2)  # one copy per prompt and row at every position from S2 on
    assert found.tokens == 5 * 3 * sum(n - p for p in range(s2, n))  # each ran its columns from p on
    blocks_run = 5 * (3 * 2 if family == "gpt2" else 2 + 1 + 0)  # each row's copy runs both blocks, or from its row
    assert found.block_tokens == blocks_run * sum(n - p for p in range(s2, n))


@pytest.mark.numeric
def test_patching_prompts_of_different_lengths_patches_their_last_tokens(llama):
    loaded, reference = llama
    found = batch_patching(loaded, MIXED)
    assert found.recovery.shape == (3, 3, 1) and found.positions == (-1,) and found.labels == ("last",)
    for b, row in enumerate(MIXED):
        n = len(attend(loaded, row.corrupted).token_ids)
        for layer in range(3):
            want = hand_patched(reference, loaded, row, layer, n - 1)
            assert found.patched[b, layer, 0] == float32_approx(want, terms=64, magnitude=max(1.0, abs(want)))
    with pytest.raises(ValueError, match="one length"):
        batch_patching(loaded, MIXED, positions="all")
    summary = found.spread()
    assert summary.mean.shape == (3, 1) and (summary.n <= 3).all()


@pytest.mark.numeric
def test_smollm2_patched_at_the_last_token_equals_a_hand_written_pre_hook(smollm2):
    pairs = ioi_pairs(smollm2.tokenizer, 2, seed=7)
    found = batch_patching(smollm2, pairs, positions="last")
    assert found.recovery.shape == (2, 31, 1)
    for b, layer in [(0, 22), (1, 18)]:
        want = hand_patched(smollm2.network, smollm2, pairs[b], layer, 13)  # 14 tokens: the last is 13
        assert found.patched[b, layer, 0] == float32_approx(want, terms=1536 * 30, magnitude=max(1.0, abs(want)))
    assert_float32_close(found.patched[:, -1, 0], found.clean, terms=576, magnitude=10.0)  # the final stream: m back


@pytest.mark.numeric
def test_direct_shares_add_up_to_the_models_own_m_and_match_the_single_prompt_readout(smollm2):
    pairs = ioi_pairs(smollm2.tokenizer, 3, seed=5)
    dla = batch_attribution(smollm2, pairs)
    assert dla.heads.shape == (3, 30, 9) and dla.mlps.shape == (3, 30) and dla.total.shape == (3,)
    parts = dla.heads.sum((1, 2)) + dla.mlps.sum(1) + dla.embeddings + dla.biases
    np.testing.assert_allclose(parts, dla.total, rtol=0, atol=1e-9)  # float64 sums of the same shares
    m = logit_differences(smollm2, pairs)
    assert_float32_close(dla.model, m.clean, terms=1536 * 30, magnitude=10.0)  # the model's own m, padded or not
    # the final norm frozen at each prompt's stream: the shares add up to the model's own m (float32 pass)
    assert_float32_close(dla.total, dla.model, terms=576 * 30, magnitude=50.0)
    one = attend(smollm2, pairs[1].clean)
    app = direct_logit_attribution(smollm2, one, contrast(one, smollm2.tokenizer, pairs[1].target, pairs[1].foil))
    assert_float32_close(dla.heads[1], app.heads, terms=576, magnitude=float(np.abs(app.heads).max()))
    assert_float32_close(dla.mlps[1], app.mlps, terms=1536, magnitude=float(np.abs(app.mlps).max()))
    assert str(dla.top_heads(1)[0][0]).startswith("L") and dla.spread("heads").mean.shape == (30, 9)


@pytest.mark.numeric
# LayerNorms and W_O with biases, an LM head with a bias; Granite's scaled writes and logits, GPT-BigCode's
# multi-query attention (both read from their module trees)
@pytest.mark.parametrize("family", ["gpt2", "phi", "granite", "gpt_bigcode"])
def test_direct_shares_with_biases_add_up_to_the_reference_models_m(family, tok):
    loaded, reference = build(family, tok)
    torch.manual_seed(1)
    with torch.no_grad():  # transformers starts biases at 0: give them values, the same in both copies
        for (name, ours), theirs in zip(loaded.network.named_parameters(), reference.parameters(), strict=True):
            if name.endswith("bias"):
                theirs.copy_(ours.copy_(torch.randn_like(ours) * 0.1))
    pairs = ioi_pairs(tok, 3, seed=1)
    dla = batch_attribution(loaded, pairs)
    for b, row in enumerate(pairs):
        own = alone(reference, loaded, row.clean)
        t, f = (tok(w, add_special_tokens=False)["input_ids"][0] for w in (row.target, row.foil))
        assert dla.total[b] == float32_approx(float(own[t] - own[f]), terms=64, magnitude=1.0)
    one = attend(loaded, pairs[2].clean)
    app = direct_logit_attribution(loaded, one, contrast(one, tok, pairs[2].target, pairs[2].foil))
    assert_float32_close(dla.heads[2], app.heads, terms=64, magnitude=1.0)
    has_biases = any(name.endswith("bias") for name, _ in loaded.network.named_parameters())  # not Granite
    assert dla.biases[2] == float32_approx(app.biases, terms=64, magnitude=1.0)
    assert abs(app.biases) > 1e-2 if has_biases else abs(app.biases) < 1e-6


def test_families_whose_heads_are_normalised_or_whose_head_scales_its_logits_are_refused(tok):
    loaded, _ = build("gemma2", tok)
    with pytest.raises(ValueError, match="normalises"):
        batch_attribution(loaded, ioi_pairs(tok, 2))
    loaded, _ = build("llama", tok)  # patching reads m from the final norm's output and two rows of the LM head
    scaled = loaded.network.get_output_embeddings().register_forward_hook(lambda module, args, out: out * 2)
    try:
        with pytest.raises(ValueError, match="not its final norm's output"):
            batch_patching(loaded, ioi_pairs(tok, 2))
    finally:
        scaled.remove()
