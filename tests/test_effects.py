"""Predictions and head effects, against the models themselves.

- Ablation: a copy of the model whose output-projection columns for one head are zeroed (no hooks).
- Attribution patching: autograd through deltas added by the test's own hooks, and a finite difference
  made by scaling a head's W_O columns.
- Generation: the model loaded again with plain eager attention, one full pass over the final text, and
  transformers' own generate().
Tiny random-weight llama models (grouped-query attention, rotary positions) run in float64 where a
gradient is compared; SmolLM2 runs the examples the page shows (marked slow).
"""

import copy

import numpy as np
import pytest
import torch
import transformers as tf

from attention.models import attend
from attention.models.analyses.head_effects import (
    agreement,
    attribution_patching,
    head_ablation,
    head_ablation_cosine,
    rank_correlation,
)
from attention.models.analyses.predictions import generate, next_tokens
from attention.models.analyses.target_foil import choose_token, contrast
from attention.models.forward.capture import CAPTURE
from attention.models.forward.model import LoadedModel
from attention.models.forward.registry import ModelSpec

MARY = "When Mary and John went to the store, John gave a drink to"


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from attention.models.forward.bundled import minilm_dir

    return AutoTokenizer.from_pretrained(minilm_dir())


def tiny_lm(tokenizer, dtype=torch.float64, max_tokens: int = 64, seed: int = 0):
    """A 2-layer llama causal LM routed through our capture, and its plain-eager twin (the reference)."""
    torch.manual_seed(seed)
    def make():
        return tf.LlamaConfig(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, hidden_size=32,
                              intermediate_size=64, vocab_size=tokenizer.vocab_size)
    cfg = make()
    cfg._attn_implementation = "eager"
    reference = tf.LlamaForCausalLM(cfg).eval().to(dtype)
    cfg2 = make()
    cfg2._attn_implementation = CAPTURE
    ours = tf.LlamaForCausalLM(cfg2).eval().to(dtype)
    ours.load_state_dict(reference.state_dict())
    loaded = LoadedModel(spec=ModelSpec("tiny", "tiny", "decoder-only", max_tokens), network=ours,
                         tokenizer=tokenizer)
    return loaded, reference


def scan(loaded, text: str, target: str, foil: str, *, estimate: bool = False, **kwargs):
    """The page's path: read the text once, make the contrast once, then scan (or estimate)."""
    att = attend(loaded, text)
    pair = contrast(att, loaded.tokenizer, target, foil)
    return (attribution_patching if estimate else head_ablation)(loaded, att, pair, **kwargs)


def metric_of(network, ids, t: int, f: int) -> float:
    with torch.no_grad():
        logits = network(input_ids=ids).logits[0, -1]
    return float(logits[t] - logits[f])


def head_columns(network, layer: int, head: int, d: int) -> torch.Tensor:
    """A view of W_O's columns that read head `head` of `layer` (o_proj: (D, H * d), x @ W^T)."""
    return network.model.layers[layer].self_attn.o_proj.weight[:, head * d:(head + 1) * d]


@pytest.mark.parametrize("method", ["zero", "mean"])
def test_tiny_ablation_scan_equals_weight_edits_and_full_passes(tokenizer, method, monkeypatch):
    loaded, reference = tiny_lm(tokenizer)
    text, target, foil = "the cat sat on the mat because it", " tired", " happy"
    effects = scan(loaded, text, target, foil, ablation=method)
    t, f = choose_token(tokenizer, target).token_id, choose_token(tokenizer, foil).token_id
    ids = torch.tensor(attend(loaded, text).token_ids)[None]
    # The baseline is the contrast's, read from the capture pass (the fused SDPA kernel): in float64 it differs
    # from the eager reference by ~2e-9. Effects subtract that same baseline on both sides below.
    assert effects.baseline == pytest.approx(metric_of(reference, ids, t, f), abs=1e-8)
    if method == "zero":  # the reference removes the head by zeroing its columns of W_O: no hooks involved
        for layer in range(2):
            for head in range(4):
                edited = copy.deepcopy(reference)
                with torch.no_grad():
                    head_columns(edited, layer, head, 8).zero_()
                expected = metric_of(edited, ids, t, f) - effects.baseline
                # the scan's ablated pass runs the fused kernel too: its float64 gap to eager (~2e-9, by CPU:
                # 1.6e-9 on an AMD EPYC) stays in the effect, held to the baseline's allowance
                assert effects.effect[layer, head] == pytest.approx(expected, abs=1e-8)
    # Starting at the ablated layer from the clean residual stream gives what running every layer gives.
    monkeypatch.setattr("attention.models.analyses.edits.restart_of", lambda parts: None)
    full = scan(loaded, text, target, foil, ablation=method)
    np.testing.assert_allclose(effects.effect, full.effect, atol=1e-9)


