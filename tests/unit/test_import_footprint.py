"""What each process of a sweep imports: the commands that train nothing and the processes
that only pass trials on stay free of Ray, torch and the data stack they do not use.

Each case runs in a fresh interpreter (a subprocess), since this test process has imported
everything already, and reads ``sys.modules`` there after the work is done.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT

HEAVY = ("ray", "torch", "mlflow", "transformers", "optuna", "sklearn", "scipy", "pandas")
#: Upper bound that catches a hung interpreter, not a speed figure.
TIMEOUT_S = 120


def _imported_after(code: str) -> set[str]:
    """The :data:`HEAVY` top-level packages imported once ``code`` has run in a fresh interpreter."""
    probe = textwrap.dedent(code) + textwrap.dedent(
        f"""
        import json as _json, sys as _sys
        print("MODULES=" + _json.dumps(sorted(m for m in {HEAVY!r} if m in _sys.modules)))
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSTARTUP"}
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = [ln for ln in done.stdout.splitlines() if ln.startswith("MODULES=")][-1]
    return set(json.loads(line.removeprefix("MODULES=")))


def _cli(*args: str, cwd: str | None = None) -> str:
    return textwrap.dedent(
        f"""
        import os, sys
        from ludwig_hpo.cli import app
        os.chdir({cwd!r} or os.getcwd())
        sys.argv = ["hpo", *{list(args)!r}]
        try:
            app()
        except SystemExit as e:
            assert e.code in (0, None), e.code
        """
    )


def test_hpo_schema_imports_no_ray_torch_or_mlflow():
    assert _imported_after(_cli("schema")) & {"ray", "torch", "mlflow", "transformers", "optuna"} == set()


def test_hpo_validate_imports_no_ray_torch_mlflow_or_scikit_learn(tmp_path):
    # the file reads sklearn:breast_cancer, splits it stratified and cuts k folds: all in NumPy
    imported = _imported_after(_cli("validate", str(ROOT / "sweeps" / "breast_cancer.yaml"), cwd=str(tmp_path)))
    assert imported & {"ray", "torch", "mlflow", "transformers", "optuna", "sklearn", "scipy"} == set()


def test_processes_that_pass_trials_on_import_no_torch_or_data_stack():
    # the Tune trial actor, the warm pools' actor, the batch-size cache actor and the MLflow
    # store process import these modules (their classes and functions) and nothing that trains
    imported = _imported_after(
        """
        import ludwig_hpo.execution.trainable, ludwig_hpo.execution.pool, ludwig_hpo.execution.cache
        import ludwig_hpo.execution.pool_worker, ludwig_hpo.tracking.process
        """
    )
    assert imported & {"torch", "pandas", "sklearn", "transformers", "mlflow"} == set()


def test_the_pools_actor_builds_streamed_feeds_without_torch():
    # a streamed sweep's pools actor cuts the ranks' shards (stream_shards); only a rank's own
    # stream of its shard (job_stream) makes tensors
    imported = _imported_after("import ludwig_hpo.execution.stream_shards, ludwig_hpo.execution.pool_stream")
    assert "torch" not in imported


def test_prepared_data_unpickles_without_scikit_learn():
    # trial workers unpickle the prepared data (its module) but never split it
    assert "sklearn" not in _imported_after("import ludwig_hpo.data.preprocess, ludwig_hpo.train.job")


def test_counting_no_gpu_imports_no_torch():
    from ludwig_hpo.execution.cluster import may_have_gpus

    if may_have_gpus():
        pytest.skip("this machine has a GPU driver: torch counts its GPUs")
    code = "from ludwig_hpo.execution.cluster import local_resources\nassert local_resources()[1] == 0\n"
    assert "torch" not in _imported_after(code)


def test_a_tuned_batch_size_entry_unpickles_without_torch(tmp_path, monkeypatch):
    # the batch-size cache actor unpickles every entry a trial puts: a torch object in it (e.g.
    # torch.__version__, a TorchVersion) would make that actor import torch
    import pickle

    from ludwig_hpo.config import load_sweep
    from ludwig_hpo.config.loader import resolve_trial_config
    from ludwig_hpo.data import load_dataframe, prepare
    from ludwig_hpo.train.batch_size import MemoryCache
    from ludwig_hpo.train.loop import Job, train_loop

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    loaded = load_sweep(ROOT / "sweeps" / "breast_cancer_tiny.yaml")
    cfg = resolve_trial_config({**loaded.raw, "trainer": {**loaded.raw["trainer"], "epochs": 1}}, {})
    assert cfg.trainer.batch_size == "auto"
    cache = MemoryCache()
    train_loop(
        cfg, prepare(load_dataframe(cfg.dataset.source, loaded.base_dir), cfg), Job(), lambda m, c: None, cache=cache
    )
    assert cache.entries
    blob = pickle.dumps(cache.entries)
    assert "torch" not in _imported_after(f"import pickle\npickle.loads({blob!r})\n")


def test_tunes_callback_usage_tag_imports_no_mlflow_into_the_driver():
    # Tune's run() counts the callbacks it is given through this function, whose imports
    # include Ray's MLflow integration (which imports MLflow); the sweep's driver turns it off
    import inspect

    from ray.tune import tune

    assert "air_usage.tag_callbacks(callbacks)" in inspect.getsource(tune.run)
    count = "from ray.air._internal import usage\nfrom ray.tune import Callback\n"
    quiet = "from ludwig_hpo.execution.cluster import no_callback_usage_tag\n"
    assert "mlflow" not in _imported_after(
        count + quiet + "with no_callback_usage_tag():\n    usage.tag_callbacks([Callback()])\n"
    )
    assert "mlflow" in _imported_after(count + "usage.tag_callbacks([Callback()])\n")  # what it prevents
