"""The IOI notebook runs top to bottom in a fresh kernel (nbclient, the venv's python3 kernel), and its figures
are pictures an exported page or a code host shows without a server: a PNG each, and HTML with its script inline."""

import base64
import re
import time

import pytest

from tests.notebook_run import run_notebook

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_the_ioi_notebook_runs_and_draws_its_two_figures_as_pictures():
    began = time.perf_counter()
    outputs = run_notebook("ioi.ipynb")
    took = time.perf_counter() - began
    assert not [o for o in outputs if o.output_type == "error"]
    figures = [o["data"] for o in outputs if "image/png" in o.get("data", {})]
    assert len(figures) == 2  # patching (layer x position), direct attribution (layer x head)
    for data in figures:
        assert base64.b64decode(data["image/png"]).startswith(PNG)
        page = data["text/html"]
        assert not re.search(r"<script[^>]*\bsrc=", page) and len(page) < 400_000  # inline, no plotly.js
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "100 pairs" in text and "shares add up" in text and "at S2" in text
    print(f"the IOI notebook ran in {took:.0f} s")  # (its speed is make bench's to hold, not a test's)
