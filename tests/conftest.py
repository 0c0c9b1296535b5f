"""Shared fixtures: the bundled models, loaded once per test session, and the tokenizer the tiny
random-weight family models are built with (benchmarks.families)."""

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def minilm():
    from attention.models import load_model

    return load_model("minilm")


@pytest.fixture(scope="session")
def smollm2():
    from attention.models import load_model

    return load_model("smollm2")


@pytest.fixture(scope="session")
def tok():
    from benchmarks.families import tokenizer

    return tokenizer()
