#!/usr/bin/env bash
# On the device machine, from the repository root, with .gpu carried (scripts/gpu/prepare.sh fills it):
# the CUDA tests, then benchmarks.gpu into $OUT/gpu.json. Each step has its own time limit.
source .gpu/env.sh
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, \
torch.cuda.get_device_name(0))"
timeout "${TEST_LIMIT:-240}" python3 -m pytest -q -x -p no:cacheprovider tests/test_cuda.py tests/test_device_arrays.py \
    2>&1 | tail -25
timeout "${BENCH_LIMIT:-300}" python3 -m benchmarks.gpu "$OUT/gpu.json" 2>&1 | tail -12
