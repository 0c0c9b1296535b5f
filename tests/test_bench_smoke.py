"""The benchmark at its smallest sizes, so `make bench` cannot rot (no timing is asserted here)."""

import subprocess
import sys

import pytest

from serving import APP

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def test_benchmark_smoke_run_writes_a_report(tmp_path):
    out = tmp_path / "benchmarks.md"
    run = subprocess.run([sys.executable, "-m", "benchmarks.run", "--smoke", "--out", str(out)], cwd=APP.parent,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    text = out.read_text()
    for heading in ("## Targets", "## 1. Core", "## 2. Models", "## 3. Payload", "## 4. Browser", "## 5. Long inputs",
                    "## 6. Predictions", "## 12. Two models compared", "## 13. An image through"):
        assert heading in text
    assert "| 3 |" in text  # the core row at n = 3
    assert "live slider, 1-s drag" in text and "websocket messages sent during a drag" in text
