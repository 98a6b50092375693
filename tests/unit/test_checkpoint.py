"""A search trial's checkpoints: the folder (one ``model.pt`` rewritten in place, loadable after
every write, removed when the run ends), the copy of the best weights, the packed trainer
state, and the write budget."""

from __future__ import annotations

import gc
import math
import os
import subprocess
import sys
from collections import OrderedDict, namedtuple

import pytest
import torch

from ludwig_hpo.train.checkpoint import (
    CheckpointBudget,
    CheckpointFolder,
    WeightsCopy,
    first_write_estimate,
    pack,
    serialized,
    unpack,
)
from ludwig_hpo.train.report_keys import MODEL_FILE


def _load(folder: str) -> dict:
    return torch.load(os.path.join(folder, MODEL_FILE), weights_only=True)


def test_each_write_replaces_the_file_and_close_removes_the_folder():
    f = CheckpointFolder()
    big = f.write({"state_dict": {"w": torch.arange(100.0)}, "epoch": 1})
    assert _load(big)["epoch"] == 1
    first_size = os.path.getsize(os.path.join(big, MODEL_FILE))
    small = f.write({"state_dict": {"w": torch.ones(3)}, "epoch": 2})  # shorter than the first file
    assert small == big
    got = _load(small)
    assert got["epoch"] == 2 and torch.equal(got["state_dict"]["w"], torch.ones(3))
    assert os.path.getsize(os.path.join(small, MODEL_FILE)) < first_size  # no stale tail
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
        os.remove(os.path.join(path + "-moved", MODEL_FILE))
        os.rmdir(path + "-moved")
    del f  # a run that raised
    gc.collect()
    assert not os.path.exists(path)


def test_an_ended_runs_folder_is_gone_even_if_its_process_is_then_killed():
    """Ray Train kills a trial's workers after their last report: exit handlers never run."""
    code = (
        "import os\nfrom ludwig_hpo.train.checkpoint import CheckpointFolder\n"
        "a = CheckpointFolder()\nprint(a.write({'epoch': 1}), flush=True)\na.close()\n"
        "os._exit(0)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    path = out.stdout.strip()
    assert path and not os.path.exists(path)


def test_weights_copy_is_refreshed_in_place_and_is_a_snapshot():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    copy = WeightsCopy()
    first = copy.refresh(model)
    tensors = {k: v for k, v in first.items()}
    assert first.keys() == model.state_dict().keys()
    with torch.no_grad():
        model[0].weight += 1  # a training step: in place
    model(torch.randn(8, 4))  # batch-norm statistics: in place
    assert not torch.equal(first["0.weight"], model[0].weight)  # a snapshot
    second = copy.refresh(model)
    for k, v in model.state_dict().items():
        assert second[k] is tensors[k] and torch.equal(second[k], v), k  # the same tensors, new values


def test_weights_copy_starts_from_resumed_weights_or_replaces_ones_that_do_not_fit():
    model = torch.nn.Linear(4, 3)
    resumed = {k: torch.zeros_like(v) for k, v in model.state_dict().items()}
    copy = WeightsCopy(resumed)
    assert copy.weights is resumed
    got = copy.refresh(model)
    assert got["weight"] is resumed["weight"] and torch.equal(got["weight"], model.weight)
    other = WeightsCopy({"weight": torch.zeros(2, 2)})  # another model's
    assert torch.equal(other.refresh(model)["bias"], model.bias)


def test_nothing_written_nothing_created():
    f = CheckpointFolder()
    assert f.path is None
    f.close()


def _adam_state() -> dict:
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.randn(5, 4)).sum().backward()
    opt.step()
    return {
        "epoch": 3,
        "best_objective": 0.25,
        "optimizer": opt.state_dict(),
        "rng": torch.get_rng_state(),
        "weights": OrderedDict(model.state_dict()),
        "scaler": {},
        "cuda_rng": None,
        "pair": (1, torch.ones(2)),
    }


