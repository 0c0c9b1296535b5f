"""The README's Python example runs and prints what it says it prints."""

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_python_example_runs():
    text = README.read_text()
    block = re.search(r"## Use from Python\s+```python\n(.*?)```", text, re.S).group(1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, "README.md", "exec"), {})
    printed = out.getvalue().splitlines()
    claimed = [re.search(r"#.*?(\[\[.*?\]\])", line).group(1)
               for line in block.splitlines() if line.startswith("print(")]
    assert printed == claimed
