"""Tuned batch sizes persisted across sweeps: where the user's file lives, reuse on a matching
key, a miss on another device or world size, ``--retune-batch-size``, a corrupt file, and
concurrent writers (atomic replace under a lock)."""

from __future__ import annotations

import json
import multiprocessing as mp
from pathlib import Path

import pytest

from ludwig_hpo.execution.cache import BatchSizeCacheActor, load_persisted, persisted_sizes
from ludwig_hpo.train.batch_size import cache_key
from ludwig_hpo.train.batch_size_store import (
    CACHE_DIR_ENV,
    FORMAT_VERSION,
    read_sizes,
    user_cache_dir,
    user_cache_file,
    write_sizes,
)

KEY_PARTS = dict(
    architecture="concat(10->16)",
    input_shapes={"x": (1,)},
    device="cpu:x86_64:2cores:1threads",
    device_memory=0,
    world_size=2,
    precision="fp32",
    strategy="ddp",
    max_size=9,
    optimizer="adam",
    torch_version="2.13.0",
)
ENTRY = {"batch_size": 8, "tried": [[8, 4000.0], [9, 4100.0]], "stopped_by": "cap"}


def test_the_user_cache_folder_follows_the_override_then_xdg_then_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert user_cache_dir({CACHE_DIR_ENV: str(tmp_path / "mine"), "XDG_CACHE_HOME": "/x"}) == tmp_path / "mine"
    assert user_cache_dir({"XDG_CACHE_HOME": str(tmp_path / "xdg")}) == tmp_path / "xdg" / "ludwig_hpo"
    assert user_cache_dir({}) == tmp_path / "home" / ".cache" / "ludwig_hpo"
    assert user_cache_file({CACHE_DIR_ENV: str(tmp_path)}) == tmp_path / "batch_sizes.json"


def test_a_tuned_size_is_written_to_every_file_and_reused_by_the_next_sweep(tmp_path):
    sweep_file, user_file = tmp_path / "out" / "batch_sizes.json", tmp_path / "cache" / "batch_sizes.json"
    key = cache_key(**KEY_PARTS)
    first = BatchSizeCacheActor(load_persisted(sweep_file, user_file, retune=False))
    assert first.get(key) is None
    first.put(key, {**ENTRY, "source": "probe"})
    assert first.get(key) == {**ENTRY, "source": "sweep cache"}  # a later trial of the same sweep
    for path in (sweep_file, user_file):
        doc = json.loads(path.read_text())
        assert doc == {"version": FORMAT_VERSION, "entries": {key: ENTRY}}
    # the next sweep, in another output folder, on the same device
    second = BatchSizeCacheActor(load_persisted(tmp_path / "other" / "batch_sizes.json", user_file, retune=False))
    assert second.get(key) == {**ENTRY, "source": "persisted cache"}
    assert second.stats() == {"hits": 1, "misses": 0, "entries": 0, "persisted_hits": 1}


@pytest.mark.parametrize(
    "change",
    [{"device": "NVIDIA H200", "device_memory": 150_000_000_000}, {"world_size": 4}, {"torch_version": "2.14.0"}],
    ids=["another-device", "another-world-size", "another-torch"],
)
def test_a_size_tuned_elsewhere_is_a_miss(tmp_path, change):
    user_file = tmp_path / "batch_sizes.json"
    write_sizes(user_file, {cache_key(**KEY_PARTS): ENTRY})
    actor = BatchSizeCacheActor(load_persisted(tmp_path / "out.json", user_file, retune=False))
    assert actor.get(cache_key(**{**KEY_PARTS, **change})) is None
    assert actor.get(cache_key(**KEY_PARTS)) is not None


def test_retune_ignores_the_persisted_sizes_but_still_writes_the_new_ones(tmp_path):
    user_file, key = tmp_path / "batch_sizes.json", cache_key(**KEY_PARTS)
    write_sizes(user_file, {key: ENTRY})
    persisted = load_persisted(tmp_path / "out.json", user_file, retune=True)
    assert persisted.entries == {} and persisted.files == (tmp_path / "out.json", user_file)
    actor = BatchSizeCacheActor(persisted)
    assert actor.get(key) is None
    actor.put(key, {**ENTRY, "batch_size": 9})
    assert read_sizes(user_file)[0][key]["batch_size"] == 9


def test_the_output_folders_sizes_win_over_the_users(tmp_path):
    key = cache_key(**KEY_PARTS)
    write_sizes(tmp_path / "user.json", {key: ENTRY})
    write_sizes(tmp_path / "sweep.json", {key: {**ENTRY, "batch_size": 4}})
    assert load_persisted(tmp_path / "sweep.json", tmp_path / "user.json", retune=False).entries[key]["batch_size"] == 4


