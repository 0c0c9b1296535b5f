"""An image through a vision transformer (issue 45): attend_image against the model's own forward pass.

    python -m benchmarks.images            # measures, and writes section 13 of docs/benchmarks.md
    python -m benchmarks.images --smoke    # a small shape, one run of each, nothing written

A ViT-Base-shaped model (12 layers x 12 heads, 768 wide, 16-pixel patches: 197 tokens for a 224 x 224 image),
random weights, built from its config; the image goes through a 224 x 224 ViT image processor. Timed in one
run: the model's own forward pass (fused SDPA attention, as transformers runs it), attend_image (the same pass
with q, k, v captured and our kernel making every layer's output and the survey), and what the image page
draws from the result (where one patch looks, every head of a layer, rollout). And the bundled digits model
(17 tokens). Medians with min-max.
"""

from __future__ import annotations

import sys

from attention.models import attend_image
from benchmarks.common import timed
from benchmarks.soak import section_main

SECTION = "## 13. An image through a vision transformer (issue 45)"
BASE = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072, image_size=224,
            patch_size=16)
SMOKE = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, image_size=224,
             patch_size=16)


def measure(smoke: bool = False) -> dict:
    import numpy as np
    import torch
    from transformers import ViTConfig, ViTImageProcessor, ViTModel

    from attention import figures
    from attention.models import (
        attention_rollout,
        example_images,
        from_model,
        heads_looking,
        load_model,
        patch_looks,
        read_image,
    )

    repeats = 1 if smoke else 5
    torch.manual_seed(0)
    network = ViTModel(ViTConfig(**(SMOKE if smoke else BASE))).eval()
    processor = ViTImageProcessor(size={"height": 224, "width": 224})
    loaded = from_model(network, processor, name="ViT-Base shape, random weights")
    picture = (np.random.default_rng(0).random((224, 224, 3)) * 255).astype(np.uint8)
    pixels = processor(images=read_image(picture), return_tensors="pt")["pixel_values"]

    def own():
        network.set_attn_implementation("sdpa")
        try:
            with torch.inference_mode():
                network(pixel_values=pixels)
        finally:
            network.set_attn_implementation("explorer_capture")

    att = attend_image(loaded, picture)
    middle = att.image.token_of(att.image.rows // 2, att.image.cols // 2)
    last = att.n_layers - 1

    def page():
        figures.picture(att, patch_looks(att, last, 0, middle).on_image, clickable=True)
        figures.heads_over_image(att, heads_looking(att, last, middle))
        figures.picture(att, att.image.on_grid(attention_rollout(att)[last][middle]))
    r = {"tokens": len(att.tokens), "layers": att.n_layers, "heads": att.n_heads, "smoke": smoke,
         "own": timed(own, repeats), "attend": timed(lambda: attend_image(loaded, picture), repeats),
         "page": timed(page, repeats), "gap": loaded.check.gap}
    digits = load_model("vit-digits")
    example = example_images().images[0]
    r["digits"] = {"attend": timed(lambda: attend_image(digits, example), repeats),
                   "tokens": len(attend_image(digits, example).tokens)}
    return r


def _fig(t: dict, unit: str = "s") -> str:
    scale, digits = (1000, 0) if unit == "ms" else (1, 2)
    low, mid, high = (f"{t[k] * scale:.{digits}f}" for k in ("min", "median", "max"))
    return f"{mid} {unit} ({low}–{high}, n={t['n']})"


def lines(r: dict) -> list[str]:
    own = r["own"]["median"]
    shape = "a small smoke shape" if r["smoke"] else "ViT-Base's shape"
    return [SECTION, "",
            f"One 224 × 224 image through {shape} ({r['layers']} layers × {r['heads']} heads, {r['tokens']} tokens: "
            "[CLS] and 14 × 14 patches), random weights, on this machine's CPU threads (medians, min–max, one run; "
            "`python -m benchmarks.images`):", "",
            "| step | time | ÷ the model's own forward pass |", "| --- | --- | --- |",
            f"| the model's own forward pass (fused SDPA) | {_fig(r['own'], 'ms')} | 1 |",
            f"| attend_image: the pass with q, k, v captured, our kernel and the survey | {_fig(r['attend'], 'ms')} | "
            f"{r['attend']['median'] / own:.2f} |",
            f"| the image page's figures: one patch, every head of a layer, rollout | {_fig(r['page'], 'ms')} | "
            f"{r['page']['median'] / own:.2f} |", "",
            "The guard held its rebuilt weights to the model's own eager attention "
            f"{'exactly' if r['gap'] == 0 else format(r['gap'], '.0e').join(('to ', ''))}. The bundled "
            f"digits model ({r['digits']['tokens']} tokens) attends in {_fig(r['digits']['attend'], 'ms')}."]


def main(argv: list[str] | None = None) -> int:
    return section_main(argv, measure, lines, SECTION, __doc__)


if __name__ == "__main__":
    sys.exit(main())
