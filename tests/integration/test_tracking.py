"""What the sweep's MLflow runs hold, written through the real store (an SQLite file) by
:class:`SweepMonitor` + :class:`MlflowSink` fed with stand-in Tune trials; and the best
model logged in MLflow's PyTorch flavour. No Ray."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np
import pytest

from ludwig_hpo.driver.monitor import SweepMonitor
from ludwig_hpo.results.live import TrialDescription
from ludwig_hpo.results.ranking import asha_rungs
from ludwig_hpo.tracking.mlflow_store import MlflowStore
from ludwig_hpo.tracking.sink import MlflowSink


@dataclass
class FakeTrial:
    trial_id: str
    config: dict = field(default_factory=dict)
    error: str | None = None
    error_file: str | None = None

    def get_error(self):
        return self.error


@pytest.fixture
def store(tmp_path):
    return MlflowStore(f"sqlite:///{tmp_path / 'mlflow.db'}", "unit", artifact_location=tmp_path / "art")


#: The sweep's metric in these runs: the objective copies it.
METRIC = "validation/y/loss"


def monitor(store, parent, epochs=3, rungs=(1, 3), resume=False):
    sink = MlflowSink(
        store,
        parent,
        config_text=lambda p: f"lr: {p['trainer.learning_rate']}\n",
        rungs=rungs,
        objective_key=METRIC,
        resume=resume,
    )
    mon = SweepMonitor(
        epochs=epochs,
        goal_sign=1.0,
        sinks=[sink],
        describe=lambda tid, cfg: TrialDescription(dict(cfg), {"phase": "search"}, f"trial_{tid}"),
        objective_key=METRIC,
    )
    return mon, sink


def result(epoch, objective, **extra):
    return {
        "epoch": epoch,
        "objective": objective,
        "validation/y/loss": objective,
        "validation/combined/loss": objective,  # one output feature: the same curve again
        "validation/y/accuracy": 1.0 - objective / 10,
        "batch_size": 16,
        "global_batch_size": 32,
        "eval_batch_size": 64,
        "world_size": 2,
        "train_time_s": 3.0 * epoch,
        "eval_time_s": 1.0 * epoch,
        "setup_time_s": 0.5,
        "batch_size_tuning_s": 2.0,
        "effective_learning_rate": 0.01,
        "trial_id": "ignored-string",
        "pid": 123,
        "done": False,
        **extra,
    }


def run_of(store, sink, tid):
    sink.flush()  # the sink writes in the background
    return store.client.get_run(sink.run_id(tid))


def test_finished_trial_run_holds_declared_params_tags_config_metrics_and_time_split(store):
    parent = store.start_run("sweep", tags={"run_kind": "sweep"})
    mon, sink = monitor(store, parent)
    t = FakeTrial("a", {"trainer.learning_rate": 0.01, "combiner.output_size": 8})
    mon.on_trial_start(0, [], t)
    for e in (1, 2, 3):
        mon.on_trial_result(0, [], t, result(e, 1.0 / e))
    mon.on_trial_complete(0, [], t)
    run = run_of(store, sink, "a")
    assert run.info.status == "FINISHED" and run.info.run_name == "trial_a"
    assert run.data.params == {"trainer.learning_rate": "0.01", "combiner.output_size": "8"}  # nothing else
    tags = run.data.tags
    assert tags["mlflow.parentRunId"] == parent and tags["trial_id"] == "a" and tags["run_kind"] == "trial"
    assert (tags["status"], tags["batch_size"], tags["global_batch_size"], tags["world_size"]) == (
        "FINISHED",
        "16",
        "32",
        "2",
    )
    history = store.client.get_metric_history(run.info.run_id, "validation/y/loss")
    assert [(m.step, m.value) for m in history] == [(1, 1.0), (2, 0.5), (3, pytest.approx(1 / 3))]
    assert [m.step for m in store.client.get_metric_history(run.info.run_id, "effective_learning_rate")] == [1, 2, 3]
    m = run.data.metrics
    assert "pid" not in m and "batch_size" not in m and "epoch" not in m
    # only per-step series: the objective under its own name once, no repeated combined loss,
    # no one-off figure as a chart
    assert set(m) == {"validation/y/loss", "validation/y/accuracy", "train_time_s", "effective_learning_rate"}
    for key in m:
        assert [h.step for h in store.client.get_metric_history(run.info.run_id, key)] == [1, 2, 3]
    times = {k: float(v) for k, v in tags.items() if k.startswith("time.")}
    assert (times["time.training_s"], times["time.evaluation_s"], times["time.batch_size_tuning_s"]) == (6.0, 3.0, 2.0)
    parts = sum(times[f"time.{k}_s"] for k in ("setup", "training", "evaluation", "batch_size_tuning"))
    assert parts == pytest.approx(max(times["time.total_s"], 11.0))
    assert "stopped_by" not in tags and "stopped_at_epoch" not in tags  # it ran every epoch
    # what the run holds is what the trial's record holds: the report rebuilt from MLflow matches
    assert set(mon.trials["a"].history[-1].metrics) == {"validation/y/loss", "validation/y/accuracy"}
    assert store.client.download_artifacts(run.info.run_id, "config.yaml")
    assert {a.path for a in store.client.list_artifacts(run.info.run_id)} == {"config.yaml"}


def test_a_sweep_of_the_combined_loss_with_one_output_feature_logs_that_curve_once(store):
    """The combined loss of one output feature is that feature's loss: the run holds it once,
    under the sweep's metric (which the report reads), in every split."""
    parent = store.start_run("sweep")
    sink = MlflowSink(store, parent, config_text=lambda p: "", objective_key="validation/combined/loss")
    mon = SweepMonitor(
        epochs=2,
        goal_sign=1.0,
        sinks=[sink],
        describe=lambda tid, cfg: TrialDescription(dict(cfg), {"phase": "search"}, f"trial_{tid}"),
        objective_key="validation/combined/loss",
    )
    t = FakeTrial("c", {"trainer.learning_rate": 0.01})
    mon.on_trial_start(0, [], t)
    for e in (1, 2):
        mon.on_trial_result(0, [], t, result(e, 1.0 / e, **{"train/y/loss": 2.0 / e, "train/combined/loss": 2.0 / e}))
    mon.on_trial_complete(0, [], t)
    run = run_of(store, sink, "c")
    scores = {k for k in run.data.metrics if k.count("/") == 2}
    assert scores == {"validation/combined/loss", "train/combined/loss", "validation/y/accuracy"}
    history = store.client.get_metric_history(run.info.run_id, "validation/combined/loss")
    assert [(m.step, m.value) for m in history] == [(1, 1.0), (2, 0.5)]
    assert set(mon.trials["c"].history[-1].metrics) == scores  # the record holds what the run holds


