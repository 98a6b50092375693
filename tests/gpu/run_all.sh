#!/usr/bin/env bash
# Every GPU check of ludwig_hpo in one run, for a lent GPU machine that has torch but not Ray,
# Optuna or MLflow: the tests marked `gpu` (CUDA precision, batch-size probes, the worker loop on
# CUDA, bf16 / gradient checkpointing / FSDP units for text and RGB image models and for LoRA on a
# causal LM (4-bit where bitsandbytes is installed), and NCCL DDP/FSDP with 2 ranks where 2 GPUs
# exist). Run from anywhere: `bash tests/gpu/run_all.sh [pytest args]`. It prints what the
# machine has, then pytest's summary (skips with their reasons); the exit status is pytest's.
# OUT=<folder> also writes the JUnit XML report there.
set -uo pipefail
cd "$(dirname "$0")/../.."

python - <<'PY'
import importlib

import torch

print(f"torch {torch.__version__}, CUDA available: {torch.cuda.is_available()}, GPUs: {torch.cuda.device_count()}")
for i in range(torch.cuda.device_count()):
    print(f"  cuda:{i} {torch.cuda.get_device_name(i)}, bf16: {torch.cuda.is_bf16_supported()}")
for name in ("pytest", "pytest_timeout", "pandas", "pydantic", "yaml", "sklearn", "psutil", "transformers", "tokenizers", "peft", "bitsandbytes", "PIL"):
    try:
        mod = importlib.import_module(name)
        print(f"  {name} {getattr(mod, '__version__', '')}")
    except ImportError:
        print(f"  {name}: MISSING (tests that need it fail or skip)")
PY

args=(-m gpu -q -rs -p no:cacheprovider --continue-on-collection-errors)
# without pytest-timeout its `timeout` marker is unknown to --strict-markers: drop the project's addopts
python -c "import pytest_timeout" 2>/dev/null || args+=(-o addopts= -o timeout=0)
if [ -n "${OUT:-}" ]; then args+=(--junitxml "$OUT/gpu-tests.xml"); fi

HPO_GPU_ONLY=1 python -m pytest "${args[@]}" \
  tests/gpu \
  tests/integration/test_ddp.py \
  tests/unit/test_trainer_options.py \
  tests/unit/test_checkpoint.py \
  tests/unit/test_augment.py \
  "$@"
