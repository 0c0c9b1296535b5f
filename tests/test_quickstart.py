"""The example notebook runs top to bottom in a fresh kernel (nbclient, the venv's python3 kernel)."""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_the_quickstart_notebook_runs_top_to_bottom():
    notebook = nbformat.read(ROOT / "examples" / "quickstart.ipynb", as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    figures = [o for o in outputs if "application/vnd.plotly.v1+json" in o.get("data", {})]
    assert len(figures) >= 6  # grid, one head, model view, head view, effects, the reopened head
