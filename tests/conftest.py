"""Shared fixtures: the bundled models, loaded once per test session, the tokenizer the tiny random-weight
family models are built with (benchmarks.families), and an app server and a browser for a module's browser
tests."""

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Before torch is imported: OpenMP threads that sleep while they wait, and one torch thread per pytest-xdist worker
# (`make test` runs two on two cores). Two workers each spinning two threads fought for the cores: SmolLM2's exact
# scan took 6 s alone, 23-36 s beside another worker, 6 s with one passive thread each (docs/develop.md). The app's
# servers do the same (serving/process.py configure_process).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
# Progress and classes go to a database of the test session's own (attention.classroom), never the user's.
if "ATTENTION_EXPLORER_DATABASE_URL" not in os.environ:
    import atexit
    import shutil
    import tempfile

    os.environ["ATTENTION_EXPLORER_DATA"] = tempfile.mkdtemp(prefix="explorer-data-")
    atexit.register(shutil.rmtree, os.environ["ATTENTION_EXPLORER_DATA"], True)


@pytest.fixture(scope="session")
def minilm():
    from attention.models import load_model

    return load_model("minilm")


@pytest.fixture(scope="session")
def smollm2():
    from attention.models import load_model

    return load_model("smollm2")


@pytest.fixture(scope="session")
def smollm2_bf16():
    """SmolLM2 in bfloat16, loaded once for every test that compares it with float32."""
    from attention.models import load_model

    return load_model("smollm2", dtype="bfloat16")


@pytest.fixture(scope="session")
def tok():
    from tests.tiny_models import tokenizer

    return tokenizer()


@pytest.fixture(scope="module")
def app_url():
    """A fresh app server on 127.0.0.1 for a module's browser tests (serving.running_app)."""
    from serving import running_app

    with running_app() as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    """Debian's headless Chromium, driven by Playwright (tests/harness.py)."""
    from tests.harness import chromium

    with chromium() as b:
        yield b


@pytest.fixture(scope="session")
def gemma3():
    """Gemma 3 270M, bundled: the first load in a fresh cache joins and converts it (~100 s on 2 cores)."""
    from attention.models import load_model

    return load_model("gemma3")


# `make test` runs the suite on two workers (pytest-xdist, one test file each at a time: --dist loadfile, so a
# file's module fixtures, its app server and browser, start once). Files go out in collection order, so the
# longest start first and no long file is left to run alone at the end: 23.2 min in one process on the 2-core
# machine, 16.6 min on two workers in collection order (docs/develop.md, "The suite's time").
LONGEST_FIRST = ("test_hands.py", "test_bench_smoke.py", "test_journeys.py", "test_batch_job.py", "test_corpus.py",
                 "test_ioi_notebook.py", "test_charts.py", "test_hostile.py", "test_models.py", "test_model_pages.py",
                 "test_class_live.py", "test_load.py", "test_browser.py", "test_effects.py", "test_fused_survey.py")


def pytest_collection_modifyitems(config, items):
    """The files of LONGEST_FIRST first, in that order; the rest as collected (a stable sort)."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
