"""The report's table of generated outputs: an llm trial's sample travels from its epoch report
(the trial book, the MLflow run's artifact, results.json) to the report, which shows the best
trials' rows escaped, and nothing for a sweep without generated outputs."""

from __future__ import annotations

import json
from pathlib import Path

from dashboards import build_report
from dashboards.generated import GENERATED_METRICS, generated_info, generated_trial_ids
from dashboards.mlflow_source import load_sweep_report, load_sweep_result
from dashboards.report import GENERATED_ID
from ludwig_hpo.results import EpochRecord, SweepResult, TrialRecord
from ludwig_hpo.results.io import read_result, write_result
from ludwig_hpo.results.live import LiveTrial
from ludwig_hpo.results.records import GeneratedOutput, parse_generated
from ludwig_hpo.tracking import layout as L
from ludwig_hpo.train.report_keys import GENERATED_FIELDS, GENERATED_SAMPLE, OBJECTIVE, TIME_ATTR

EVIL = "<script>alert(1)</script>"
EVIL_ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
METRIC = "validation/gloss/loss"


def _sample(tid: str, n: int = 7) -> tuple[GeneratedOutput, ...]:
    return tuple(
        GeneratedOutput(f"define {tid}-{i}:", f"a gloss {i}", f"a gloss {i}" if i % 2 else "other") for i in range(n)
    )


def _trial(tid: str, loss: float, generated: tuple[GeneratedOutput, ...] = ()) -> TrialRecord:
    metrics = {METRIC: loss, "validation/gloss/exact_match": 0.5, "validation/gloss/rouge_l": 0.75}
    history = (EpochRecord(1, loss + 0.1, {**metrics, METRIC: loss + 0.1}), EpochRecord(2, loss, metrics))
    return TrialRecord(tid, "FINISHED", {"adapter.r": 8}, loss, loss, history, batch_size=4, generated=generated)


def _sweep(trials: list[TrialRecord]) -> SweepResult:
    best = min(trials, key=lambda t: t.objective_best or 0.0)
    return SweepResult("lora", METRIC, "minimize", (), tuple(trials), best_trial_id=best.trial_id, wall_time_s=10.0)


def test_the_best_three_trials_with_outputs_best_first():
    trials = [
        _trial("t0", 0.5, _sample("t0")),
        _trial("t1", 0.2, _sample("t1")),
        _trial("t2", 0.9, _sample("t2")),
        _trial("t3", 0.3),  # kept no outputs: skipped, its rank stays its own
        _trial("t4", 0.4, _sample("t4")),
    ]
    info = generated_info(_sweep(trials))
    assert info is not None and info.metric == METRIC
    assert [(v.rank, v.trial_id) for v in info.trials] == [(1, "t1"), (3, "t4"), (4, "t0")]
    first = info.trials[0]
    assert first.objective == "0.2"
    assert first.scores == (("validation/gloss/exact_match", "0.5"), ("validation/gloss/rouge_l", "0.75"))
    assert len(first.rows) == 5  # a few rows per trial
    assert [r.exact for r in first.rows] == [False, True, False, True, False]
    assert first.rows[1].prompt == "define t1-1:" and first.rows[1].reference == "a gloss 1"


def test_no_section_without_generated_outputs(tmp_path):
    result = _sweep([_trial("t0", 0.5), _trial("t1", 0.4)])
    assert generated_info(result) is None
    page = build_report(result, tmp_path / "report.html", tmp_path / "hiplot.html").read_text(encoding="utf-8")
    assert f'id="{GENERATED_ID}"' not in page and "Generated outputs" not in page


def test_the_table_escapes_every_text(tmp_path):
    row = GeneratedOutput(f"prompt {EVIL}", f"ref {EVIL}", f"said {EVIL} & more")
    result = _sweep([_trial("t0", 0.5, (row,)), _trial("t1", 0.6, _sample("t1"))])
    page = build_report(result, tmp_path / "report.html", tmp_path / "hiplot.html").read_text(encoding="utf-8")
    assert f'id="{GENERATED_ID}"' in page
    assert EVIL not in page
    assert f"prompt {EVIL_ESCAPED}" in page and f"ref {EVIL_ESCAPED}" in page
    assert f"said {EVIL_ESCAPED} &amp; more" in page
    assert "define t1-0:" in page  # the second trial's table


