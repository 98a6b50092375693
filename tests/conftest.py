"""Shared test set-up: the repository root, the ``gpu`` marker's skip, and hygiene checks."""

from __future__ import annotations

import io
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SWEEPS = ROOT / "sweeps"

# Tests reach no network beyond loopback: MLflow's usage telemetry stays off (it would also
# start a thread and set a session variable at the first MLflow client, whichever test that is).
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
# Sweeps persist tuned batch sizes in the user's cache folder: the tests' go to a temporary one.
os.environ.setdefault("LUDWIG_HPO_CACHE_DIR", tempfile.mkdtemp(prefix="hpo-test-cache-"))


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    # HPO_GPU_ONLY=1 runs only gpu-marked tests (scarce GPU time is not spent on CPU tests).
    gpu_only = os.environ.get("HPO_GPU_ONLY") == "1"
    has_cuda = _has_cuda()
    for item in items:
        is_gpu = "gpu" in item.keywords
        if is_gpu and not has_cuda:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
        elif gpu_only and not is_gpu:
            item.add_marker(pytest.mark.skip(reason="HPO_GPU_ONLY=1 runs only gpu tests"))


@pytest.fixture(autouse=True)
def _no_leaked_env():
    """Fail a test that leaves environment variables changed (Ray settings leak easily).
    ``KMP_*`` are set by torch's OpenMP runtime on its first import, ``TORCHINDUCTOR_*`` by the
    first step of a torch optimizer that imports its compiler, ``RAY_CLIENT_MODE`` by the first
    ``import ray``, whichever test that is."""
    before = dict(os.environ)
    yield
    after = dict(os.environ)
    changed = sorted(
        k
        for k in set(before) | set(after)
        if before.get(k) != after.get(k)
        and not k.startswith(("PYTEST_", "COV_", "KMP_", "TORCHINDUCTOR_"))
        and k != "RAY_CLIENT_MODE"
    )
    assert not changed, f"test leaked environment variables: {changed}"


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory) -> Path:
    """A tiny random BERT model folder with its WordPiece tokenizer (see tests/hf_models.py)."""
    from tests.hf_models import save_tiny_bert

    return save_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="session")
def tiny_distilbert_dir(tmp_path_factory) -> Path:
    """A tiny random DistilBERT model folder (no pooler) with its tokenizer."""
    from tests.hf_models import save_tiny_distilbert

    return save_tiny_distilbert(tmp_path_factory.mktemp("tiny-distilbert"))


@pytest.fixture(scope="session")
def tiny_vit_dir(tmp_path_factory) -> Path:
    """A tiny random ViT model folder (32x32 RGB, 8x8 patches) with its image processor."""
    from tests.hf_models import save_tiny_vit

    return save_tiny_vit(tmp_path_factory.mktemp("tiny-vit"))


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory) -> Path:
    """A tiny random Llama causal LM folder with its byte-level BPE tokenizer (see tests/hf_models.py)."""
    from tests.hf_models import save_tiny_llama

    return save_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture
def ray_data_console() -> Iterator[io.StringIO]:
    """What Ray Data's console handler writes, while the test runs (it keeps the stream it was
    made with, which under pytest may be an earlier test's capture)."""
    import ray.data  # noqa: F401 (configures the handler)

    handlers = [h for h in logging.getLogger("ray.data").handlers if type(h).__name__ == "PlainRayHandler"]
    assert handlers
    out = io.StringIO()
    before = [h.setStream(out) for h in handlers]
    yield out
    for h, stream in zip(handlers, before, strict=True):
        h.setStream(stream)
