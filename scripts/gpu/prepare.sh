#!/usr/bin/env bash
# Fill .gpu/ (ignored: add "/.gpu/" to .git/info/exclude) with what the device machine lacks: transformers and
# plotly at our pins, the bundled models' configs and tokenizers (their weights do not fit in the 64 MiB that
# travel; scripts/gpu/fake_bundled.py gives them random weights of the same shapes there), and this folder.
# Then, with the device tool: carry [".gpu"], command "source .gpu/env.sh && pytest tests/test_cuda.py ...".
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .gpu/whl .gpu/minilm .gpu/smollm2
.venv/bin/python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 -d .gpu/whl \
    "$(grep '^transformers==' requirements.txt)" "$(grep '^plotly==' requirements.txt)"
minilm=$(.venv/bin/python -c "from attention.models import minilm_dir; print(minilm_dir())")
smollm2=$(.venv/bin/python -c "from attention.models.forward.bundled import smollm2_dir; print(smollm2_dir(lambda s: print(s, file=__import__('sys').stderr)))")
for f in config.json tokenizer.json tokenizer_config.json special_tokens_map.json vocab.txt; do cp "$minilm/$f" .gpu/minilm/; done
for f in config.json tokenizer.json tokenizer_config.json generation_config.json chat_template.jinja; do
    cp "$smollm2/$f" .gpu/smollm2/; done
cp scripts/gpu/fake_bundled.py scripts/gpu/env.sh .gpu/
du -sh .gpu
