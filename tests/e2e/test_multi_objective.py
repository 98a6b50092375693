"""End-to-end: a multi-objective sweep (NSGA-II on validation loss and ROC AUC) through the
real CLI on a real Ray cluster and MLflow store: the Pareto set in results.json, on the
console and in the report, and ``hpo report`` rebuilding it from MLflow alone."""

from __future__ import annotations

import json

import pytest

from ..conftest import ROOT
from .test_sweep_cli import SWEEP_TIMEOUT_S, run_cli

FIXTURE = ROOT / "tests" / "fixtures" / "multi_objective.yaml"
LOSS, AUC = "validation/malignant/loss", "validation/malignant/roc_auc"

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(SWEEP_TIMEOUT_S + 60)]


@pytest.fixture(scope="module")
def mo_sweep(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("multi-objective")
    proc = run_cli("sweep", str(FIXTURE), "--output", "results", cwd=cwd)
    assert proc.returncode == 0, f"sweep failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    out = cwd / "results" / "multi-objective"
    return proc, out, json.loads((out / "results.json").read_text())


def _non_dominated(points: dict[str, tuple[float, float]]) -> set[str]:
    """Trials no other trial beats on both (loss lower is better, AUC higher is better)."""

    def beats(a, b):
        return a[0] <= b[0] and a[1] >= b[1] and (a[0] < b[0] or a[1] > b[1])

    return {t for t, p in points.items() if not any(beats(q, p) for u, q in points.items() if u != t)}


def test_results_carry_the_objectives_and_a_true_pareto_set(mo_sweep):
    _, _, result = mo_sweep
    assert result["objectives"] == [LOSS, AUC]
    trials = result["trials"]
    assert len(trials) == 4 and all(t["status"] == "FINISHED" for t in trials)
    points = {t["trial_id"]: (t["history"][-1]["metrics"][LOSS], t["history"][-1]["metrics"][AUC]) for t in trials}
    pareto = result["pareto_trial_ids"]
    assert pareto and set(pareto) == _non_dominated(points)
    assert len(pareto) == len(set(pareto))


def test_console_prints_the_objectives_and_the_pareto_set(mo_sweep):
    proc, _, result = mo_sweep
    assert f"optimizing {LOSS} (minimize), {AUC} (maximize)" in proc.stdout
    assert f"pareto set on {LOSS}, {AUC}: {', '.join(result['pareto_trial_ids'])}" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_mlflow_parent_holds_the_trials_and_the_objectives(mo_sweep):
    from mlflow.tracking import MlflowClient

    _, out, result = mo_sweep
    client = MlflowClient(tracking_uri=f"sqlite:///{(out / 'mlflow.db').resolve()}")
    exp = client.get_experiment_by_name("multi-objective")
    runs = client.search_runs([exp.experiment_id])
    parent = next(r for r in runs if r.data.tags.get("run_kind") == "sweep")
    trials = [r for r in runs if r.data.tags.get("run_kind") == "trial"]
    assert sorted(r.data.tags["trial_id"] for r in trials) == sorted(t["trial_id"] for t in result["trials"])
    assert all(r.data.tags["mlflow.parentRunId"] == parent.info.run_id for r in trials)
    assert json.loads(parent.data.tags["objectives"]) == [
        {"metric": LOSS, "goal": "minimize"},
        {"metric": AUC, "goal": "maximize"},
    ]
    for r in trials:
        assert {LOSS, AUC} <= set(r.data.metrics)


def _front_in_report(html: str) -> list[str]:
    """The trial ids on the "Pareto front" trace of the report's Objectives figure."""
    assert "<h2>Objectives</h2>" in html and f"Each trial's {LOSS} against its {AUC}" in html
    start = html.index("Plotly.newPlot(", html.index('id="pareto-front"'))
    traces, _ = json.JSONDecoder().raw_decode(html, html.index("[", start))
    (front,) = [t for t in traces if t.get("name") == "Pareto front"]
    return front["customdata"]


def test_report_draws_the_objectives_with_the_pareto_front(mo_sweep):
    _, out, result = mo_sweep
    assert sorted(_front_in_report((out / "report.html").read_text())) == sorted(result["pareto_trial_ids"])


def test_hpo_report_rebuilt_from_mlflow_keeps_the_objectives(mo_sweep, tmp_path):
    from dashboards.mlflow_source import load_sweep_result
    from ludwig_hpo.tracking.resolve import existing_store_uri

    _, out, result = mo_sweep
    rebuilt = load_sweep_result(existing_store_uri(out), output_dir=out)
    assert rebuilt.objectives == (LOSS, AUC)
    assert set(rebuilt.pareto_trial_ids) == set(result["pareto_trial_ids"])
    proc = run_cli("report", str(out), "--output", str(tmp_path / "rebuilt"), cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    front = _front_in_report((tmp_path / "rebuilt" / "report.html").read_text())
    assert sorted(front) == sorted(result["pareto_trial_ids"])
