"""Faults a running server meets (issue 33): each gets a message, and the server goes on serving.

A model folder deleted while the app lists it; the cache folder read-only or full when SmolLM2 is first
converted; a model that raises inside its forward pass; torch half imported by another session's thread;
two models loading at once; an analysis's hooks met by another session's pass. (An app process killed
under load is make soak's and tests/test_class.py's; hostile files are tests/test_hostile_files.py's.)
"""

import errno
import shutil

import pytest

from attention.models import ModelUnavailable, attend, load_model
from attention.models.forward import bundled
from tests.test_pages import canvas, open_page
from tests.tiny_models import saved

pytestmark = pytest.mark.slow


def test_a_model_folder_deleted_while_listed_gets_a_message(tmp_path, tok, monkeypatch):
    root = tmp_path / "models"
    saved("llama", root / "plain", tok)
    saved("llama", root / "doomed", tok)
    monkeypatch.setenv("ATTENTION_EXPLORER_MODEL_DIRS", str(root))
    at = open_page("pages/model_heads.py")
    assert "models/doomed (local folder)" in at.selectbox(key="heads.model").options
    shutil.rmtree(root / "doomed")  # after the list was drawn, before it is picked
    at.selectbox(key="heads.model").set_value("local:models/doomed").run()
    assert not at.exception
    assert any("not among the operator's model folders now" in e.value for e in at.error), at.error
    at.selectbox(key="heads.model").set_value("local:models/plain").run()  # the server goes on: another works
    assert not at.exception and not at.error and canvas(at, "heads.grid")
    with pytest.raises(ModelUnavailable, match="not among"):
        load_model("local:models/doomed")


class _Tiny:
    """Stands in for SmolLM2 converted from its GGUF file (15 s): what matters here is saving it."""

    def __init__(self, fail: OSError | None):
        self.config, self.fail = object(), fail

    def save_pretrained(self, folder):
        (folder / "model.safetensors").write_bytes(b"\0" * 1000)  # half a copy, then the disk fills
        if self.fail:
            raise self.fail


@pytest.mark.parametrize("fault", ["read-only", "full"])
def test_a_cache_folder_read_only_or_full_gets_a_message_and_keeps_nothing_half_written(fault, tmp_path, monkeypatch):
    import transformers

    cache = tmp_path / "cache"
    monkeypatch.setenv("ATTENTION_EXPLORER_CACHE", str(cache))
    full = OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained",
                        lambda *a, **k: _Tiny(full if fault == "full" else None))
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda *a, **k: _Tiny(None))
    if fault == "read-only":  # as root, chmod does not stop a write: the folder refuses as a read-only mount does
        def refuse(*a, **k):
            raise OSError(errno.EROFS, "Read-only file system")
        monkeypatch.setattr(bundled.tempfile, "mkdtemp", refuse)
    with pytest.raises(ModelUnavailable, match="ATTENTION_EXPLORER_CACHE") as err:
        bundled.smollm2_dir(lambda message: None)
    assert ("Read-only file system" if fault == "read-only" else "No space left") in str(err.value)
    assert str(cache) in str(err.value)
    # no half-written copy to be taken for a good one (the lock that lets one process convert at a time stays)
    assert not cache.exists() or not [p for p in cache.iterdir() if not p.name.endswith(".lock")]


def test_a_model_that_raises_inside_its_forward_pass_gets_a_message_and_the_next_text_works(monkeypatch):
    from transformers.models.bert import modeling_bert

    at = open_page("pages/model_heads.py")  # MiniLM (a BertModel) loaded and checked first
    forward = modeling_bert.BertModel.forward

    def broken(self, *args, **kwargs):
        raise RuntimeError("an illegal memory access was encountered")
    monkeypatch.setattr(modeling_bert.BertModel, "forward", broken)
    at.text_area(key="heads.text").set_value("The forward pass breaks on this sentence").run()
    assert not at.exception
    assert any("RuntimeError" in e.value and "illegal memory access" in e.value for e in at.error), at.error
    monkeypatch.setattr(modeling_bert.BertModel, "forward", forward)
    at.text_area(key="heads.text").set_value("The forward pass works on this one").run()
    assert not at.exception and not at.error and canvas(at, "heads.grid")
    at.text_area(key="heads.text").set_value("The forward pass breaks on this sentence").run()  # its failure: not kept
    assert not at.exception and not at.error and canvas(at, "heads.grid")


RACE = """
import os, sys, threading, time
import serving
threading.Thread(target=lambda: __import__("torch"), daemon=True).start()  # a model page's first import
while "torch" not in sys.modules:  # a toy page's first run, while torch is still being imported
    time.sleep(0.0005)
half_made = not hasattr(sys.modules["torch"], "set_num_threads")
serving.configure_process()
import torch
print(half_made, torch.get_num_threads())
"""


