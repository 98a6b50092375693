"""The training run's checkpoint folder: one ``model.pt`` rewritten in place, loadable after
every write, removed when the run ends."""

from __future__ import annotations

import gc
import os

import torch

from ludwig_hpo.train.checkpoint import CHECKPOINT_FILE, CheckpointFolder


def _load(folder: str) -> dict:
    return torch.load(os.path.join(folder, CHECKPOINT_FILE), weights_only=True)


def test_each_write_replaces_the_file_and_close_removes_the_folder():
    f = CheckpointFolder()
    big = f.write({"state_dict": {"w": torch.arange(100.0)}, "epoch": 1})
    assert _load(big)["epoch"] == 1
    first_size = os.path.getsize(os.path.join(big, CHECKPOINT_FILE))
    small = f.write({"state_dict": {"w": torch.ones(3)}, "epoch": 2})  # shorter than the first file
    assert small == big
    got = _load(small)
    assert got["epoch"] == 2 and torch.equal(got["state_dict"]["w"], torch.ones(3))
    assert os.path.getsize(os.path.join(small, CHECKPOINT_FILE)) < first_size  # no stale tail
    f.close()
    assert not os.path.exists(small)
    f.close()  # twice is harmless


def test_the_folder_comes_back_if_the_reporter_moved_it_and_goes_when_dropped():
    f = CheckpointFolder()
    path = f.write({"epoch": 1})
    os.rename(path, path + "-moved")
    try:
        assert _load(f.write({"epoch": 2}))["epoch"] == 2
    finally:
        os.remove(os.path.join(path + "-moved", CHECKPOINT_FILE))
        os.rmdir(path + "-moved")
    del f
    gc.collect()
    assert not os.path.exists(path)


def test_nothing_written_nothing_created():
    f = CheckpointFolder()
    assert f.path is None
    f.close()