def test_early_stopped_trial_is_finished_with_its_rung_and_failed_trial_has_its_message_and_traceback(store, tmp_path):
    parent = store.start_run("sweep")
    mon, sink = monitor(store, parent, epochs=9, rungs=asha_rungs(1, 3, 9))
    k, f = FakeTrial("k", {"trainer.learning_rate": 0.1}), FakeTrial("f", {"trainer.learning_rate": 1e6})
    (tmp_path / "error.txt").write_text(
        "Traceback (most recent call last):\n  ...\nFloatingPointError: training loss is nan"
    )
    f.error_file = str(tmp_path / "error.txt")
    for t in (k, f):
        mon.on_trial_start(0, [], t)
    for e in (1, 2, 3):
        mon.on_trial_result(0, [], k, result(e, 5.0))
    mon.on_trial_complete(0, [], k)
    mon.on_trial_error(0, [], f)
    killed, failed = run_of(store, sink, "k"), run_of(store, sink, "f")
    assert (killed.info.status, killed.data.tags["status"]) == ("FINISHED", "FINISHED")  # it did nothing wrong
    assert (
        killed.data.tags["stopped_by"],
        killed.data.tags["stopped_at_epoch"],
        killed.data.tags["stopped_at_rung"],
    ) == ("scheduler", "3", "1")
    assert failed.info.status == "FAILED" and "stopped_by" not in failed.data.tags
    assert failed.data.tags["error"] == "FloatingPointError: training loss is nan"
    text = open(store.client.download_artifacts(failed.info.run_id, "error.txt")).read()
    assert text.startswith("Traceback")


def test_asha_rungs_match_tunes_brackets():
    from ray.tune.schedulers import AsyncHyperBandScheduler

    for grace, rf, max_t in [(1, 3, 2), (1, 3, 9), (2, 3, 10), (1, 2, 16), (2, 4, 40)]:
        sch = AsyncHyperBandScheduler(
            time_attr="epoch", metric="o", mode="min", max_t=max_t, grace_period=grace, reduction_factor=rf
        )
        tune_rungs = sorted(m for m, _ in sch._brackets[0]._rungs)
        assert asha_rungs(grace, rf, max_t) == tuple(tune_rungs), (grace, rf, max_t)


