"""A notebook of examples/ run top to bottom in a fresh kernel (nbclient, the venv's python3 kernel), from the
repository's root: its outputs, for the tests of each notebook."""

from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent


def run_notebook(name: str) -> list:
    """Every output of examples/<name>, in order, after running it; the notebook's errors are outputs too."""
    notebook = nbformat.read(ROOT / "examples" / name, as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    return [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
