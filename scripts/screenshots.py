"""Screenshot every page at 1280 px and 800 px wide into artifacts/screenshots/ (for a look, not a test).

    .venv/bin/python scripts/screenshots.py [page ...]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from serving import APP, running_app  # noqa: E402
from tests.harness import chromium, page_url, wait_idle  # noqa: E402

PAGES = sys.argv[1:] or ["", "lookup", "self_attention", "scaling", "scoring", "multihead", "toy_ambiguity",
                         "positions", "bottleneck", "model_heads", "inside_head", "ambiguous_words", "head_atlas",
                         "predictions", "what_heads_do", "compare", "image_model", "corpus", "classroom", "handout"]
out = APP.parent / "artifacts" / "screenshots"
out.mkdir(parents=True, exist_ok=True)
with running_app() as base, chromium() as browser:
    for width in (1280, 800):
        page = browser.new_page(viewport={"width": width, "height": 900})
        for name in PAGES:
            page.goto(page_url(base, name))
            wait_idle(page, timeout=180_000)
            # Streamlit scrolls inside its own container: grow the viewport to the content's height, again until
            # it stops growing (canvas heatmaps take their height once drawn, after the page is idle).
            height = 0
            for _ in range(4):
                now = page.evaluate("document.querySelector('[data-testid=stMainBlockContainer]').scrollHeight")
                if now == height:
                    break
                height = now
                page.set_viewport_size({"width": width, "height": min(int(height) + 150, 12000)})
                page.wait_for_timeout(1200)
            slug = (name or "home").replace("?", "-").replace("&", "-").replace("=", "_")  # "positions?pos.real=true"
            path = out / f"{slug}-{width}.png"
            page.screenshot(path=str(path), full_page=True)
            print(path)
            page.set_viewport_size({"width": width, "height": 900})
        page.close()
