"""The browser harness the browser tests, the benchmarks and scripts/screenshots.py share: Debian's headless
Chromium driven by Playwright, a page's address, and waiting for a page to finish drawing. The server they
drive is serving.running_app (make class runs the same, behind nginx).

    with running_app() as url, chromium() as browser:
        page = browser.new_page(); page.goto(page_url(url, "model_heads", text="bank")); wait_idle(page)

It lives with the tests, not in the installed package: `attention-explorer` (serving/command.py) serves the app and
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


def ends_with_back(url: str) -> bool:
    """Whether the page at `url` ends with the path's Back button (pages/_path.py path_links): every page of the
    site but Home and the class's pages (pages/_site.py). open_whole waited 10 s for it on those three (~60 s
    of the suite)."""
    from urllib.parse import urlparse

    from pages._site import SECTIONS, page_path

    path = page_path(urlparse(url).path.rstrip("/").rsplit("/", 1)[-1])
    return path is not None and path not in {e.path for e in SECTIONS["Class"]}


def open_whole(page, url: str) -> None:
    """Open the page at `url` whole: where its questions hold the rest back (an address with its settings opens
    nothing before an answer), by its "Show the rest of the page"."""
    page.goto(url)
    wait_idle(page, timeout=180_000)
    if ends_with_back(url):  # a page's last run may start after the first idle: its end is the path's Back button
        page.get_by_role("button", name="Back:").first.wait_for(timeout=60_000)
    rest = page.get_by_role("button", name="Show the rest of the page")
    if rest.count():
        rest.click()
        rest.wait_for(state="detached", timeout=180_000)  # its rerun has begun (a loaded machine starts it late)
        wait_idle(page, timeout=180_000)
    page.wait_for_timeout(200)  # the canvas heatmaps draw once their component has mounted


def returning_learner(url: str, pages) -> dict:
    """The cookie of a browser that has opened `pages` (URL names) whole before: its progress, stored in the
    database the server at `url` reads (this process's ATTENTION_EXPLORER_DATA or _DATABASE_URL, which running_app
    hands on). Added to a browser context (`context.add_cookies([...])`), a link with a page's settings then opens
    that view at once, as the benchmarks time it, rather than the page's questions."""
    from attention.classroom import mark_skipped, new_token

    token = new_token()
    for page in pages:
        mark_skipped(token, page)
    return {"name": "attention_explorer_learner", "value": token, "url": url}
