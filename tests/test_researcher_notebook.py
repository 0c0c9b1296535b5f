"""examples/researcher.ipynb (issue 72) runs top to bottom in a fresh kernel: attribution patching on a metric of
the reader's own, a steering vector with generation, a knockout, and a figure written as SVG."""

import re

import pytest

from tests.notebook_run import run_notebook


@pytest.mark.slow
def test_the_researcher_notebook_runs_and_each_tool_changes_what_it_should():
    outputs = run_notebook("researcher.ipynb")
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert re.search(r"baseline \d+\.\d\d", text) and text.count("(estimated)") == 3
    assert "bytes of SVG" in text
    plain, steered = (said for _, said in re.findall(r"(?:plain|steered): +(['\"])(.*)\1", text))
    assert plain != steered and "dog" in steered
    clean, knocked = (float(x) for x in re.search(r"(-?\d+\.\d\d) clean, (-?\d+\.\d\d) with", text).groups())
    assert knocked != clean and "L24H4 looks most at" in text  # (tests/test_hook_loop.py holds a knockout exact)
