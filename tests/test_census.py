"""The head census (issue 73): each paper's score held to an implementation written here from the paper or from
TransformerLens's documented formula, on transformers' own eager attentions and weights (a tiny random Llama and its
plain twin), and each score on heads made a known kind by hand (a pattern replaced in a hooks block). TransformerLens
itself is compared on SmolLM2's weights by benchmarks/transformer_lens.py (docs/heads.md), where it is installed."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
import torch

from attention.models import census_report, detect_head, head_census, hooks, metrics_table
from attention.models.analyses import census_scores as scores
from attention.models.analyses.census_probes import repeated_tokens
from attention.models.analyses.weight_views import weights
from tests.numerics import assert_float32_close
from tests.tiny_models import build


@pytest.fixture(scope="module")
def llama(tok):
    ours, reference = build("llama", tok)
    return ours, reference


def own_attentions(reference, ids: torch.Tensor) -> torch.Tensor:
    """(L, batch, H, n, n): transformers' own eager weights."""
    with torch.no_grad():
        return torch.stack(reference(input_ids=ids, output_attentions=True).attentions)


def by_hand_detection(ids: list[int], kind: str) -> torch.Tensor:
    """The three detection patterns from their definitions (TL's docs), not from its code."""
    n = len(ids)
    det = torch.zeros(n, n)
    for i, j in itertools.product(range(n), range(n)):
        if kind == "previous_token_head":
            det[i, j] = float(j == i - 1)
        elif kind == "duplicate_token_head":
            det[i, j] = float(j < i and ids[j] == ids[i])
        else:  # induction: key j follows an earlier copy of the query's token
            det[i, j] = float(1 <= j <= i and j - 1 < i and ids[j - 1] == ids[i] and j - 1 != i)
    return det


def by_hand_score(p: torch.Tensor, det: torch.Tensor, exclude_bos: bool, exclude_current: bool, measure: str):
    p = p.double().clone()
    if measure == "mul":
        if exclude_bos:
            p[:, 0] = 0
        if exclude_current:
            p.fill_diagonal_(0)
        return float((p * det).sum() / p.sum())
    diff = (p - det).abs()
    if exclude_bos:
        diff[:, 0] = 0
    if exclude_current:
        diff.fill_diagonal_(0)
    return 1 - round(float(diff.sum() / len(diff)), 3)


def test_detect_head_is_transformer_lens_formula_on_transformers_own_attentions(llama):
    ours, reference = llama
    ids, _ = repeated_tokens(ours, 6, 1, seed=3)  # [CLS] + 6 random tokens twice
    own = own_attentions(reference, ids)[:, 0]  # (L, H, n, n)
    for kind, bos, current, measure in itertools.product(
            ("previous_token_head", "duplicate_token_head", "induction_head"), (False, True), (False, True),
            ("mul", "abs")):
        got = detect_head(ours, ids, kind, exclude_bos=bos, exclude_current_token=current, error_measure=measure)
        det = by_hand_detection(ids[0].tolist(), kind)
        expected = np.array([[by_hand_score(own[layer, head], det, bos, current, measure)
                              for head in range(own.shape[1])] for layer in range(own.shape[0])])
        atol = 2e-3 if measure == "abs" else 1e-6  # "abs" is rounded to 3 decimals: a float32 gap may move it one
        np.testing.assert_allclose(got, expected, atol=atol, err_msg=f"{kind} {bos} {current} {measure}")
    one = detect_head(ours, ids, "induction_head", heads=[(1, 2)])
    assert (one == -1).sum() == one.size - 1 and one[1, 2] != -1
    with pytest.raises(ValueError, match="lower triangular"):
        detect_head(ours, ids, torch.ones(ids.shape[1], ids.shape[1]))