def test_the_first_pages_of_a_fresh_server_do_not_trip_over_torch_half_imported():
    """On a fresh server one session's page imports torch (seconds) while another's first run configures the
    process: it must wait for torch, not call into the half-made module (AttributeError: partially initialized
    module 'torch', seen by make soak)."""
    import subprocess
    import sys

    import serving

    done = subprocess.run([sys.executable, "-c", RACE], capture_output=True, text=True, timeout=120,
                          env={**serving.app_environment(), "ATTENTION_EXPLORER_TORCH_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    half_made, threads = done.stdout.split()
    assert half_made == "True"  # the race was met: torch was half made when the process was configured
    assert threads == "1"


WARM = """
import os, sys, time
import serving
serving.configure_process()
serving.warm_model_side()
loaded = "torch" in sys.modules
for _ in range(600):  # the model side, imported in the background while the first page is read
    if "attention.models" in sys.modules and hasattr(sys.modules["attention.models"], "load_model"):
        break
    time.sleep(0.1)
import torch
print(os.environ["OMP_WAIT_POLICY"], loaded, "attention.models" in sys.modules, torch.get_num_threads())
"""


def test_a_fresh_server_waits_passively_and_warms_the_model_side_after_its_first_page():
    """OpenMP threads that spin took the cores their own scan waited for on a busy machine (a scan of 3 s took
    240 s while the machine ran other work): the server asks for passive ones before torch loads. The model side
    (torch, transformers: ~4 s) is imported behind the first page, not by it, with the server's thread count."""
    import subprocess
    import sys

    import serving

    unset = ("OMP_WAIT_POLICY", "ATTENTION_EXPLORER_WARM")
    env = {k: v for k, v in serving.app_environment().items() if k not in unset}
    done = subprocess.run([sys.executable, "-c", WARM], capture_output=True, text=True, timeout=120,
                          env={**env, "ATTENTION_EXPLORER_TORCH_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["PASSIVE", "False", "True", "1"]


ROUNDS = 4  # without load_model's lock this test failed in 3 runs of 3


def test_two_sessions_loading_two_models_at_once_leave_transformers_as_they_found_it():
    """from_pretrained patches process-wide names while it builds a model and puts back what it found: two
    loads at once (two sessions, two models) put back each other's patches, and every SmolLM2 load after
    that failed ("Cannot copy out of meta tensor": its tied LM head never tied). load_model takes one at a time."""
    import threading

    import torch
    import transformers

    tie_weights, linspace = transformers.PreTrainedModel.tie_weights, torch.linspace
    failed = []

    def load(name):
        try:
            load_model(name)
        except Exception as err:  # noqa: BLE001 - any failure is the test's
            failed.append(f"{name}: {err!r}"[:300])
    for _ in range(ROUNDS):
        threads = [threading.Thread(target=load, args=(name,)) for name in ("minilm", "smollm2", "minilm")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not failed
    assert transformers.PreTrainedModel.tie_weights is tie_weights and torch.linspace is linspace


def _hooked(network) -> int:
    return sum(len(m._forward_pre_hooks) + len(m._forward_hooks) for m in network.modules())


@pytest.mark.parametrize("analysis", ["qk_attribution", "residual_stream"])
def test_an_analysis_puts_its_hooks_on_the_shared_model_only_while_it_holds_the_lock(analysis, tok):
    """Another session's pass never meets them: Why this key's were put on before its lock, and a pass that
    ran meanwhile raised the analysis's private stop (make soak: 'the work raised _Stop'). Here another session
    holds the lock while the analysis waits for it, and runs its own pass."""
    import threading
    import time

    import torch

    from attention.models import qk_attribution
    from attention.models.analyses.readout import residual_stream
    from tests.tiny_models import TEXT, build

    loaded, reference = build("bert" if analysis == "qk_attribution" else "gpt2", tok)  # bert: post-norm, one pass
    att = attend(loaded, TEXT)
    run = {"qk_attribution": lambda: qk_attribution(loaded, att, 1, 0, 4, 2).total,
           "residual_stream": lambda: residual_stream(loaded, att, loaded.anatomy).resid}[analysis]
    alone, own_hooks = run(), _hooked(loaded.network)
    ids = torch.as_tensor(att.token_ids)[None]
    with torch.no_grad():
        want = reference(input_ids=ids)[0]  # logits, or bert's last hidden state
    found = []
    with loaded.lock:  # another session's pass in flight
        waiting = threading.Thread(target=lambda: found.append(run()))
        waiting.start()
        time.sleep(0.5)  # the analysis is at the lock by now
        assert waiting.is_alive()
        assert _hooked(loaded.network) == own_hooks
        with torch.no_grad():
            theirs = loaded.network(input_ids=ids)[0]  # raised _Stop, or kept another's text, with hooks up
        torch.testing.assert_close(theirs, want)
    waiting.join(timeout=60)
    assert found and torch.equal(torch.as_tensor(found[0]), torch.as_tensor(alone))
    assert _hooked(loaded.network) == own_hooks