def test_pack_round_trips_through_torch_save_with_every_dtype_and_shape(tmp_path):
    state = _adam_state()
    torch.save({"packed": pack(state)}, tmp_path / "s.pt")
    back = unpack(torch.load(tmp_path / "s.pt", weights_only=False)["packed"])
    assert back.keys() == state.keys()
    assert back["epoch"] == 3 and back["best_objective"] == 0.25 and back["cuda_rng"] is None and back["scaler"] == {}
    assert back["rng"].dtype == torch.uint8 and torch.equal(back["rng"], state["rng"])
    assert isinstance(back["pair"], tuple) and torch.equal(back["pair"][1], torch.ones(2))
    for k, v in state["weights"].items():
        assert back["weights"][k].shape == v.shape and torch.equal(back["weights"][k], v)
    assert back["optimizer"]["param_groups"] == state["optimizer"]["param_groups"]
    for i, per_param in state["optimizer"]["state"].items():
        for k, v in per_param.items():
            assert torch.equal(back["optimizer"]["state"][i][k], v), (i, k)
    # an optimizer takes the unpacked state
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    opt.load_state_dict(back["optimizer"])
    model.load_state_dict(back["weights"])


def test_pack_is_a_snapshot():
    w = torch.zeros(3)
    packed = pack({"w": w})
    w += 1
    assert torch.equal(unpack(packed)["w"], torch.zeros(3))


def test_write_takes_serialized_bytes(tmp_path):
    f = CheckpointFolder()
    try:
        obj = {"state_dict": {"w": torch.arange(4.0)}, "epoch": 2}
        got = _load(f.write(serialized(obj)))
        assert got["epoch"] == 2 and torch.equal(got["state_dict"]["w"], torch.arange(4.0))
    finally:
        f.close()


def test_the_budget_allows_a_write_when_what_checkpoints_cost_stays_within_its_share():
    budget = CheckpointBudget(0.02, first_write_s=0.001)
    assert not budget.allows(0.049)  # 1 ms would be over 2% of 49 ms of training
    assert budget.allows(0.050)
    budget.charge(0.002, wrote=True)  # the write took 2 ms: the next one is expected to take as long
    assert not budget.allows(0.199) and budget.allows(0.200)
    budget.charge(0.0001, wrote=False)  # a copy of a better epoch's weights counts too
    assert not budget.allows(0.2049) and budget.allows(0.2051)
    assert CheckpointBudget(math.inf).allows(0.0)
    assert not CheckpointBudget(0.0).allows(1e9)


def test_the_first_write_estimate_grows_with_the_weights():
    assert first_write_estimate(0) == pytest.approx(3e-3)
    assert first_write_estimate(100_000_000) == pytest.approx(3e-3 + 1.5)  # 3 x 100 MB at 200 MB/s


def test_a_random_state_packed_after_other_uint8_tensors_still_restores():
    """torch.set_rng_state needs its state at offset 0 of its storage: a uint8 mask packed
    before it must not shift it."""
    state = torch.get_rng_state()
    back = unpack(pack({"mask": torch.ones(7, dtype=torch.uint8), "rng": state}))
    torch.set_rng_state(back["rng"])
    assert torch.equal(torch.get_rng_state(), state)


Pair = namedtuple("Pair", "a b")  # at module level: the skeleton is pickled


def test_pack_keeps_named_tuples_and_non_contiguous_tensors():
    t = torch.arange(12.0).reshape(3, 4).t()  # not contiguous
    back = unpack(pack({"p": Pair(1, t), "empty": torch.zeros(0), "scalar": torch.tensor(2.5)}))
    assert isinstance(back["p"], Pair) and back["p"].a == 1 and torch.equal(back["p"].b, t)
    assert back["empty"].shape == (0,) and back["scalar"].item() == 2.5


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_pack_takes_tensors_of_one_dtype_on_different_devices():
    """Adam on a GPU keeps its step counts on the CPU beside CUDA moments (both float32)."""
    state = {"step": torch.tensor(3.0), "exp_avg": torch.ones(4, device="cuda")}
    packed = pack(state)
    assert all(b.device.type == "cpu" for b in packed["buffers"])
    back = unpack(packed)
    assert back["step"].item() == 3.0 and torch.equal(back["exp_avg"], torch.ones(4))