def test_prefix_matching_and_the_first_tokens_share_on_transformers_own_attentions(llama, tok):
    ours, reference = llama
    repeat, batch = 8, 3
    ids, first = repeated_tokens(ours, repeat, batch, seed=0)
    own = own_attentions(reference, ids)  # (L, B, H, n, n)
    q = np.arange(first + repeat, first + 2 * repeat)
    expected = own[..., q, q - repeat + 1].mean(-1).mean(1).numpy()  # per query, then per row
    assert_float32_close(scores.prefix_matching(ours, repeat=repeat, batch=batch, seed=0), expected, terms=repeat)
    from attention.models.analyses.census_probes import sink_sequences

    sequences = sink_sequences(ours, 3, 12)  # [CLS] ... [SEP], 12 tokens each
    assert sequences.shape == (3, 12) and (sequences[:, 0] == tok.cls_token_id).all()
    alpha, entropy = scores.first_token_share(ours, sequences)
    rows = [own_attentions(reference, row[None])[:, 0] for row in sequences]  # (L, H, n, n) each
    assert_float32_close(alpha, np.mean([r[..., 0].mean(-1).numpy() for r in rows], axis=0), terms=12)
    h = [-(r * r.clamp_min(1e-30).log()).sum(-1).mean(-1).numpy() for r in rows]
    uniform = np.log(np.arange(1, 13)).mean()  # a causal model: row i sees i + 1 keys
    assert_float32_close(entropy, np.mean(h, axis=0) / uniform, terms=12, magnitude=np.log(12) / uniform)


def test_heads_made_a_kind_by_hand_score_1_and_a_uniform_head_what_the_formula_says(llama):
    ours, _ = llama
    repeat = 8
    ids, first = repeated_tokens(ours, repeat, 1, seed=0)
    n = ids.shape[1]

    def made(p, hook):  # layer 1: head 0 previous-token, head 1 uniform, head 2 induction, head 3 on the first token
        m = p.shape[-1]  # the probe's length, or a text's
        prev = torch.zeros(m, m)
        prev[0, 0], prev[torch.arange(1, m), torch.arange(m - 1)] = 1, 1
        induction = torch.zeros(m, m)
        induction[:, 0] = 1
        if m == n:  # the repeated-token probe: the second repeat on the token after the earlier occurrence
            q = torch.arange(first + repeat, n)
            induction[q, 0], induction[q, q - repeat + 1] = 0, 1
        first_token = torch.zeros(m, m)
        first_token[:, 0] = 1
        uniform_m = torch.tril(torch.ones(m, m)) / torch.arange(1, m + 1)[:, None]
        for head, pattern in enumerate((prev, uniform_m, induction, first_token)):
            p[:, head] = pattern
    with hooks(ours, [("blocks.1.attn.hook_pattern", made)]):
        previous = detect_head(ours, ids, "previous_token_head", exclude_bos=True)
        induction = scores.prefix_matching(ours, repeat=repeat, batch=1, seed=0)
        alpha, _ = scores.first_token_share(ours, ids)
    assert previous[1, 0] == 1.0 and induction[1, 2] == 1.0 and alpha[1, 3] == 1.0
    i = torch.arange(n, dtype=torch.float64)
    kept = (i / (i + 1)).sum()  # the uniform head's weight off the first column
    assert previous[1, 1] == pytest.approx(float((1 / (i[2:] + 1)).sum() / kept), abs=1e-6)
    assert induction[1, 1] == pytest.approx(float((1 / (i[first + repeat:] + 1)).mean()), abs=1e-6)


