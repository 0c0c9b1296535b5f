# On the device machine, from the repository root: `source .gpu/env.sh` (see scripts/gpu/prepare.sh).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl
export PYTHONPATH=/tmp/site:$PWD ATTENTION_EXPLORER_CACHE=/tmp/cache HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
python3 .gpu/fake_bundled.py /tmp/site /tmp/cache
