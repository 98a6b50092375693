import math
import random

import pytest

from dashboards.pareto import pareto_figure, pareto_front, pareto_info


def _brute_force(xs, ys, x_goal, y_goal):
    sx = 1 if x_goal == "minimize" else -1
    sy = 1 if y_goal == "minimize" else -1

    def dominates(j, i):
        return (
            sx * xs[j] <= sx * xs[i]
            and sy * ys[j] <= sy * ys[i]
            and (sx * xs[j] < sx * xs[i] or sy * ys[j] < sy * ys[i])
        )

    return {i for i in range(len(xs)) if not any(dominates(j, i) for j in range(len(xs)))}


@pytest.mark.parametrize("goals", [("minimize", "minimize"), ("minimize", "maximize"), ("maximize", "maximize")])
@pytest.mark.parametrize("seed", range(5))
def test_front_matches_brute_force(goals, seed):
    rng = random.Random(seed)
    xs = [rng.choice([1.0, 2.0, 3.0, rng.random()]) for _ in range(60)]
    ys = [rng.choice([0.5, rng.random()]) for _ in range(60)]
    front = pareto_front(xs, ys, *goals)
    assert set(front) == _brute_force(xs, ys, *goals)
    assert [xs[i] for i in front] == sorted(xs[i] for i in front)


def test_non_finite_points_are_ignored():
    assert pareto_front([1.0, math.nan, 2.0], [0.5, 0.1, 0.4], "minimize", "minimize") == [0, 2]


def test_sweep_front_trades_metric_for_time(make_trial, make_sweep):
    trials = [make_trial(f"t{i}", {}, loss) for i, loss in enumerate([0.5, 0.3, 0.4, 0.2])]
    times = [60.0, 120.0, 180.0, 600.0]
    trials = [t.__class__(**{**t.__dict__, "wall_time_s": s}) for t, s in zip(trials, times, strict=True)]
    info = pareto_info(make_sweep(trials))
    assert info.costs == [60.0, 120.0, 180.0, 600.0]  # seconds, as everywhere in the report
    assert info.x_title == "trial wall time (s)"
    assert [info.trial_ids[i] for i in info.front] == ["t0", "t1", "t3"]  # t2 is slower and worse than t1
    front = pareto_figure(info).data[-1]
    assert front.name == "Pareto front" and list(front.x) == [60.0, 120.0, 600.0]


def test_a_multi_objective_sweep_draws_its_objectives_and_the_sweeps_pareto_set(make_trial, make_sweep):
    import dataclasses

    from ludwig_hpo.results import EpochRecord

    scores = {"a": (0.2, 0.90), "b": (0.1, 0.80), "c": (0.3, 0.85), "d": (0.15, 0.95)}
    trials = []
    for tid, (loss, acc) in scores.items():
        t = make_trial(tid, {}, loss)
        last = EpochRecord(3, loss, {"validation/y/loss": loss, "validation/y/accuracy": acc})
        trials.append(dataclasses.replace(t, history=(*t.history[:-1], last)))
    sweep = dataclasses.replace(
        make_sweep(trials), objectives=("validation/y/loss", "validation/y/accuracy"), pareto_trial_ids=("b", "d")
    )
    info = pareto_info(sweep)
    assert info.x_title == "validation/y/loss" and info.metric_title == "validation/y/accuracy"
    assert info.costs == [0.2, 0.1, 0.3, 0.15] and info.values == [0.90, 0.80, 0.85, 0.95]
    assert [info.trial_ids[i] for i in info.front] == ["b", "d"]  # by the first objective
    fig = pareto_figure(info)
    assert fig.layout.xaxis.title.text == "validation/y/loss" and "Objectives" in fig.layout.title.text