def test_attribution_patching_gradient_equals_autograd_and_a_finite_difference(tokenizer):
    loaded, reference = tiny_lm(tokenizer, seed=1)
    text, target, foil = "the dog chased the ball into the", " garden", " house"
    got = scan(loaded, text, target, foil, estimate=True)
    t, f = choose_token(tokenizer, target).token_id, choose_token(tokenizer, foil).token_id
    ids = torch.tensor(attend(loaded, text).token_ids)[None]
    # Reference gradient: deltas (zeros) added to each layer's z by the test's own hooks, autograd w.r.t. them.
    deltas = [torch.zeros(1, ids.shape[1], 32, dtype=torch.float64, requires_grad=True) for _ in range(2)]
    z_clean = {}

    def adder(layer):
        def hook(module, args):
            z_clean[layer] = args[0].detach()
            return (args[0] + deltas[layer],)
        return hook

    handles = [reference.model.layers[i].self_attn.o_proj.register_forward_pre_hook(adder(i)) for i in range(2)]
    logits = reference(input_ids=ids).logits[0, -1]
    grads = torch.autograd.grad(logits[t] - logits[f], deltas)
    for h in handles:
        h.remove()
    for layer in range(2):
        expected = (-z_clean[layer] * grads[layer])[0].reshape(ids.shape[1], 4, 8).sum((0, 2)).numpy()
        np.testing.assert_allclose(got.effect[layer], expected, atol=1e-10)
    # Finite difference: shrinking a head's W_O columns by eps is removing eps of its output. eps is not
    # tiny: transformers computes rotary cos/sin in float32 even in a float64 model, so below ~1e-4 roundoff
    # swamps the difference; at 1e-3 the second-order term is ~3e-4 of it.
    eps, (layer, head) = 1e-3, (1, 2)
    base = metric_of(reference, ids, t, f)
    with torch.no_grad():
        head_columns(reference, layer, head, 8).mul_(1 - eps)
    assert (metric_of(reference, ids, t, f) - base) / eps == pytest.approx(got.effect[layer, head], rel=2e-3)


def test_generation_rows_with_the_kv_cache_equal_one_full_eager_pass(tokenizer):
    loaded, reference = tiny_lm(tokenizer, dtype=torch.float32, seed=2)
    gen = generate(loaded, "the cat sat on the mat", max_new_tokens=6)
    assert len(gen.steps) == 6 and gen.stopped == "length"
    with torch.no_grad():
        attentions = reference(input_ids=torch.tensor(gen.ids)[None], output_attentions=True).attentions
    for step in gen.steps:
        p = step.position
        expected = np.stack([a[0, :, p, :p + 1].numpy() for a in attentions])  # (L, H, p + 1)
        np.testing.assert_allclose(step.rows, expected, atol=1e-5)
        np.testing.assert_allclose(step.rows.sum(-1), 1.0, atol=1e-5)
    again = generate(loaded, "the cat sat on the mat", max_new_tokens=6, greedy=False, temperature=1.5, seed=7)
    assert [s.token_id for s in again.steps] == [s.token_id for s in generate(
        loaded, "the cat sat on the mat", max_new_tokens=6, greedy=False, temperature=1.5, seed=7).steps]


def test_next_tokens_are_the_softmax_of_the_logits_at_a_temperature(tokenizer):
    logits = np.random.default_rng(0).normal(size=tokenizer.vocab_size) * 3
    for temperature in (0.5, 1.0, 2.0):
        got = next_tokens(logits, tokenizer, k=5, temperature=temperature)
        p = torch.softmax(torch.tensor(logits) / temperature, -1).numpy()
        top = np.argsort(-p)[:5]
        assert got.token_ids.tolist() == top.tolist()
        np.testing.assert_allclose(got.probabilities, p[top], rtol=1e-9)
        assert got.rest == pytest.approx(1 - p[top].sum())


