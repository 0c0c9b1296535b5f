"""The example notebook runs top to bottom in a fresh kernel (nbclient, the venv's python3 kernel)."""


import pytest

from tests.notebook_run import run_notebook


@pytest.mark.slow
def test_the_quickstart_notebook_runs_top_to_bottom():
    outputs = run_notebook("quickstart.ipynb")
    assert not [o for o in outputs if o.output_type == "error"]
    figures = [o for o in outputs if "application/vnd.plotly.v1+json" in o.get("data", {})]
    assert len(figures) >= 6  # grid, one head, model view, head view, effects, the reopened head