def test_ov_scores_equal_the_ov_circuit_multiplied_out_by_hand_on_transformers_weights(llama, tok):
    ours, reference = llama
    names = {w: tok(" " + w, add_special_tokens=False)["input_ids"][0] for w in ("Mary", "John", "Tom", "Anna")}
    ids = torch.tensor(list(names.values()))
    config, model = reference.config, reference.model
    H, KV, D = config.num_attention_heads, config.num_key_value_heads, config.hidden_size
    d = D // H
    with torch.no_grad():
        e = model.embed_tokens(ids)  # each name alone, block 0's attention left out: e + MLP0(ln2(e))
        ee = e + model.layers[0].mlp(model.layers[0].post_attention_layernorm(e))
        expected_copy, expected_negative = np.zeros((len(model.layers), H)), np.zeros((len(model.layers), H))
        for layer, block in enumerate(model.layers):
            w_v = block.self_attn.v_proj.weight.T.reshape(D, KV, d)  # (D, KV, d)
            w_o = block.self_attn.o_proj.weight.T.reshape(H, d, D)
            for head in range(H):
                out = ee @ w_v[:, head // (H // KV)] @ w_o[head]
                for sign, table in ((1, expected_copy), (-1, expected_negative)):
                    logits = model.norm(sign * out) @ reference.lm_head.weight.T
                    table[layer, head] = (logits.topk(5).indices == ids[:, None]).any(-1).float().mean()
    copy, negative = scores.name_copy(ours, weights(ours), names)
    np.testing.assert_array_equal(copy, expected_copy)
    np.testing.assert_array_equal(negative, expected_negative)


def test_copying_is_the_full_ov_circuits_eigenvalue_share_multiplied_out_by_hand(llama):
    import dataclasses

    ours, reference = llama
    model, config = reference.model, reference.config
    D, H, KV = config.hidden_size, config.num_attention_heads, config.num_key_value_heads
    d, V = D // H, 300  # the circuit on the vocabulary's first 300 tokens: small enough to multiply out (V x V)
    w = weights(ours)
    got = scores.copying(dataclasses.replace(w, W_U=w.W_U[:, :V]), model.embed_tokens.weight.detach()[:V])
    w_e, w_u = model.embed_tokens.weight.detach()[:V].double(), reference.lm_head.weight.detach()[:V].T.double()
    for layer, head in ((0, 0), (1, 3)):
        attn = model.layers[layer].self_attn
        w_v = attn.v_proj.weight.detach().T.reshape(D, KV, d)[:, head // (H // KV)].double()
        w_o = attn.o_proj.weight.detach().T.reshape(H, d, D)[head].double()
        values = torch.linalg.eigvals(w_e @ w_v @ w_o @ w_u)  # (V, V) multiplied out: V - d of them zero
        assert got[layer, head] == pytest.approx(float(values.real.sum() / values.abs().sum()), abs=1e-6)


def test_retrieval_is_wu_et_als_rule_on_transformers_own_attentions_while_smollm2_answers(smollm2):
    """Wu et al.'s retrieval_calculate written here from the paper, on transformers' own eager weights of the rows
    that chose each answer token (the prompt and the answer in one pass: the same queries over the same keys)."""
    from transformers import AutoModelForCausalLM

    from attention.models.analyses.census_probes import NEEDLE, needle_prompts
    from attention.models.analyses.predictions import generate
    from attention.models.forward.bundled import smollm2_dir

    probe = needle_prompts(smollm2, lengths=(250,), depths=(0.5,))[0]
    got, answer = scores.retrieval_probe(smollm2, probe)
    tok = smollm2.tokenizer
    gen = generate(smollm2, probe.prompt, max_new_tokens=50, stop=tok("\n", add_special_tokens=False)["input_ids"])
    assert NEEDLE[:-1].lower().split()[-3:] == answer[:-1].lower().split()[-3:]  # "on a sunny day": it answered
    eager = AutoModelForCausalLM.from_pretrained(smollm2_dir(lambda m: None), attn_implementation="eager").eval()
    with torch.no_grad():
        own = torch.stack(eager(input_ids=torch.tensor(gen.ids[:-1])[None], output_attentions=True).attentions)[:, 0]
    ids, n = gen.ids.tolist(), len(gen.prompt_ids)
    needle = tok(NEEDLE, add_special_tokens=False)["input_ids"]
    start = next(i for i in range(n) if ids[i:i + 3] == needle[1:4]) - 1  # " The best thing": the needle's start
    expected = np.zeros(own.shape[:2])
    for t in range(len(gen.steps)):  # the query at n - 1 + t chose the token at n + t
        top = own[:, :, n - 1 + t].argmax(-1)
        for layer, head in itertools.product(*map(range, expected.shape)):
            j = int(top[layer, head])
            if start <= j < start + len(needle) and ids[j] == ids[n + t]:
                expected[layer, head] += 1 / len(needle)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    assert got.max() > 0.1  # some head copies the needle out


def test_the_census_names_every_kind_with_its_paper_and_says_what_it_cannot_score(llama, tok):
    from attention.models import CENSUS_METRICS

    ours, _ = llama
    census = head_census(ours)
    assert set(census.scores) | set(census.missing) == {m.key for m in CENSUS_METRICS}
    assert all(s.shape == (2, 4) for s in census.scores.values())
    assert "answered none of the 9 needle prompts" in census.missing["retrieval"]  # a random model cannot
    assert 0 <= census.sink_rate <= 1 and census.top("sink", 1)[0][2] == census.scores["sink"].max()
    layer, head, _ = census.top("sink", 1)[0]
    assert ("sink" in census.kinds(layer, head)) == (census.scores["sink"][layer, head] > 0.3)
    bert, _ = build("bert", tok)
    assert "no unembedding" in head_census(bert).missing["name_copy"]
    assert all(len(re.findall(r"(?<!\\)\|", row)) == 8 for row in metrics_table())  # 7 cells: <|im_start|> escaped


def test_the_page_maps_every_head_boxes_those_above_the_threshold_and_says_what_it_cannot_score():
    from tests.test_pages import canvas, open_page

    at = open_page("pages/head_census.py")  # MiniLM, the pages' default: an encoder, no unembedding
    shown = canvas(at, "census.map")
    L, H = shown.values.shape
    passed = int((shown.values > 0.4).sum())  # prefix matching, threshold 0.4
    assert shown.title.startswith(f"prefix matching: {passed} of {L * H} heads above 0.4") and \
        len(shown.lines) == 4 * passed + 4  # and the open head's box, L1H1 until another is opened
    assert {line["colour"] for line in shown.lines[-4:]} == {"#111111"} and shown.lines[-4]["x0"] == -0.38
    assert canvas(at, "census.probe_pattern").values.shape == (101, 101)  # the open head on the probe's row
    assert len(at.dataframe[0].value) == L * H  # every head in the sortable table
    assert any("no unembedding" in c.value for c in at.caption)  # the OV scores: said why not
    at.segmented_control(key="census.metric").set_value("sink").run()
    shown = canvas(at, "census.map")
    assert shown.title.startswith("sink:") and "Gu et al" in " ".join(c.value for c in at.caption)
    assert not at.exception


def test_the_census_benchmark_writes_its_lines_and_report():
    """benchmarks/census.py, as make bench runs it, on MiniLM: the timing row and docs/heads.md's text."""
    from benchmarks import census as census_bench

    result = census_bench.measure(("minilm",), rounds=1)
    row = next(line for line in census_bench.lines(result) if line.startswith("| minilm |"))
    assert row.count("|") == 6 and " x | " in row
    report = census_bench.heads_md(result)
    assert "### minilm: 6 layers × 12 heads" in report and "| prefix_matching |" in report
    assert "not scored: name_copy" in report  # an encoder: said why


def test_gpt2_small_by_its_hub_id_names_the_papers_heads_beside_our_scores(tok):
    """The plumbing only, stated so: GPT-2 small cannot be loaded offline, so a random GPT-2 of its shape (12 x 12
    heads, a tiny width) under its hub id. The papers' heads (5.1, 5.5, 6.9; 9.6, 9.9, 10.0; 10.7, from 0) each
    come with this census's score for its kind; the same model under another name names none. Its 1,024-token
    context holds the 250- and 500-token needle prompts, not the 1,000-token ones."""
    import transformers as tf

    from attention.models import from_model
    from attention.models.analyses.census_probes import needle_prompts

    torch.manual_seed(0)
    config = tf.GPT2Config(n_layer=12, n_head=12, n_embd=48, vocab_size=len(tok), n_positions=1024)
    network = tf.GPT2LMHeadModel(config).eval()
    small = from_model(network, tok, name="gpt2")
    assert {p.haystack_tokens >= 1000 for p in needle_prompts(small)} == {False}
    census = head_census(small)
    named = {(p.kind, p.layer, p.head): p for p in census.published}
    assert set(named) == {("induction", 5, 1), ("induction", 5, 5), ("induction", 6, 9), ("name mover", 9, 6),
                          ("name mover", 9, 9), ("name mover", 10, 0), ("copy suppression", 10, 7)}
    for (_, layer, head), p in named.items():
        if p.key in census.scores:  # prefix matching, Olsson et al.'s score for induction heads
            assert p.score == census.scores[p.key][layer, head] and p.passed == (p.score > 0.4)
        else:  # GPT-2 fuses q, k and v in one projection: its OV circuits are not split here (said why)
            assert p.score is None and not p.passed and "fused" in census.missing[p.key]
    report = "\n".join(census_report(census))
    assert "| induction | Olsson et al. 2022; Elhage et al. 2021 | 5.1 (L6H2) | prefix_matching " in report
    assert "| name mover | Wang et al. 2022 (IOI) | 9.6 (L10H7) | name_copy: not scored | no |" in report
    assert head_census(from_model(tf.GPT2LMHeadModel(config).eval(), tok, name="my-gpt2")).published == ()