def test_rank_correlation_and_the_agreement_of_two_scans(tokenizer):
    a = np.arange(12.0).reshape(3, 4)
    assert rank_correlation(a, a * 5 + 1) == pytest.approx(1.0)
    assert rank_correlation(a, -a) == pytest.approx(-1.0)
    loaded, _ = tiny_lm(tokenizer, dtype=torch.float32, seed=3)
    text = "the dog chased the ball into the"
    exact, estimate = scan(loaded, text, " garden", " house"), scan(loaded, text, " garden", " house", estimate=True)
    assert exact.baseline == estimate.baseline  # one contrast, one baseline
    ranks = [np.argsort(np.argsort(e.effect.ravel())) for e in (estimate, exact)]
    assert agreement(estimate, exact).spearman == pytest.approx(np.corrcoef(*ranks)[0, 1])
    with pytest.raises(ValueError, match="nothing to compare"):
        agreement(estimate, scan(loaded, text, " house", " garden"))


def test_bad_input_gives_messages(tokenizer, minilm, monkeypatch):
    loaded, _ = tiny_lm(tokenizer, dtype=torch.float32, max_tokens=24)
    with pytest.raises(ValueError, match="empty"):
        generate(loaded, "   ")
    with pytest.raises(ValueError, match="same token"):
        scan(loaded, "the cat sat", " dog", " dog")
    with pytest.raises(ValueError, match="target token: it is empty"):
        scan(loaded, "the cat sat", "", " dog", estimate=True)
    with pytest.raises(ValueError, match="up to 8 tokens"):
        monkeypatch.setattr("attention.models.analyses.edits.EFFECT_MAX_TOKENS", 8)
        scan(loaded, "the cat sat on the mat and the dog sat on the rug", " dog", " cat")
    word = choose_token(tokenizer, "unbelievably")  # several WordPiece tokens: the first is used
    assert word.pieces > 1 and word.token_id == tokenizer("unbelievably", add_special_tokens=False)["input_ids"][0]
    long = generate(loaded, "word " * 40, max_new_tokens=8)  # 40 words cut to leave room for 8 new tokens
    assert long.truncated and len(long.prompt_ids) == 24 - 8
    with pytest.raises(ValueError, match="encoder"):
        generate(minilm, "I sat on the river bank")
    with pytest.raises(ValueError, match="encoder"):
        scan(minilm, "I sat on the river bank", " water", " money")


@pytest.mark.slow
def test_smollm2_mary_john_scan_equals_copies_with_a_head_zeroed(smollm2):
    effects = scan(smollm2, MARY, " Mary", " John")
    assert effects.effect.shape == (30, 9) and effects.baseline == pytest.approx(6.1, abs=0.2)
    t, f = effects.contrast.target.token_id, effects.contrast.foil.token_id
    ids = torch.tensor(attend(smollm2, MARY).token_ids)[None]
    edited = copy.deepcopy(smollm2.network)
    strongest = effects.ranked(2)
    for layer, head in [(0, 0), (14, 5), (29, 8)] + [(i, h) for i, h, _ in strongest]:
        columns = head_columns(edited, layer, head, 64)
        saved = columns.clone()
        with torch.no_grad():
            columns.zero_()
            expected = metric_of(edited, ids, t, f) - effects.baseline
            columns.copy_(saved)
        assert effects.effect[layer, head] == pytest.approx(expected, abs=1e-4), (layer, head)


@pytest.mark.slow
def test_smollm2_generation_is_transformers_greedy_and_its_rows_are_one_pass(smollm2):
    from transformers import AutoModelForCausalLM

    from attention.models.forward.bundled import smollm2_dir

    gen = generate(smollm2, "The capital of France is", max_new_tokens=8)
    assert gen.steps[0].token == " Paris" and gen.steps[0].probability == pytest.approx(0.77, abs=0.03)
    eager = AutoModelForCausalLM.from_pretrained(smollm2_dir(lambda m: None), attn_implementation="eager").eval()
    prompt = torch.tensor(gen.prompt_ids)[None]
    with torch.no_grad():
        expected_ids = eager.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=8,
                                      do_sample=False)[0, prompt.shape[1]:]
        attentions = eager(input_ids=torch.tensor(gen.ids)[None], output_attentions=True).attentions
    assert [s.token_id for s in gen.steps] == expected_ids.tolist()
    for step in gen.steps:
        expected = np.stack([a[0, :, step.position, :step.position + 1].numpy() for a in attentions])
        np.testing.assert_allclose(step.rows, expected, atol=1e-5)


