"""Every Python block of the README runs, and prints what its comments say it prints.

A line `print(...)  # VALUE  what it is` claims that it prints VALUE (the comment up to two spaces), so a
number in the README cannot drift from what the code gives. Blocks fenced without `python` (a one-line
BertViz switch) are illustrations, not programs.
"""

import contextlib
import io
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def claimed_prints(block: str) -> list[str]:
    """What each print line's comment says it prints."""
    return [re.search(r"#\s*(.*?)(?:\s{2,}|$)", line).group(1)
            for line in block.splitlines() if line.startswith("print(")]


def run(block: str) -> list[str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, "README.md", "exec"), {})
    return out.getvalue().splitlines()


def test_the_readme_has_its_examples_and_every_print_says_what_it_prints():
    blocks = python_blocks()
    assert len(blocks) >= 3
    for block in blocks:
        claimed = claimed_prints(block)
        assert claimed and all(claimed), block  # every block checks something


@pytest.mark.parametrize("block", python_blocks()[:1], ids=["toy"])
def test_the_toy_example_prints_what_it_says(block):
    assert run(block) == claimed_prints(block)


def _name(block: str) -> str:
    for name, word in (("corpus", "corpus"), ("qk", "qk_attribution"), ("smollm2", "smollm2")):
        if word in block:
            return name
    return "minilm"


@pytest.mark.slow
@pytest.mark.parametrize("block", python_blocks()[1:], ids=_name)
def test_the_model_examples_print_what_they_say(block, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a block may save a file
    assert run(block) == claimed_prints(block)
