"""The README's Python example runs and prints what it says it prints."""

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def readme_example() -> tuple[str, list[str]]:
    """The code of the README's "Use from Python" block, and the lines its comments say it prints."""
    block = re.search(r"## Use from Python\s+```python\n(.*?)```", README.read_text(), re.S).group(1)
    claimed = [re.search(r"#.*?(\[\[.*?\]\])", line).group(1)
               for line in block.splitlines() if line.startswith("print(")]
    return block, claimed


def test_readme_python_example_runs():
    code, claimed = readme_example()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    assert out.getvalue().splitlines() == claimed
