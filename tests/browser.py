"""Start the app with `streamlit run` and drive it in Debian's Chromium through Playwright.

Used by the browser tests, the screenshot script and the benchmark. Never `playwright install`:
the browser is /usr/bin/chromium from apt (see the Makefile's `browser` target).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
DONE = "[data-testid='stApp'][data-test-script-state='notRunning']"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerUrl(str):
    """The base URL of a running server; `.pid` is the streamlit process, `.log` its output file."""

    pid: int
    log: Path


@contextlib.contextmanager
def streamlit_server(port: int | None = None, timeout: float = 90.0, env: dict | None = None):
    """Yield the base URL (a ServerUrl) of a fresh `streamlit run app.py` on 127.0.0.1; stop it afterwards."""
    port = port or free_port()
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", **(env or {}))
    cmd = [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.headless", "true",
           "--server.address", "127.0.0.1", "--server.port", str(port), "--browser.gatherUsageStats", "false"]
    log_path = ROOT / f".streamlit-test-{port}.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = ServerUrl(f"http://127.0.0.1:{port}")
    failed = True
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"streamlit did not start (exit {proc.poll()}); see {log_path}")
            time.sleep(0.05)
        url.pid, url.log = proc.pid, log_path
        yield url
        failed = False
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        if not failed:  # keep the server's output when it did not start or a test failed
            log_path.unlink(missing_ok=True)


@contextlib.contextmanager
def chromium():
    """Yield a Playwright Browser running Debian's headless Chromium."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def wait_idle(page, timeout: float = 60_000) -> None:
    """Wait until the script has finished running and every chart is drawn."""
    page.wait_for_selector(DONE, timeout=timeout)
    page.wait_for_timeout(150)
    page.wait_for_selector(DONE, timeout=timeout)


def page_url(base: str, page: str, **params) -> str:
    """URL of a page by its file stem (Streamlit's url path), with query parameters."""
    from urllib.parse import urlencode

    q = urlencode(params)
    return f"{base}/{page}" + (f"?{q}" if q else "")
