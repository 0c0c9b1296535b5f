"""The browser harness the browser tests, the benchmarks and scripts/screenshots.py share: Debian's headless
Chromium driven by Playwright, a page's address, and waiting for a page to finish drawing. The server they
drive is serving.running_app (make class runs the same, behind nginx).

    with running_app() as url, chromium() as browser:
        page = browser.new_page(); page.goto(page_url(url, "model_heads", text="bank")); wait_idle(page)

It lives with the tests, not in the installed package: `attention-explorer` (serving.py) serves the app and
`make class`; this only drives it. Playwright is a dev dependency; never `playwright install`.
"""

from __future__ import annotations

import contextlib
from urllib.parse import urlencode

CHROMIUM = "/usr/bin/chromium"  # Debian's (make browser); never `playwright install`
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
DONE = "[data-testid='stApp'][data-test-script-state='notRunning']"


@contextlib.contextmanager
def chromium():
    """Yield a Playwright Browser running Debian's headless Chromium (playwright is a dev dependency)."""
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
    q = urlencode(params)
    return f"{base}/{page}" + (f"?{q}" if q else "")
