"""Tune schedulers as the sweep builds them: a failed trial counts as the worst value seen,
and PBT perturbs encoded parameters inside their spaces. Real Ray Tune scheduler classes,
driven directly (no Ray cluster)."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import numpy as np
import optuna
import pytest
from ray.tune.schedulers import PopulationBasedTraining, TrialScheduler
from ray.tune.search.sample import Domain

from ludwig_hpo.config.hyperopt import HyperoptConfig
from ludwig_hpo.search.schedulers import (
    AshaScheduler,
    MedianStoppingScheduler,
    PbtExplore,
    make_scheduler,
    pbt_checkpoints,
    pbt_mutations,
    stop_epochs,
)
from ludwig_hpo.search.space import clip_encoded, decode, to_optuna, to_tune

SPACE = {
    "trainer.learning_rate": {"space": "loguniform", "lower": 1e-4, "upper": 1e-1},
    "combiner.output_size": {"space": "qrandint", "lower": 8, "upper": 64, "q": 8},
    "combiner.dropout": {"space": "uniform", "lower": 0.0, "upper": 0.5},
    "trainer.optimizer.type": {"space": "choice", "categories": ["adam", "sgd"]},
}


class Controller:  # what the median rule asks of Tune's controller
    @staticmethod
    def get_live_trials():
        return []


@dataclass(eq=False)
class Trial:  # what these schedulers read of a Tune trial
    trial_id: str
    last_result: dict = field(default_factory=dict)
    status: str = "RUNNING"


def hp(**kw) -> HyperoptConfig:
    return HyperoptConfig.model_validate({"parameters": SPACE, **kw})


def _asha():
    sch = make_scheduler(hp(scheduler={"type": "asha", "grace_period": 1, "reduction_factor": 2}), epochs=4)
    assert isinstance(sch, AshaScheduler)
    return sch


def _add(sch, *trials):
    for t in trials:
        sch.on_trial_add(None, t)


def test_a_failed_trial_holds_its_asha_rung_with_the_worst_value_seen():
    # Without the failed trial, rung 1 holds 1.0 and 2.0: its median cutoff (1.5) stops a
    # trial at 1.8. With it (the worst seen, 2.0, at epoch 1), the cutoff is 2.0 and 1.8 goes on.
    a, b, failed, late = Trial("a"), Trial("b"), Trial("failed"), Trial("late")
    sch = _asha()
    _add(sch, a, b, failed, late)
    assert sch.on_trial_result(None, a, {"epoch": 1, "objective": 1.0}) == TrialScheduler.CONTINUE
    sch.on_trial_result(None, b, {"epoch": 1, "objective": 2.0})
    sch.on_trial_error(None, failed)
    rung_1 = next(recorded for milestone, recorded in sch._trial_info["late"]._rungs if milestone == 1)
    assert rung_1["failed"] == -2.0  # Tune records -objective when minimizing
    assert sch.on_trial_result(None, late, {"epoch": 1, "objective": 1.8}) == TrialScheduler.CONTINUE

    reference = _asha()
    a2, b2, late2 = Trial("a"), Trial("b"), Trial("late")
    _add(reference, a2, b2, late2)
    reference.on_trial_result(None, a2, {"epoch": 1, "objective": 1.0})
    reference.on_trial_result(None, b2, {"epoch": 1, "objective": 2.0})
    assert reference.on_trial_result(None, late2, {"epoch": 1, "objective": 1.8}) == TrialScheduler.STOP


def test_a_trial_failing_later_is_recorded_at_the_epoch_it_failed_in():
    sch = _asha()
    a, failed = Trial("a"), Trial("failed", last_result={"epoch": 1, "objective": 0.5})
    _add(sch, a, failed)
    sch.on_trial_result(None, a, {"epoch": 1, "objective": 0.9})
    sch.on_trial_result(None, failed, {"epoch": 1, "objective": 0.5})
    sch.on_trial_result(None, a, {"epoch": 2, "objective": 0.7})
    sch.on_trial_error(None, failed)  # failed during epoch 2: rung 2 gets the worst value (0.9)
    assert "failed" not in sch._trial_info
    assert sch._trial_info["a"]._rungs[-2][1]["failed"] == -0.9


def test_a_failure_before_any_result_leaves_asha_unchanged():
    sch = _asha()
    failed = Trial("failed")
    _add(sch, failed)
    sch.on_trial_error(None, failed)  # nothing seen yet: no worst value to count
    assert all(not recorded for _, recorded in sch._trial_info["failed"]._rungs)


def test_a_failed_trial_counts_as_worst_in_the_median_rule():
    sch = make_scheduler(hp(goal="maximize", scheduler={"type": "median_stopping_rule"}), epochs=4)
    assert isinstance(sch, MedianStoppingScheduler)
    a, failed = Trial("a"), Trial("failed")
    _add(sch, a, failed)
    sch.on_trial_result(Controller, a, {"epoch": 1, "objective": 0.8})
    sch.on_trial_result(Controller, a, {"epoch": 2, "objective": 0.6})
    sch.on_trial_error(Controller, failed)
    assert sch._results[failed] == [{"epoch": 1, "objective": 0.6}]  # maximizing: the lowest is worst


# ------------------------------------------------------------------ PBT


def test_pbt_mutates_only_what_keeps_checkpoints_loadable():
    h = hp(scheduler={"type": "pbt", "perturbation_interval": 2}, search_alg={"type": "random", "seed": 3})
    sch = make_scheduler(h, epochs=8)
    assert isinstance(sch, PopulationBasedTraining)
    assert set(sch._hyperparam_mutations) == {"trainer.learning_rate", "combiner.dropout"}
    assert all(isinstance(d, Domain) for d in sch._hyperparam_mutations.values())
    assert (sch._time_attr, sch._metric, sch._mode, sch._perturbation_interval) == ("epoch", "objective", "min", 2)
    assert pbt_checkpoints(h) == (2, 2)
    assert pbt_checkpoints(hp()) == (0, 0)


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"perturbation_interval": 2, "burn_in_period": 3}, (3, 2)),  # PBT perturbs at 3, 5, 7, ...
        ({"perturbation_interval": 2.5}, (1, 1)),  # at 3, 6 (rounded up): every epoch
        ({"perturbation_interval": 3, "time_attr": "time_total_s"}, (1, 1)),
    ],
)
def test_pbt_trials_checkpoint_where_pbt_perturbs(options, expected):
    assert pbt_checkpoints(hp(scheduler={"type": "pbt", **options})) == expected


@pytest.mark.parametrize(
    "options",
    [
        {"grace_period": 1, "reduction_factor": 2},
        {"grace_period": 2, "reduction_factor": 3, "brackets": 2},
        {"grace_period": 3, "reduction_factor": 1.5, "max_t": 30},
    ],
)
def test_trials_checkpoint_at_the_rungs_where_ray_s_asha_decides(options):
    epochs = 20
    sch = make_scheduler(hp(scheduler={"type": "asha", **options}), epochs=epochs)
    milestones = {m for b in sch._brackets for m, _ in b._rungs}  # what Ray's brackets hold
    assert set(stop_epochs(hp(scheduler={"type": "asha", **options}), epochs)) == {
        math.ceil(m) for m in milestones if math.ceil(m) <= epochs
    }


def test_other_schedulers_stop_epochs():
    assert stop_epochs(hp(scheduler={"type": "fifo"}), 5) == ()
    assert stop_epochs(hp(scheduler={"type": "pbt"}), 5) == ()
    assert stop_epochs(hp(scheduler={"type": "median_stopping_rule", "grace_period": 3}), 5) == (3, 4, 5)
    assert stop_epochs(hp(scheduler={"type": "hyperband"}), 3) == (1, 2, 3)
    assert stop_epochs(hp(scheduler={"type": "asha", "time_attr": "time_total_s", "max_t": 60}), 3) == (1, 2, 3)


def test_categories_are_perturbed_as_lists_never_multiplied():
    h = hp(
        scheduler={"type": "pbt", "hyperparam_mutations": {"trainer.optimizer.weight_decay": None}},
        parameters={
            **SPACE,
            "trainer.optimizer.weight_decay": {"space": "choice", "categories": [0.0, 0.01]},
            "trainer.learning_rate_scaling": {"space": "choice", "categories": ["constant", "linear"]},
        },
    )
    assert pbt_mutations(h)["trainer.optimizer.weight_decay"] == [0.0, 0.01]
    sch = make_scheduler(
        hp(
            scheduler={"type": "pbt"},
            parameters={
                **SPACE,
                "trainer.learning_rate_scaling": {"space": "choice", "categories": ["constant", "linear"]},
            },
        ),
        epochs=8,
    )
    assert sch._hyperparam_mutations["trainer.learning_rate_scaling"] == ["constant", "linear"]
    from ray.tune.schedulers.pbt import _explore

    random.seed(1)
    for _ in range(50):  # Ray's own perturbation, then ours: always a category
        new, _ = _explore(
            {"trainer.learning_rate_scaling": "linear", "trainer.learning_rate": 0.01, "combiner.dropout": 0.2},
            sch._hyperparam_mutations,
            0.25,
            (1.2, 0.8),
            sch._custom_explore_fn,
        )
        assert new["trainer.learning_rate_scaling"] in ("constant", "linear")


def test_a_failure_tune_will_retry_is_not_the_worst_value_yet():
    from ray.tune.experiment import Trial as TuneTrial

    sch = _asha()
    a, retried = Trial("a"), Trial("retried")
    retried.status = TuneTrial.ERROR  # Tune's requeue path: stopped with an error, to run again
    _add(sch, a, retried)
    sch.on_trial_result(None, a, {"epoch": 1, "objective": 1.0})
    sch.on_trial_error(None, retried)
    assert all("retried" not in recorded for _, recorded in sch._trial_info["a"]._rungs)


def test_pbt_search_alg_defaults_to_random_sampling():
    assert hp(scheduler={"type": "pbt"}).search_alg.type == "random"


def test_pbt_mutation_lists_and_spaces():
    h = hp(
        scheduler={
            "type": "pbt",
            "hyperparam_mutations": {
                "trainer.learning_rate": [0.001, 0.01],
                "combiner.dropout": {"space": "uniform", "lower": 0.1, "upper": 0.2},
            },
        }
    )
    m = pbt_mutations(h)
    assert m["trainer.learning_rate"] == [0.001, 0.01]
    assert all(0.1 <= m["combiner.dropout"].sample() < 0.2 for _ in range(50))


def test_pbt_perturbations_stay_inside_each_space():
    h = hp(scheduler={"type": "pbt"})
    explore = PbtExplore({p: to_optuna(s) for p, s in h.parameters.items()})
    out = explore(
        {
            "combiner.dropout": 0.48 * 1.2,
            "trainer.learning_rate": 0.09 * 1.2,
            "combiner.output_size": 70,
            "trainer.optimizer.type": "sgd",
        }
    )
    assert out == {
        "combiner.dropout": 0.5,
        "trainer.learning_rate": 0.1,
        "combiner.output_size": 64,
        "trainer.optimizer.type": "sgd",
    }


@pytest.mark.parametrize(
    "space",
    [
        {"space": "uniform", "lower": 0.1, "upper": 0.2},
        {"space": "quniform", "lower": 0.0, "upper": 1.0, "q": 0.25},
        {"space": "loguniform", "lower": 1e-4, "upper": 1e-1},
        {"space": "qloguniform", "lower": 1.0, "upper": 100.0, "q": 1.0},
        {"space": "randn", "mean": 0.0, "sd": 1.0},
        {"space": "randint", "lower": 2, "upper": 5},
        {"space": "qrandint", "lower": 8, "upper": 64, "q": 8},
        {"space": "lograndint", "lower": 1, "upper": 9},
        {"space": "qlograndint", "lower": 2, "upper": 64, "q": 2},
        {"space": "choice", "categories": [[1, 2], {"a": 1}, "x"]},
        {"space": "choice", "categories": ["adam", "sgd"]},
    ],
)
def test_tune_domains_sample_what_optuna_would(space):
    h = HyperoptConfig.model_validate({"parameters": {"p": space}})
    s = h.parameters["p"]
    dist, domain = to_optuna(s), to_tune(s)
    random.seed(0)
    np.random.seed(0)
    for _ in range(200):
        v = domain.sample()
        assert dist._contains(dist.to_internal_repr(v)), v
        assert s.problem_with(decode({"p": s}, {"p": v})["p"]) is None
        assert clip_encoded(dist, v) == v


def test_grid_search_stays_a_grid_under_tune():
    h = HyperoptConfig.model_validate({"parameters": {"p": {"space": "grid_search", "values": [[1], [2]]}}})
    assert to_tune(h.parameters["p"]) == {"grid_search": [0, 1]}


def test_clip_rounds_integers_and_steps():
    d = optuna.distributions.IntDistribution(8, 64, step=8)
    assert clip_encoded(d, 29) == 32 and clip_encoded(d, 3) == 8 and isinstance(clip_encoded(d, 29.4), int)


def test_pbt_leaves_a_trials_final_epoch_alone():
    sch = make_scheduler(hp(scheduler={"type": "pbt", "perturbation_interval": 2}), epochs=4)
    last = Trial("last")
    # at max_t the trial is about to end: no checkpoint, exploit or pause is asked for
    assert sch.on_trial_result(None, last, {"epoch": 4, "objective": 9.0}) == TrialScheduler.CONTINUE