def test_pbt_mutations_are_metrics_and_tags_never_a_changed_param(store):
    parent = store.start_run("sweep")
    mon, sink = monitor(store, parent, epochs=4)
    t = FakeTrial("p", {"trainer.learning_rate": 0.01, "trainer.optimizer.type": "adam"})
    mon.on_trial_start(0, [], t)
    mon.on_trial_result(0, [], t, result(1, 1.0))
    mon.on_trial_result(0, [], t, result(2, 0.9))
    # PBT exploit: the trial is paused, gets a mutated config, and starts again
    t.config = {"trainer.learning_rate": 0.02, "trainer.optimizer.type": "sgd"}
    mon.on_trial_start(0, [], t)
    mon.on_trial_result(0, [], t, result(3, 0.8))
    t.config = {"trainer.learning_rate": 0.005, "trainer.optimizer.type": "sgd"}
    mon.on_trial_result(0, [], t, result(4, 0.7))
    mon.on_trial_complete(0, [], t)
    mon.flush()
    runs = store.client.search_runs([store.experiment_id], "tags.trial_id = 'p'")
    assert len(runs) == 1  # the restart did not open a second run
    run = runs[0]
    assert run.data.params == {"trainer.learning_rate": "0.01", "trainer.optimizer.type": "adam"}
    lr = store.client.get_metric_history(run.info.run_id, "hparam/trainer.learning_rate")
    assert [(m.step, m.value) for m in lr] == [(2, 0.01), (3, 0.02), (4, 0.005)]
    assert run.data.tags["hparam.trainer.optimizer.type"] == "sgd"
    assert run.data.tags["hparam.trainer.learning_rate"] == "0.005"
    assert run.info.status == "FINISHED"


def test_a_resumed_sweep_keeps_one_run_per_trial_and_logs_each_epoch_once(store):
    parent = store.start_run("sweep")
    mon, _ = monitor(store, parent)
    t = FakeTrial("r", {"trainer.learning_rate": 0.01})
    mon.on_trial_start(0, [], t)
    mon.on_trial_result(0, [], t, result(1, 1.0))
    mon.on_trial_result(0, [], t, result(2, 0.9))
    mon.flush()
    # the driver dies; a restored sweep replays the trial from its epoch-1 checkpoint
    mon2, sink2 = monitor(store, parent, resume=True)
    mon2.on_trial_start(0, [], t)
    for e in (2, 3):
        mon2.on_trial_result(0, [], t, result(e, 1.0 - e / 10))
    mon2.on_trial_complete(0, [], t)
    mon2.flush()
    runs = store.client.search_runs([store.experiment_id], "tags.trial_id = 'r'")
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    assert [m.step for m in store.client.get_metric_history(runs[0].info.run_id, METRIC)] == [1, 2, 3]
    # the restored record was behind the run (it holds no epoch): it takes epoch 1 back from the
    # run, and the continued trial's epochs 2 and 3 replace what the run held for them
    assert [h.epoch for h in mon2.trials["r"].history] == [1, 2, 3]
    assert mon2.trials["r"].history[0].objective == pytest.approx(1.0)


def test_a_trial_interrupted_then_finished_by_the_resumed_sweep_has_the_tags_of_its_final_end(store):
    parent = store.start_run("sweep")
    mon, _ = monitor(store, parent)
    t = FakeTrial("i", {"trainer.learning_rate": 0.01})
    mon.on_trial_start(0, [], t)
    mon.on_trial_result(0, [], t, result(1, 1.0))
    mon.close_running("interrupted")  # Ctrl-C
    mon.flush()
    run_id = mon.sinks[0].run_id("i")
    cut = store.client.get_run(run_id)
    assert cut.info.status == "KILLED"
    assert (cut.data.tags["stopped_by"], cut.data.tags["stopped_at_epoch"]) == ("interrupted", "1")
    mon2, _ = monitor(store, parent, resume=True)  # resumed: the trial continues and runs every epoch
    mon2.on_trial_start(0, [], t)
    for e in (2, 3):
        mon2.on_trial_result(0, [], t, result(e, 1.0 / e))
    mon2.on_trial_complete(0, [], t)
    mon2.flush()
    run = store.client.get_run(run_id)
    assert (run.info.status, run.data.tags["status"]) == ("FINISHED", "FINISHED")
    assert not {"stopped_by", "stopped_at_epoch", "stopped_at_rung"} & set(run.data.tags)
    assert [m.step for m in store.client.get_metric_history(run_id, METRIC)] == [1, 2, 3]


