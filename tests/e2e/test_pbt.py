"""PBT end to end: a real population on a Ray local cluster (pooled 1-worker trials), real
MLflow. Trials exploit each other (Tune's PBT log says so), continue from the cloned
checkpoint, and record their changed parameters per step, never as a changed param."""

from __future__ import annotations

import json

import pytest
import yaml

from ..conftest import SWEEPS
from .test_sweep_cli import SWEEP_TIMEOUT_S, run_cli

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(SWEEP_TIMEOUT_S + 60)]


@pytest.fixture(scope="module")
def pbt_sweep(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("pbt")
    raw = yaml.safe_load((SWEEPS / "breast_cancer_pbt.yaml").read_text())
    raw["trainer"]["epochs"] = 6  # 4 trials x 6 epochs, perturbed every epoch: several exploits
    raw["hyperopt"]["scheduler"].update(perturbation_interval=1, quantile_fraction=0.5)
    raw["hyperopt"]["executor"]["num_samples"] = 4
    raw["kfold"] = {"k": 2, "top_k": 1}
    raw["report"] = {"enabled": False}
    (cwd / "pbt.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    proc = run_cli("sweep", "pbt.yaml", "--output", "r", cwd=cwd)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return proc, cwd / "r" / "breast-cancer-pbt"


def test_trials_exploit_each_other_and_log_their_schedule(pbt_sweep):
    from mlflow.tracking import MlflowClient

    proc, out = pbt_sweep
    assert "trial executor: pooled" in proc.stdout
    exploits = [json.loads(line) for line in (out / "ray" / "search" / "pbt_global.txt").read_text().splitlines()]
    assert exploits, "PBT never exploited"
    client = MlflowClient(tracking_uri=f"sqlite:///{(out / 'mlflow.db').resolve()}")
    exp = client.get_experiment_by_name("breast-cancer-pbt")
    trials = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("run_kind") == "trial"]
    assert len(trials) == 4 and all(r.info.status == "FINISHED" for r in trials)
    mutated = [r for r in trials if any(k.startswith("hparam.") for k in r.data.tags)]
    assert mutated
    for r in trials:
        # params stay the sampled ones; PBT's changes are per-step metrics and tags
        assert set(r.data.params) == {"trainer.learning_rate", "trainer.optimizer.weight_decay", "combiner.dropout"}
        steps = {m.step for m in client.get_metric_history(r.info.run_id, "validation/malignant/loss")}
        assert steps == set(range(1, 7))
    for r in mutated:
        lr = client.get_metric_history(r.info.run_id, "hparam/trainer.learning_rate")
        assert len({m.value for m in lr}) >= 2  # the schedule: the sampled value, then the new one
        assert int(r.data.tags["resumed_from_epoch"]) >= 1  # it continued from a cloned checkpoint

    result = json.loads((out / "results.json").read_text())
    assert len(result["trials"]) == 4 and result["best_trial_id"]
    assert (out / "best_model" / "model.pt").is_file()
    assert "PBT trials are re-evaluated with the parameters they ended with" in proc.stdout
    assert len(result["kfold"]) == 1