@pytest.mark.slow
def test_minilm_vector_scan_equals_a_copy_with_a_head_zeroed(minilm):
    att = attend(minilm, "I sat on the river bank")
    effects = head_ablation_cosine(minilm, att, "bank")
    assert effects.effect.shape == (6, 12) and (effects.effect >= -1e-6).all()
    ids = torch.tensor(att.token_ids)[None]
    edited = copy.deepcopy(minilm.network)
    layer, head = [(i, h) for i, h, _ in effects.ranked(1)][0]
    projection = edited.encoder.layer[layer].attention.output.dense  # BERT's W_O, written out by hand
    with torch.no_grad():
        projection.weight[:, head * 32:(head + 1) * 32].zero_()
        moved = edited(input_ids=ids).last_hidden_state[0, effects.token]
        clean = minilm.network(input_ids=ids).last_hidden_state[0, effects.token]
    expected = 1 - float(torch.nn.functional.cosine_similarity(moved, clean, dim=0))
    assert effects.effect[layer, head] == pytest.approx(expected, abs=1e-5)


class HandClock:
    """A monotonic clock the test moves by hand (ModelLock(clock=...)): no test here measures wall time. Moving it
    wakes the lock's waiters, which read it again."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def move_to(self, lock, seconds: float) -> None:
        self.now = seconds
        with lock._turn:
            lock._turn.notify_all()


def _in_thread(work, *, session=None):
    """`work()` in a thread of its own (as `session`, the REQUESTER, when given); returns (thread, done event)."""
    import contextvars
    import threading

    from attention.models.forward.model import REQUESTER

    done = threading.Event()

    def run():
        if session is not None:
            REQUESTER.set(session)
        work()
        done.set()
    thread = threading.Thread(target=contextvars.copy_context().run, args=(run,), daemon=True)
    thread.start()
    return thread, done


def _until(condition, seconds: float = 10.0) -> None:
    """Wait for `condition()` (a thread reaching a state), failing after `seconds` instead of hanging."""
    import time

    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the lock's waiter never got there"
        time.sleep(0.001)


def test_a_short_request_goes_before_the_next_batch_of_long_work():
    """A scan releases the model between batches; a sentence waiting then must get it before the scan's next
    batch, however fast the scan asks again (with a plain lock the scan could win every time)."""
    from attention.models.forward.model import ModelLock

    clock = HandClock()
    lock, order = ModelLock(clock=clock), []
    lock.acquire(short=False)  # a batch in flight

    def short_request():
        with lock:
            order.append("short")

    def next_batch():
        with lock.background():
            order.append("batch")

    first, _ = _in_thread(short_request)
    _until(lambda: lock._short_waiting)  # the short request is queued
    second, _ = _in_thread(next_batch)
    _until(lambda: lock._long_since)  # so is the next batch
    lock.release()  # the batch ends
    first.join(10)
    clock.move_to(lock, 1.5)  # the short request's page has drawn (its grace is over)
    second.join(10)
    assert order == ["short", "batch"]


def test_a_pass_between_two_batches_of_a_scan_sees_the_model_unedited(tokenizer):
    """A scan's edits are hooks on the shared model: they may be up only while its batch holds the lock. A
    sentence that goes while the scan's next batch waits (ModelLock lets it go first) must run the model as
    it is: with the hooks installed before the lock it ran with the batch's head removed (a 16-token grid
    during a scan failed with an IndexError in the app)."""
    import threading

    from attention.models.analyses.edits import edit_setup, head_slices, hooked_z, scan

    loaded, reference = tiny_lm(tokenizer, dtype=torch.float32)
    att = attend(loaded, MARY)
    setup = edit_setup(loaded, att)
    ids = torch.as_tensor(att.token_ids)[None]
    with torch.inference_mode():
        clean = reference(input_ids=ids).logits
    sites = [(layer, head) for layer in range(2) for head in range(4)]
    errors = []

    def run_scan():
        try:
            scan(loaded, setup, sites, lambda part: hooked_z(loaded, head_slices(part, None)),
                 lambda out: out.logits[:, -1, 0], None)
        except Exception as err:  # noqa: BLE001 - reported by the test below
            errors.append(err)

    loaded.lock.acquire()  # a short request holds the model
    scanning = threading.Thread(target=run_scan)
    scanning.start()
    _until(lambda: loaded.lock._long_since)  # the scan's first batch is now waiting for the lock
    try:
        with torch.inference_mode():
            during = loaded.network(input_ids=ids).logits
    finally:
        loaded.lock.release()
    scanning.join(30)
    assert not errors and not scanning.is_alive()
    torch.testing.assert_close(during, clean, rtol=1e-5, atol=1e-5)


def test_long_work_leaves_the_cores_to_a_page_that_just_ran_a_short_request():
    """After another thread's short request, a batch of long work waits `grace` seconds (that page draws its
    figures meanwhile); after its own thread's short request (a scan's setup pass) it does not wait."""
    from attention.models.forward.model import ModelLock

    clock = HandClock()
    lock = ModelLock(grace=0.4, clock=clock)

    def sentence():
        with lock:
            pass

    other, _ = _in_thread(sentence, session="another page")  # (thread ids are reused: each names its session)
    other.join(10)
    batch, got = _in_thread(lambda: lock.background().__enter__(), session="the scan")
    _until(lambda: lock._long_since)
    clock.move_to(lock, 0.39)
    assert not got.wait(0.2)  # within the other page's grace: still waiting
    clock.move_to(lock, 0.41)
    assert got.wait(10)  # the grace is over: it goes
    lock.release()
    mine, done = _in_thread(lambda: (sentence(), lock.background().__enter__()), session="the scan")  # its own first
    assert done.wait(10)  # no grace for itself: the clock did not move
    lock.release()


def test_the_grace_is_for_other_users_not_for_the_scans_own_session():
    """A short request from another thread of the same session (REQUESTER: the app's Jobs run in threads of
    their own) gives that session's scan no grace; one from another session does."""
    from attention.models.forward.model import ModelLock

    clock = HandClock()
    lock = ModelLock(grace=0.4, clock=clock)

    def sentence():
        with lock:
            pass

    def batch():
        with lock.background():
            pass

    _in_thread(sentence, session="session a")[0].join(10)
    assert _in_thread(batch, session="session a")[1].wait(10)  # the clock never moved: it did not wait
    _in_thread(sentence, session="session b")[0].join(10)
    _, done = _in_thread(batch, session="session a")
    assert not done.wait(0.2)  # session b's page draws first
    clock.move_to(lock, 0.5)
    assert done.wait(10)


