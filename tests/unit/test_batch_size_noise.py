"""``batch_size: auto`` never lets timing noise pick the size: scripted measurements with their
noise (within and beyond it), deterministic ties, and the noise a probe measures."""

from __future__ import annotations

import pickle

import pytest

from ludwig_hpo.train.batch_size import Throughput, beats, noise_of, search_batch_size
from ludwig_hpo.train.probe import agree, measured


def _search(speeds: dict[int, float], **kwargs) -> int:
    return search_batch_size(lambda b: speeds[b], **kwargs).batch_size


def test_a_gain_within_the_measured_noise_keeps_the_smaller_size():
    # 16 looks 15 % faster, but each measurement is +-10 %: the intervals overlap
    noisy = {8: Throughput(100.0, 0.10), 16: Throughput(115.0, 0.10)}
    assert _search(noisy, max_size=16) == 8
    # the same medians measured without noise: the gain exceeds the 5 % tolerance
    assert _search({8: 100.0, 16: 115.0}, max_size=16) == 16


def test_a_gain_beyond_the_measured_noise_takes_the_larger_size():
    assert _search({8: Throughput(100.0, 0.10), 16: Throughput(130.0, 0.10)}, max_size=16) == 16


def test_two_runs_whose_medians_swap_within_the_noise_choose_the_same_size():
    """A loaded machine: run A measures 10 a bit faster than 8, run B a bit slower."""
    run_a = {8: Throughput(100.0, 0.08), 10: Throughput(109.0, 0.08)}
    run_b = {8: Throughput(104.0, 0.08), 10: Throughput(101.0, 0.08)}
    assert _search(run_a, max_size=10) == _search(run_b, max_size=10) == 8


def test_equal_throughputs_tie_to_the_smaller_size_every_time():
    for noise in (0.0, 0.01, 0.3):
        flat = {8: Throughput(100.0, noise), 16: Throughput(100.0, noise), 32: Throughput(100.0, noise)}
        assert {_search(flat, max_size=32) for _ in range(5)} == {8}


def test_noise_also_stops_growth_as_a_plateau():
    # each step up gains 15 %, within +-10 % noise on both sides: two stalls end the growth at
    # 32; the fastest (32) beats 8 but not 16, the smallest size it does not beat
    speeds = {b: Throughput(100.0 * 1.15 ** (b.bit_length() - 4), 0.10) for b in (8, 16, 32, 64, 128)}
    probed: list[int] = []
    choice = search_batch_size(lambda b: probed.append(b) or speeds[b], max_size=128)
    assert probed == [8, 16, 32] and choice.stopped_by == "plateau" and choice.batch_size == 16


def test_beats_needs_the_gain_to_exceed_tolerance_and_both_noises():
    assert beats(Throughput(121.0, 0.1), Throughput(100.0, 0.1), 0.05)
    assert not beats(Throughput(119.0, 0.1), Throughput(100.0, 0.1), 0.05)
    assert not beats(104.0, 100.0, 0.05) and beats(106.0, 100.0, 0.05)
    assert not beats(100.0, 100.0, 0.0)  # a tie is never a win


def test_throughput_is_a_float_that_keeps_its_noise_through_pickling():
    t = Throughput(250.0, 0.04)
    assert t == 250.0 and t / 2 == 125.0 and noise_of(t) == 0.04 and noise_of(250.0) == 0.0
    back = pickle.loads(pickle.dumps(t))
    assert float(back) == 250.0 and back.noise == 0.04


def test_measured_noise_is_the_spread_of_the_repeated_steps():
    steady = measured(10, [0.010, 0.010, 0.010])
    assert float(steady) == pytest.approx(1000.0) and steady.noise == 0.0
    spread = measured(10, [0.009, 0.010, 0.011])
    assert float(spread) == pytest.approx(1000.0) and spread.noise == pytest.approx(1.4826 * 0.1)
    # one step slowed down by another process neither moves the median nor the noise
    outlier = measured(10, [0.010, 0.0101, 0.050])
    assert float(outlier) == pytest.approx(10 / 0.0101) and outlier.noise < 0.02


def test_agree_in_one_process_keeps_the_measurement():
    import torch

    t = Throughput(80.0, 0.2)
    assert agree(t, torch.device("cpu")) is t and agree(None, torch.device("cpu")) is None
