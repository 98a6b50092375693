"""Resume of a streamed sweep for real: a sweep reading a folder of Parquet files through Ray
Data (2 gloo ranks on a warm worker group) is killed with SIGKILL, whole process group, once a
trial has ended and another is mid-way with a checkpoint Tune's saved state knows; the same
command then fits the files again on a new cluster, rebuilds the ranks' pipelines and finishes:
every trial complete, none run twice, the interrupted one continued from its checkpoint on
equal rank shards, and the fitted preprocessing is the one the trials before the kill trained
with."""

from __future__ import annotations

import json
import os
import queue
import re
import threading
import time

import numpy as np
import pytest
import yaml

from ludwig_hpo.config import load_sweep
from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data import load_dataframe, prepare
from ludwig_hpo.train.plan import batches_per_epoch

from ..conftest import SWEEPS
from .test_resume import _client, _kill_session, _known_checkpoint, _start_sweep
from .test_sweep_cli import SWEEP_TIMEOUT_S, run_cli

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(2 * SWEEP_TIMEOUT_S + 120)]

STARTED = re.compile(r"trial_(\w+) started \(")
ENDED = re.compile(r"trial_(\w+) (?:completed|finished|stopped early|failed)")
METRIC = "validation/malignant/roc_auc"
#: Enough epochs that a trial writes checkpoints well before its last epoch.
EPOCHS = 6
TRIALS = 3
BATCH = 32


def _streamed_sweep(folder) -> tuple[dict, SweepConfig]:
    """The tiny sweep's rows with a fixed ``split`` column as three Parquet files under
    ``folder/rows`` (and as one file, for the in-memory fit); (streamed sweep mapping,
    the same sweep's config on the single file)."""
    loaded = load_sweep(SWEEPS / "breast_cancer_tiny.yaml")
    df = load_dataframe(loaded.config.dataset.source, loaded.base_dir)
    df["split"] = np.random.default_rng(7).choice(3, size=len(df), p=[0.7, 0.15, 0.15])
    (folder / "rows").mkdir()
    for i, part in enumerate(np.array_split(np.arange(len(df)), 3)):
        df.iloc[part].to_parquet(folder / "rows" / f"part-{i}.parquet")
    df.to_parquet(folder / "rows.parquet")
    raw = {k: v for k, v in loaded.raw.items() if k not in ("kfold", "dataset")}
    raw["preprocessing"] = {"split": {"type": "fixed", "column": "split"}}
    raw["trainer"] = {**raw["trainer"], "epochs": EPOCHS, "batch_size": BATCH}
    # half a CPU per rank: the 2 ranks leave a CPU of 2 to Ray Data's read and map tasks
    raw["backend"] = {"num_workers": 2, "cpus_per_worker": 0.5}
    raw["hyperopt"] = {
        **raw["hyperopt"],
        "scheduler": {"type": "fifo"},  # no trial stops early at a rung, under the kill
        "executor": {"num_samples": TRIALS, "max_concurrent_trials": 1},
    }
    raw["report"] = {"enabled": False}
    memory = SweepConfig.model_validate({**raw, "dataset": {"source": str(folder / "rows.parquet")}})
    return {**raw, "dataset": {"source": "rows"}}, memory


def _mid_checkpoint(out, trial_id: str) -> int | None:
    """The epoch of the checkpoint Tune's saved state names for running trial ``trial_id`` when
    it is before the last epoch (the trial continues from it after the kill), else None."""
    import torch

    from ludwig_hpo.train.checkpoint import unpack
    from ludwig_hpo.train.report_keys import TRAINER_STATE_FILE

    folder = _known_checkpoint(out, trial_id)
    try:
        state = torch.load(folder / TRAINER_STATE_FILE, weights_only=False) if folder else None
        epoch = int(unpack(state["packed"])["epoch"]) if state else EPOCHS
    except Exception:  # a checkpoint replaced by the next one; look again
        return None
    return epoch if epoch < EPOCHS else None


