"""Write examples/quickstart.ipynb from the cells below (the notebook is generated, so it stays reviewable here).

    .venv/bin/python scripts/write_quickstart.py
"""

from pathlib import Path

import nbformat

CELLS = [
    ("markdown", "# Attention Explorer in a notebook\n\nThe same `attention` package the app runs: toy traces, real "
                 "models' heads, any model's own attentions, head effects, and results that travel between a "
                 "notebook and the app. Every figure is Plotly's and renders offline."),
    ("markdown", "## 1. The lookup, step by step (seed 002: apple, banana, chair)"),
    ("code", "from attention import scaled_dot_product_attention\nfrom attention.toy import examples as ex\n\n"
             "t = scaled_dot_product_attention(ex.FRUIT_QUERY[None, :], ex.FRUIT_KEYS, ex.FRUIT_VALUES)\n"
             "t.scaled.round(2), t.weights.round(3), t.output.round(3)"),
    ("markdown", "## 2. A bundled model: every head, then one head read in words"),
    ("code", "from attention import figures\nfrom attention.models import Reading, attend, load_model\n\n"
             "minilm = load_model(\"minilm\")\nprint(minilm.check.summary)\n"
             "att = attend(minilm, \"I sat on the river bank and watched the water.\")\nfigures.grid(att)"),
    ("code", "figures.head(att, 2, 5, reading=Reading(words=True, without_sinks=True))"),
    ("markdown", "## 3. Any model's own attentions (BertViz's calls work with one changed import)\n\n"
                 "A tiny random BERT stands in for the model you study: `output_attentions=True`, then "
                 "`from_attentions`, or `head_view` / `model_view` with BertViz's arguments."),
    ("code", "import torch\nimport transformers\n\nfrom attention.figures import head_view, model_view\n"
             "from attention.models import from_attentions\n\n"
             "tokenizer = minilm.tokenizer\n"
             "config = transformers.BertConfig(num_hidden_layers=2, num_attention_heads=4, hidden_size=32,\n"
             "                                 intermediate_size=64, attn_implementation=\"eager\")\n"
             "model = transformers.BertModel(config).eval()  # eager attention: it returns its weights\n"
             "inputs = tokenizer(\"The animal didn't cross the street because it was too tired\", "
             "return_tensors=\"pt\")\n"
             "with torch.no_grad():\n    attention = model(**inputs, output_attentions=True).attentions\n"
             "tokens = tokenizer.convert_ids_to_tokens(inputs[\"input_ids\"][0])\n"
             "mine = from_attentions(tokens, attention, model_name=\"tiny bert\")\n"
             "model_view(attention, tokens)"),
    ("code", "head_view(attention, tokens, layer=1, heads=[0, 1])"),
    ("markdown", "## 4. What the heads do: remove each one and watch the prediction"),
    ("code", "from attention.models import attend, contrast, head_ablation\n\nsmol = load_model(\"smollm2\")\n"
             "mary = attend(smol, \"When Mary and John went to the store, John gave a drink to\")\n"
             "pair = contrast(mary, smol.tokenizer, \" Mary\", \" John\")\n"
             "effects = head_ablation(smol, mary, pair)\nprint(f\"m = {pair.baseline:.2f}; largest: "
             "{effects.ranked(3)}\")\nfigures.effects(effects)"),
    ("markdown", "## 5. Export here, open anywhere (the app's model pages open the same file)"),
    ("code", "from attention.models import export_npz, load_npz\n\n"
             "data = export_npz(att)\nback = load_npz(data)\n"
             "assert (back.weights == att.weights).all()\nprint(f\"{len(data):,} bytes\")\nfigures.head(back, 0, 0)"),
    ("markdown", "## 6. An image model: patches instead of words\n\nThe bundled ViT reads 8 × 8 digits as [CLS] and "
                 "4 × 4 patches; `attend_image` takes an image (a PIL image, an array, a file) as `attend` takes a "
                 "text. Any vision transformer's own `output_attentions` reads the same way with "
                 "`from_attentions(None, attentions, image=image_patches(...))`."),
    ("code", "from attention.models import attend_image, example_images, heads_looking, patch_looks\n\n"
             "vit = load_model(\"vit-digits\")\ndigit = attend_image(vit, example_images().images[0])\n"
             "print(digit.tokens[:3], digit.image.predicted)\n"
             "middle = digit.image.token_of(1, 2)  # patch (2, 3), counting from 1 as its name does\n"
             "figures.picture(digit, patch_looks(digit, 3, 0, middle).on_image, selected=(1, 2))"),
    ("code", "figures.heads_over_image(digit, heads_looking(digit, 3, middle))"),
]


def main() -> None:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell(src) if kind == "markdown" else nbformat.v4.new_code_cell(src)
                      for kind, src in CELLS]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    out = Path(__file__).resolve().parent.parent / "examples" / "quickstart.ipynb"
    nbformat.write(notebook, out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