def test_long_work_gets_the_model_under_a_steady_stream_of_other_users_short_requests():
    """Short requests go first, but long work that has waited `patience` goes next: other users' sentences
    arriving without a pause (a class; a corpus survey, whose texts are short requests) left a scan's batch
    waiting until they stopped (the soak: a scan of 410 s beside a survey)."""
    import threading

    from attention.models.forward.model import ModelLock

    clock = HandClock()
    lock, order = ModelLock(grace=0.4, patience=0.6, clock=clock), []
    hold, release = threading.Event(), threading.Event()

    def pass_of(name):
        def run():
            with lock:
                order.append(name)
                if name == "pass 1":
                    hold.set()
                    release.wait(10)
        return run

    _in_thread(pass_of("pass 1"), session="another session")
    assert hold.wait(10)  # another user's pass holds the model
    batch, _ = _in_thread(lambda: (lock.background().__enter__(), order.append("batch"), lock.release()))
    _until(lambda: lock._long_since)
    _in_thread(pass_of("pass 2"), session="another session")
    _until(lambda: lock._short_waiting)
    clock.move_to(lock, 0.3)  # not yet patient: the next pass would go first
    assert not lock._overdue()
    clock.move_to(lock, 0.7)  # the batch has waited its patience: it goes before the waiting pass
    release.set()
    _until(lambda: len(order) == 3)
    assert order == ["pass 1", "batch", "pass 2"]


def test_a_scans_first_batch_is_one_copy_and_its_wait_for_the_lock_does_not_shrink_the_next(monkeypatch):
    """A scan's first batch holds the lock for one copy (another user's sentence waits that long at most), and
    batches are sized by their own time: a batch that first waited for another user's grace is not taken for
    a slow one."""
    import contextlib
    import threading
    import time
    from types import SimpleNamespace

    from attention.models.analyses import edits
    from attention.models.forward.model import ModelLock

    seconds_per_copy = 0.004
    monkeypatch.setattr(edits, "run_from", lambda loaded, setup, first, n, base: time.sleep(seconds_per_copy * n) or n)
    loaded = SimpleNamespace(lock=ModelLock(grace=0.3))
    sizes = []

    def hooks_for(part):
        sizes.append(len(part))
        return contextlib.nullcontext()

    other = threading.Thread(target=lambda: loaded.lock.acquire() or loaded.lock.release())
    other.start()
    other.join()  # another user's short request just ended: the first batch waits 0.3 s
    values = edits.scan(loaded, None, [(0, i) for i in range(300)], hooks_for, lambda n: torch.zeros(n), None)
    assert len(values) == 300 and sum(sizes) == 300
    assert sizes[0] == 1
    assert sizes[1] >= 25  # 0.5 s / 0.004 s = 125 copies; sized with the 0.3 s wait counted it was 1
