"""Make every page run inside app.py's frame, even when it is the first page a fresh server sees.

Streamlit 1.67 treats a `pages/` folder beside app.py as a v1 multipage app until app.py has called
`st.navigation` once in the process: a shared deep link (/lookup?...) opened first would run the page
file alone, without the page config and with a sidebar listing raw file names. Each page calls
`ensure_app_frame()` first; in that case it switches the process to v2 and reruns through app.py.
"""

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager


def ensure_app_frame() -> None:
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False  # what st.navigation itself sets on its first call
        st.rerun()