def test_the_sample_text_round_trips_through_the_record_and_results_json(tmp_path):
    rows = _sample("t0", 3)
    text = json.dumps([dict(zip(GENERATED_FIELDS, (r.prompt, r.reference, r.generated), strict=True)) for r in rows])
    assert parse_generated(text) == rows
    for bad in (None, "", "not json", '[{"prompt": "p"}]', "{}", "[1]"):
        assert parse_generated(bad) == ()
    live = LiveTrial("t0", {}, {}, "trial_t0", history=[EpochRecord(1, 0.5, {METRIC: 0.5})], generated=text)
    record = live.record(1.0)
    assert record.generated == rows
    write_result(_sweep([record]), tmp_path / "results.json")
    assert read_result(tmp_path / "results.json").trials[0].generated == rows


class _Store:
    """The part of the tracking store the sink writes a trial's run with."""

    def __init__(self):
        self.texts: list[tuple[str, str, str]] = []

    def start_run(self, name, parent_id=None, tags=None, params=None):
        return "run-1"

    def log_text(self, run_id, text, name):
        self.texts.append((run_id, text, name))

    def log_steps(self, run_id, params=None, tags=None, metrics=None):
        pass


def test_the_sink_logs_the_best_epochs_sample_as_the_runs_artifact():
    from ludwig_hpo.tracking.sink import MlflowSink

    store = _Store()
    sink = MlflowSink(store, "parent")
    t = LiveTrial("t0", {}, {}, "trial_t0")
    sink.trial_started(t)
    for epoch, sample in ((1, '[{"prompt": "p", "reference": "r", "generated": "g1"}]'), (2, None)):
        t.history.append(EpochRecord(epoch, 0.5, {}))
        result = {TIME_ATTR: epoch, OBJECTIVE: 0.5, **({GENERATED_SAMPLE: sample} if sample else {})}
        sink.trial_result(t, result)
    sink.flush()
    assert store.texts == [
        ("run-1", '[{"prompt": "p", "reference": "r", "generated": "g1"}]', L.GENERATED_SAMPLE_ARTIFACT)
    ]


def _write_llm_store(root: Path) -> str:
    """Four llm trials in a SQLite store, each with its generated sample artifact but t3."""
    from ludwig_hpo.tracking.mlflow_store import MlflowStore

    uri = f"sqlite:///{(root / 'mlflow.db').resolve()}"
    store = MlflowStore(uri, "lora", artifact_location=root / "mlartifacts")
    parent = store.start_run("lora-20260101-120000", params={L.METRIC_PARAM: METRIC, L.GOAL_PARAM: "minimize"})
    for i, loss in enumerate((0.5, 0.2, 0.9, 0.3)):
        tid = f"t{i}"
        run = store.start_run(
            L.trial_run_name(tid), parent_id=parent, tags={L.TRIAL_ID_TAG: tid}, params={"adapter.r": 4}
        )
        metrics = {METRIC: loss, **{f"validation/gloss/{m}": 0.5 for m in GENERATED_METRICS}}
        store.log_metrics(run, metrics, step=1)
        if tid != "t3":
            rows = [{"prompt": f"{tid} {EVIL}", "reference": "r", "generated": "r"}]
            store.log_text(run, json.dumps(rows), L.GENERATED_SAMPLE_ARTIFACT)
        store.set_tags(run, {L.STATUS_TAG: "FINISHED"})
        store.end_run(run, "FINISHED")
    store.end_run(parent, "FINISHED")
    return uri


def test_a_report_rebuilt_from_mlflow_reads_the_best_trials_samples(tmp_path):
    uri = _write_llm_store(tmp_path)
    result = load_sweep_result(uri, experiment="lora")
    assert generated_trial_ids(result) == ["t1", "t3", "t0"]
    by_id = {t.trial_id: t.generated for t in result.trials}
    assert by_id["t1"] == (GeneratedOutput(f"t1 {EVIL}", "r", "r"),)
    assert by_id["t0"] and not by_id["t3"]
    assert by_id["t2"] == ()  # not among the best three: not fetched
    again, run_ids = load_sweep_report(uri, experiment="lora")
    assert again.trials == result.trials and set(run_ids.by_trial) == {"t0", "t1", "t2", "t3"}
    info = generated_info(result)
    assert info is not None and [v.trial_id for v in info.trials] == ["t1", "t0"]


def test_a_sweep_without_generated_metrics_fetches_nothing():
    plain = [TrialRecord("a", "FINISHED", {}, 0.1, 0.1, (EpochRecord(1, 0.1, {METRIC: 0.1}),))]
    assert generated_trial_ids(_sweep(plain)) == []