def test_a_sweep_without_auto_sizes_reads_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))
    (tmp_path / "batch_sizes.json").write_text("{not json")
    assert persisted_sizes(tmp_path / "out.json", auto=False, retune=False).files == ()
    found = persisted_sizes(tmp_path / "out.json", auto=True, retune=False)
    assert found.files == (tmp_path / "out.json", tmp_path / "batch_sizes.json") and found.warnings


@pytest.mark.parametrize(
    "text", ["{not json", '{"version": 99, "entries": {}}', "[]", ""], ids=["garbage", "version", "list", "empty"]
)
def test_a_corrupt_file_is_ignored_with_a_warning_naming_it_and_replaced_by_the_next_write(tmp_path, text):
    path = tmp_path / "batch_sizes.json"
    path.write_text(text)
    entries, warning = read_sizes(path)
    assert entries == {} and warning is not None and str(path) in warning and "ignored" in warning
    persisted = load_persisted(tmp_path / "out.json", path, retune=False)
    assert persisted.entries == {} and persisted.warnings == (warning,)
    write_sizes(path, {"k": ENTRY})
    assert read_sizes(path) == ({"k": ENTRY}, None)


def test_malformed_entries_are_dropped_and_the_rest_kept(tmp_path):
    path = tmp_path / "batch_sizes.json"
    path.write_text(json.dumps({"version": FORMAT_VERSION, "entries": {"a": ENTRY, "b": {"batch_size": "8"}}}))
    entries, warning = read_sizes(path)
    assert entries == {"a": ENTRY} and warning is not None and "1 malformed" in warning


def test_a_file_that_cannot_be_written_is_a_problem_not_an_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    actor = BatchSizeCacheActor(load_persisted(tmp_path / "out.json", blocker / "batch_sizes.json", retune=False))
    actor.put("k", ENTRY)  # the user's folder cannot be created: the sweep goes on
    assert read_sizes(tmp_path / "out.json")[0] == {"k": ENTRY}
    assert len(actor.problems()) == 1 and str(blocker) in actor.problems()[0]


def _writer(path: str, worker: int, count: int, barrier) -> None:
    barrier.wait()  # every writer starts at once
    for i in range(count):
        write_sizes(Path(path), {f"w{worker}-{i}": {"batch_size": i + 1}})


def test_concurrent_writers_never_corrupt_the_file_nor_lose_entries(tmp_path):
    path = tmp_path / "batch_sizes.json"
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(4)
    procs = [ctx.Process(target=_writer, args=(str(path), w, 15, barrier)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    entries, warning = read_sizes(path)
    assert warning is None and set(entries) == {f"w{w}-{i}" for w in range(4) for i in range(15)}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["batch_sizes.json", "batch_sizes.json.lock"]  # no temp left


def test_a_second_sweeps_trial_takes_the_persisted_size_and_trains_the_same(tmp_path, monkeypatch, repo_root):
    """Two sweeps' first trial, in-process, each with its own cache actor over the same user file."""
    from ludwig_hpo.config import load_sweep
    from ludwig_hpo.config.loader import resolve_trial_config
    from ludwig_hpo.data import load_dataframe, prepare
    from ludwig_hpo.train.loop import Job, train_loop

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    loaded = load_sweep(repo_root / "sweeps" / "breast_cancer_tiny.yaml")
    data = prepare(load_dataframe(loaded.config.dataset.source, loaded.base_dir), loaded.config)
    cfg = resolve_trial_config({**loaded.raw, "trainer": {**loaded.raw["trainer"], "epochs": 1}}, {})
    firsts = []
    for run in ("a", "b"):
        actor = BatchSizeCacheActor(
            load_persisted(tmp_path / run / "batch_sizes.json", tmp_path / "user.json", retune=False)
        )
        reports: list[dict] = []
        train_loop(cfg, data, Job(), lambda m, c, out=reports: out.append(m), cache=actor)
        firsts.append(reports[0])
    assert [r["batch_size_source"] for r in firsts] == ["probe", "persisted cache"]
    assert firsts[0]["batch_size"] == firsts[1]["batch_size"]
    assert firsts[0]["objective"] == firsts[1]["objective"]  # CPU: the same size trains the same model
    assert "batch_size_tried" not in firsts[1]


def test_retune_batch_size_reaches_the_sweep(tmp_path, monkeypatch, repo_root):
    from typer.testing import CliRunner

    from ludwig_hpo import cli

    seen = []
    monkeypatch.setattr(cli, "_run_sweep", lambda sweep, title: seen.append(sweep))
    sweep_file = str(repo_root / "sweeps" / "breast_cancer_tiny.yaml")
    for args, retune in (([], False), (["--retune-batch-size"], True)):
        res = CliRunner().invoke(cli.app, ["sweep", sweep_file, "--output", str(tmp_path), *args])
        assert res.exit_code == 0, res.output
        assert seen[-1].retune_batch_size is retune
