"""Make every page run inside app.py's frame, even when it is the first page a fresh server sees.

Streamlit 1.67 treats a `pages/` folder beside app.py as a v1 multipage app until app.py has called
`st.navigation` once in the process: a shared deep link (/lookup?...) opened first would run the page
file alone, without the page config and with a sidebar listing raw file names. Each page calls
`ensure_app_frame()` first; when app.py is not running it, it switches the process to v2 and runs app.py
right there (whose st.navigation runs this page inside it), then stops the page's own run.

Not st.rerun(): a rerun drops the widget event that started the run, and AppTest resets Streamlit's
pages-directory flag before every run, so every test run started outside app.py and every button click
in a test was lost. The test is whether app.py is on the call stack, where st.navigation runs pages.
"""

import sys
from pathlib import Path

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager

APP = Path(__file__).resolve().parent.parent / "app.py"  # beside pages/, in the repository and when installed


def ensure_app_frame() -> None:
    """Every page's first call: run the page inside app.py's frame (module docstring), or return at once when
    app.py is already running it."""
    if _run_by_app():
        return
    PagesManager.uses_pages_directory = False  # what st.navigation itself sets on its first call
    exec(compile(APP.read_text(), str(APP), "exec"), {"__name__": "__main__", "__file__": str(APP)})  # noqa: S102
    st.stop()


def _run_by_app() -> bool:
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename == str(APP):  # Streamlit compiles app.py under its own path
            return True
        frame = frame.f_back
    return False