def test_a_streamed_sweep_killed_with_sigkill_resumes_on_the_same_preprocessing(tmp_path):
    streamed, memory = _streamed_sweep(tmp_path)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump(streamed, sort_keys=False))
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID")}
    proc = _start_sweep(sweep, tmp_path, env)
    out = tmp_path / "r" / "breast-cancer-tiny"
    seen: list[str] = []
    started: list[str] = []
    ended: set[str] = set()
    caught = None
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(ln) for ln in proc.stdout], daemon=True).start()
    try:
        deadline = time.time() + SWEEP_TIMEOUT_S
        while time.time() < deadline and caught is None:
            try:
                line = lines.get(timeout=0.05)
                seen.append(line)
                started += STARTED.findall(line)
                ended.update(ENDED.findall(line))
            except queue.Empty:
                if proc.poll() is not None:
                    break
            if ended:  # a trial ended; kill once a running one has a checkpoint Tune's state knows
                caught = next(((t, e) for t in started if t not in ended and (e := _mid_checkpoint(out, t))), None)
    finally:
        _kill_session(proc.pid)
        proc.wait()
    assert ended and caught, "".join(seen)
    caught, at_epoch = caught
    assert "streamed from 3 file(s)" in "".join(seen)
    assert json.loads((out / "state.json").read_text())["phase"] == "search"
    journal = [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()]
    before = {e["trial_id"]: e for e in journal}
    assert caught not in before and set(before) <= ended

    again = run_cli("sweep", str(sweep), "--output", "r", cwd=tmp_path)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "resuming the unfinished sweep" in again.stdout
    assert "streamed from 3 file(s)" in again.stdout
    assert "already reported" not in again.stdout + again.stderr
    assert not (tmp_path / "r" / "breast-cancer-tiny_1").exists()
    assert json.loads((out / "state.json").read_text())["phase"] == "finished"

    # the resumed sweep's fit is the one the trials before the kill trained with: the in-memory
    # fit of the same rows and split (the uninterrupted streamed sweep's, see test_streamed_sweep_cli)
    in_memory = prepare(load_dataframe(memory.dataset.source, None), memory)
    record = json.loads((out / "best_model" / "preprocessing.json").read_text())
    assert record.keys() == in_memory.meta.keys()
    for name, meta in in_memory.meta.items():
        assert record[name]["type"] == meta.type and record[name]["vocab"] == list(meta.vocab), name
        assert record[name]["stats"] == pytest.approx(meta.stats, rel=1e-9, abs=1e-12), name

    client = _client(out)
    runs = client.search_runs([client.get_experiment_by_name("breast-cancer-tiny").experiment_id])
    assert not [r.info.run_name for r in runs if r.info.status == "RUNNING"]
    trials = {r.data.tags["trial_id"]: r for r in runs if r.data.tags.get("phase") == "search"}
    assert len(trials) == TRIALS == len([r for r in runs if r.data.tags.get("phase") == "search"])
    for r in trials.values():
        assert (r.info.status, r.data.tags["status"]) == ("FINISHED", "FINISHED")
        steps = [m.step for m in client.get_metric_history(r.info.run_id, METRIC)]
        assert sorted(steps) == list(range(1, EPOCHS + 1))  # every epoch once, continued or not
    for tid, e in before.items():  # trials that ended before the kill kept their results
        assert trials[tid].data.metrics[METRIC] == pytest.approx(e["results"][-1][METRIC])
    # the interrupted trial continued after the epoch of its checkpoint, not from epoch 1
    assert int(trials[caught].data.tags["resumed_from_epoch"]) == at_epoch, trials[caught].data.tags

    entries = {e["trial_id"]: e for e in map(json.loads, (out / "journal.jsonl").read_text().splitlines())}
    assert set(entries) == set(trials)
    per_rank = -(-len(in_memory.splits["train"]) // 2)  # the streamed split padded to the 2 ranks
    for e in entries.values():
        last = e["results"][-1]
        assert last["world_size"] == 2 and last["epoch"] == EPOCHS
        # every rank as many batches, in every epoch, across the kill
        assert last["optimizer_steps"] == EPOCHS * batches_per_epoch(per_rank, BATCH)
    result = json.loads((out / "results.json").read_text())
    assert sorted(t["trial_id"] for t in result["trials"]) == sorted(trials)
