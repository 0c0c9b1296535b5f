"""What a visitor sees when a page fails: words, what to do and a reference, never a traceback or a server path.

A newcomer's first hour met `TypeError: expected a sequence of integers ... File "/work/main/pages/scaling.py"`
in a red box on every slider release (issue 68). Whatever fails now, the page says in words that the app failed
(not the reader), keeps what it had drawn above, and offers what to do (another value, a reload); the traceback
goes to the server's log under a short reference the visitor can quote, and nowhere else.

Three doors an error comes through, each guarded here:
- the page's own script: app.py runs it through `run_guarded`;
- a widget's callback (on_change, on_click, a component's release) and a fragment's rerun, which Streamlit runs
  outside app.py: `guard_session` gives this session's runs `report` as their error handler (Streamlit's own
  `on_script_error`, which `st.App(..., on_script_error=...)` sets for a whole server; `streamlit run` has no
  option for it, so it is set on the session when its first run starts);
- anything past both (an error inside this module): `--client.showErrorDetails none` on the served app's command
  line (serving/process.py) keeps Streamlit's fallback box free of details.
AppTest runs pages without a server (`served()`): there an error is raised as before, so a test's
`at.exception` still sees it.
"""

from __future__ import annotations

import logging
import secrets

import streamlit as st
from streamlit import runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

LOG = logging.getLogger("attention_explorer.failures")
if not LOG.handlers:  # the server's log (its stderr): when, the reference, then the traceback
    _handler = logging.StreamHandler()
    _handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    LOG.addHandler(_handler)
    LOG.propagate = False
MARK = "page-failed"  # the message's container key: tests and the random walk look for it (st-key-page-failed)


def new_reference() -> str:
    """A short reference for one failure: in the visitor's message and beside the traceback in the log."""
    return "AE-" + secrets.token_hex(3).upper()


def report(error: Exception) -> bool:
    """Streamlit's on_script_error for this session: an error in a callback or a fragment. A callback runs before
    the page, so the page was not drawn: the message offers to draw it again. Returns True: Streamlit then draws
    nothing of its own."""
    say(error, kept_above=False)
    return True


def say(error: Exception, *, kept_above: bool) -> str:
    """Say in the page that something failed and what to do; log the traceback under a new reference, returned.
    `kept_above`: the page drew up to the failure (else nothing of it was drawn)."""
    reference = new_reference()
    LOG.error("a page failed [%s]", reference, exc_info=error)
    where = ("**This part of the page could not be drawn.** What is above still holds." if kept_above else
             "**The page could not be drawn after that change.**")
    try:
        with st.container(key=f"{MARK}-{reference}"):
            st.error(f"{where} The app failed here, not you: every value its controls accept should work. Try "
                     "another value, draw the page again, or reload it (the controls keep their settings). If it "
                     f"happens again, quote **{reference}** to whoever runs the app: the full error is in the "
                     "server's log under that reference.", icon=":material/error:")
            st.button("Draw the page again", key=f"{MARK}-again-{reference}", icon=":material/refresh:")
    except Exception:  # noqa: BLE001 - drawing the message must not hide the first failure, which is logged
        LOG.exception("the failure message for %s could not be drawn", reference)
    return reference


def served() -> bool:
    """Whether a Streamlit server runs this session. AppTest runs pages with a stand-in runtime (a mock of
    Runtime's class, with no session manager): there an error is raised as before, for the test to read."""
    return runtime.exists() and hasattr(runtime.get_instance(), "_session_mgr")


def run_guarded(page) -> None:
    """Run a page (st.navigation's StreamlitPage) so that an error in it reaches the visitor as `report` words.
    st.stop, st.rerun and st.switch_page are not errors (Streamlit raises them as BaseException) and pass."""
    try:
        page.run()
    except Exception as error:
        if not served():  # AppTest: the test reads the exception itself (at.exception)
            raise
        say(error, kept_above=True)


def guard_session() -> None:
    """Make `report` this session's handler for errors raised outside app.py's run (callbacks, fragments). Cheap:
    two attribute writes per run; the session's is read when its next script runner starts."""
    ctx = get_script_run_ctx()
    if ctx is None or not served():
        return
    ctx.on_script_error = report  # this run's own fragments
    info = runtime.get_instance()._session_mgr.get_session_info(ctx.session_id)  # noqa: SLF001
    if info is not None:
        info.session._on_script_error = report  # noqa: SLF001 - the runners this session starts next