def _gate_end_run(store, monkeypatch) -> threading.Event:
    """Hold the store's ``end_run`` calls until the returned event is set."""
    gate, end_run = threading.Event(), store.end_run

    def held(run_id, status="FINISHED"):
        assert gate.wait(60), "end_run held for 60 s"
        end_run(run_id, status)

    monkeypatch.setattr(store, "end_run", held)
    return gate


def _in_thread(fn):
    done = threading.Event()
    threading.Thread(target=lambda: (fn(), done.set()), daemon=True).start()
    return done


def test_a_trials_end_is_queued_and_tunes_saved_state_waits_for_it(store, monkeypatch):
    parent = store.start_run("sweep")
    mon, sink = monitor(store, parent)
    gate = _gate_end_run(store, monkeypatch)
    t = FakeTrial("q", {"trainer.learning_rate": 0.01})
    mon.on_trial_start(0, [], t)
    for e in (1, 2, 3):
        mon.on_trial_result(0, [], t, result(e, 1.0 / e))
    assert _in_thread(lambda: mon.on_trial_complete(0, [], t)).wait(30)  # Tune's event loop goes on
    saved = _in_thread(mon.get_state)  # what Tune calls before it writes its experiment state
    assert not saved.wait(0.5)  # the state would hold the trial as ended: its run must be ended first
    assert store.client.get_run(sink.run_id("q")).info.status == "RUNNING"
    gate.set()
    assert saved.wait(30)
    assert store.client.get_run(sink.run_id("q")).info.status == "FINISHED"


def test_tunes_saved_state_does_not_wait_for_the_results_of_running_trials(store, monkeypatch):
    # Tune saves its state at every step of its loop for sweeps of up to 200 trials
    parent = store.start_run("sweep")
    mon, sink = monitor(store, parent)
    t = FakeTrial("w", {"trainer.learning_rate": 0.01})
    mon.on_trial_start(0, [], t)
    mon.flush()
    gate, log_steps = threading.Event(), store.log_steps

    def held(*args, **kwargs):
        assert gate.wait(60), "log_steps held for 60 s"
        log_steps(*args, **kwargs)

    monkeypatch.setattr(store, "log_steps", held)
    mon.on_trial_result(0, [], t, result(1, 0.5))
    assert _in_thread(mon.get_state).wait(30)  # no trial ended: nothing to wait for
    gate.set()
    mon.flush()
    assert [m.step for m in store.client.get_metric_history(sink.run_id("w"), METRIC)] == [1]


def test_a_resumed_sweep_completes_the_run_of_a_trial_whose_writes_were_still_queued(store, tmp_path, monkeypatch):
    from ludwig_hpo.driver.journal import JournalSink, read_journal

    parent = store.start_run("sweep")
    journal = tmp_path / "journal.jsonl"
    mon, sink = monitor(store, parent, rungs=(2,))
    mon.sinks.insert(0, JournalSink(journal))  # as the sweep orders them
    t = FakeTrial("j", {"trainer.learning_rate": 0.01})
    mon.on_trial_start(0, [], t)
    mon.flush()  # its run exists
    gate = _gate_end_run(store, monkeypatch)
    log_steps = store.log_steps
    monkeypatch.setattr(store, "log_steps", lambda *a, **k: (gate.wait(60), log_steps(*a, **k)))
    for e in (1, 2):
        mon.on_trial_result(0, [], t, result(e, 1.0 / e))
    mon.on_trial_complete(0, [], t)  # stopped by ASHA at epoch 2; the journal holds it
    # the driver dies with the trial's writes queued, before Tune saves its state again
    run_id = sink.run_id("j")
    assert store.client.get_run(run_id).info.status == "RUNNING"
    assert store.client.get_metric_history(run_id, METRIC) == []
    monkeypatch.undo()
    mon2, _ = monitor(store, parent, rungs=(2,), resume=True)
    mon2.ended_outside_state = read_journal(journal)
    mon2.set_state({"trials": {}})  # Tune's last saved state did not hold the trial
    mon2.flush()
    run = store.client.get_run(run_id)
    assert run.info.status == "FINISHED"  # stopped early by the scheduler
    assert (run.data.tags["status"], run.data.tags["stopped_by"], run.data.tags["stopped_at_rung"]) == (
        "FINISHED",
        "scheduler",
        "0",
    )
    history = store.client.get_metric_history(run_id, "validation/y/loss")
    assert [(m.step, m.value) for m in history] == [(1, 1.0), (2, 0.5)]
    assert store.client.get_metric_history(run_id, "objective") == []  # the same values as validation/y/loss
    assert run.data.tags["time.training_s"] == "4.0" and "time.total_s" in run.data.tags
    assert not store.close_running_children(parent, {"stopped_by": "interrupted"})  # nothing left RUNNING
    gate.set()  # the dead driver's writer thread


def test_best_model_loads_with_mlflow_pytorch_and_predicts_despite_inherited_run_id(store, tmp_path, monkeypatch):
    import mlflow.pytorch
    import torch

    from ludwig_hpo.config.schema import SweepConfig
    from ludwig_hpo.data import load_dataframe, prepare
    from ludwig_hpo.model import build_model
    from ludwig_hpo.model.serving import FlatInputModel, flat_inputs
    from ludwig_hpo.tracking.models import log_pytorch_model

    cfg = SweepConfig.model_validate(
        {
            "name": "unit",
            "dataset": {"source": "sklearn:breast_cancer"},
            "input_features": [{"name": "mean_radius", "type": "number"}, {"name": "mean_texture", "type": "number"}],
            "output_features": [{"name": "malignant", "type": "binary"}],
            "hyperopt": {
                "parameters": {"trainer.learning_rate": {"space": "loguniform", "lower": 1e-4, "upper": 1e-2}}
            },
        }
    )
    data = prepare(load_dataframe("sklearn:breast_cancer", tmp_path), cfg)
    torch.manual_seed(0)
    model = build_model(cfg, data.meta)
    flat = FlatInputModel(model, data.meta, ["malignant"])
    test_rows = data.splits["test"]
    parent = store.start_run("sweep")
    outer = store.start_run("someone else's run")
    monkeypatch.setenv("MLFLOW_RUN_ID", outer)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'other.db'}")
    logged = log_pytorch_model(
        store,
        parent,
        flat,
        flat_inputs(data.inputs, test_rows[:5], model.input_names, data.meta),
        register_as="unit-best",
    )
    assert logged.uri == f"models:/{logged.model_id}" and logged.version == "1"
    assert not store.client.list_artifacts(outer)
    # an MLflow logged model, output of the parent run: MLflow's model views list it
    (listed,) = store.client.search_logged_models(experiment_ids=[store.experiment_id])
    assert (listed.model_id, listed.name, listed.source_run_id, str(listed.status)) == (
        logged.model_id,
        "model",
        parent,
        "READY",
    )
    assert [o.model_id for o in store.client.get_run(parent).outputs.model_outputs] == [logged.model_id]
    assert {a.path for a in store.client.list_logged_model_artifacts(logged.model_id)} >= {
        "MLmodel",
        "input_example.json",
    }
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store.uri)
    assert mlflow.models.get_model_info(logged.uri).model_id == logged.model_id
    assert mlflow.pytorch.load_model(f"runs:/{parent}/model") is not None  # the run's path to it
    loaded = mlflow.pytorch.load_model(logged.uri)
    x = flat_inputs(data.inputs, test_rows, model.input_names, data.meta)
    probs = loaded(torch.tensor(x.to_numpy(np.float32))).detach().numpy()
    with torch.no_grad():
        expected = torch.sigmoid(
            model({k: torch.from_numpy(v[test_rows]) for k, v in data.inputs.items()})["malignant"]
        )
    assert probs.shape == (len(test_rows), 1)
    np.testing.assert_allclose(probs[:, 0], expected.numpy(), rtol=1e-6)
    served = mlflow.pyfunc.load_model(logged.uri).predict(x)  # what `mlflow models serve` runs
    np.testing.assert_allclose(served.to_numpy()[:, 0], expected.numpy(), rtol=1e-6)
    info = mlflow.models.get_model_info(logged.uri)
    assert [c.name for c in info.signature.inputs.inputs] == ["mean_radius", "mean_texture"]
    assert [c.name for c in info.signature.outputs.inputs] == ["malignant"]
    version = store.client.get_model_version("unit-best", "1")
    assert (version.run_id, version.source) == (parent, listed.artifact_location)
