"""Searcher and scheduler construction without Ray running: grid exactness, points run
first, seeded samplers reproduce their sequence, a failed trial is told as the worst value,
every scheduler is built from Ludwig's option names."""

from __future__ import annotations

import inspect
import itertools

import optuna
import pytest
from ray.tune.schedulers import AsyncHyperBandScheduler, FIFOScheduler, HyperBandScheduler, MedianStoppingRule

from ludwig_hpo.config import load_sweep
from ludwig_hpo.config.hyperopt import HyperoptConfig
from ludwig_hpo.config.search_alg import UNSUPPORTED_SEARCHERS
from ludwig_hpo.errors import ConfigError
from ludwig_hpo.search.algorithms import make_sampler, make_searcher
from ludwig_hpo.search.schedulers import make_scheduler
from ludwig_hpo.search.space import decode

optuna.logging.set_verbosity(optuna.logging.WARNING)


def hp(parameters, **kw) -> HyperoptConfig:
    return HyperoptConfig.model_validate({"parameters": parameters, **kw})


def run(h: HyperoptConfig, n: int, objective=lambda i, c: float(i)) -> list[dict]:
    s = make_searcher(h)
    out = []
    for i in range(n):
        c = s.suggest(f"t{i}")
        out.append(decode(h.parameters, c))
        s.on_trial_complete(f"t{i}", {"objective": objective(i, c)})
    return out


GRID = {
    "trainer.learning_rate": {"space": "grid_search", "values": [0.1, 0.01]},
    "trainer.optimizer": {"space": "grid_search", "values": [{"type": "adam"}, {"type": "sgd", "momentum": 0.5}]},
    "combiner.output_size": {"space": "grid_search", "values": [8, 16, 32]},
}


def test_grid_is_exactly_the_cartesian_product_in_order():
    h = hp(GRID, search_alg={"type": "grid"})
    assert h.num_trials == 12
    got = run(h, 12)
    want = [dict(zip(GRID, v, strict=True)) for v in itertools.product(*(g["values"] for g in GRID.values()))]
    assert got == want
    assert len({repr(sorted(g.items())) for g in got}) == 12


def test_grid_mixed_with_random_spaces_is_product_times_num_samples():
    params = {
        "combiner.output_size": {"space": "grid_search", "values": [8, 16]},
        "trainer.learning_rate": {"space": "loguniform", "lower": 1e-4, "upper": 1e-1},
    }
    h = hp(params, executor={"num_samples": 3}, search_alg={"seed": 0})
    assert h.num_trials == 6
    got = run(h, 6)
    assert [g["combiner.output_size"] for g in got] == [8, 16, 8, 16, 8, 16]
    assert len({g["trainer.learning_rate"] for g in got}) == 6
    assert all(1e-4 <= g["trainer.learning_rate"] < 1e-1 for g in got)


def test_points_to_evaluate_run_first_and_may_be_partial():
    params = {
        "trainer.learning_rate": {"space": "loguniform", "lower": 1e-4, "upper": 1e-1},
        "trainer.optimizer": {"space": "choice", "categories": [{"type": "adam"}, {"type": "sgd"}]},
    }
    points = [{"trainer.learning_rate": 0.05, "trainer.optimizer": {"type": "sgd"}}, {"trainer.learning_rate": 0.001}]
    got = run(hp(params, search_alg={"seed": 1, "points_to_evaluate": points}), 3)
    assert got[0] == points[0]
    assert got[1]["trainer.learning_rate"] == 0.001 and got[1]["trainer.optimizer"] in (
        {"type": "adam"},
        {"type": "sgd"},
    )


SPACE = {
    "trainer.learning_rate": {"space": "loguniform", "lower": 1e-4, "upper": 1e-1},
    "combiner.output_size": {"space": "qrandint", "lower": 8, "upper": 64, "q": 8},
    "combiner.dropout": {"space": "uniform", "lower": 0.0, "upper": 0.5},
}


@pytest.mark.parametrize(
    "search_alg",
    [
        {"sampler": "tpe", "n_startup_trials": 2, "multivariate": True},
        {"sampler": "random"},
        {"sampler": "cmaes", "n_startup_trials": 2},
        {"sampler": "gp", "n_startup_trials": 2},
        {"sampler": "qmc", "qmc_type": "halton"},
        {"sampler": "nsga2", "population_size": 4},
        {"type": "variant_generator"},
    ],
    ids=lambda s: s.get("sampler", s.get("type")),
)
def test_seed_reproduces_the_suggested_sequence(search_alg):
    def objective(i, c):
        return (c["trainer.learning_rate"] - 0.01) ** 2 + c["combiner.dropout"]

    a = run(hp(SPACE, search_alg={**search_alg, "seed": 5}), 6, objective)
    b = run(hp(SPACE, search_alg={**search_alg, "seed": 5}), 6, objective)
    c = run(hp(SPACE, search_alg={**search_alg, "seed": 6}), 6, objective)
    assert a == b
    assert a != c
    assert all(g["combiner.output_size"] % 8 == 0 and 8 <= g["combiner.output_size"] <= 64 for g in a)


def test_a_failed_trial_is_told_as_the_worst_value():
    h = hp(SPACE, search_alg={"seed": 0})
    s = make_searcher(h)
    for i, value in enumerate([3.0, 1.0]):
        s.suggest(f"t{i}")
        s.on_trial_complete(f"t{i}", {"objective": value})
    s.suggest("t2")
    s.on_trial_complete("t2", None, error=True)
    values = [t.value for t in s._ot_study.get_trials()]
    assert values == [3.0, 1.0, 3.0]
    maximize = make_searcher(hp(SPACE, goal="maximize", metric="loss"))
    for i, value in enumerate([3.0, 1.0]):
        maximize.suggest(f"t{i}")
        maximize.on_trial_complete(f"t{i}", {"objective": value})
    maximize.suggest("t2")
    maximize.on_trial_complete("t2", None, error=True)
    assert maximize._ot_study.trials[-1].value == 1.0


def test_first_trial_failing_is_a_failed_optuna_trial():
    s = make_searcher(hp(SPACE))
    s.suggest("t0")
    s.on_trial_complete("t0", None, error=True)
    assert s._ot_study.trials[0].state == optuna.trial.TrialState.FAIL


@pytest.mark.parametrize(
    ("scheduler", "cls", "attrs"),
    [
        ({"type": "fifo"}, FIFOScheduler, {}),
        (
            {"type": "async_hyperband", "grace_period": 2, "reduction_factor": 2},
            AsyncHyperBandScheduler,
            {"_time_attr": "epoch", "_max_t": 8},
        ),
        (
            {"type": "asha", "time_attr": "time_total_s", "max_t": 600, "grace_period": 60},
            AsyncHyperBandScheduler,
            {"_time_attr": "time_total_s", "_max_t": 600},
        ),
        ({"type": "hyperband", "reduction_factor": 2}, HyperBandScheduler, {"_time_attr": "epoch", "_max_t_attr": 8}),
        (
            {"type": "median_stopping_rule", "grace_period": 2, "min_samples_required": 2},
            MedianStoppingRule,
            {"_time_attr": "epoch", "_grace_period": 2, "_min_samples_required": 2},
        ),
        (
            {"type": "median_stopping_rule", "time_attr": "training_iteration"},
            MedianStoppingRule,
            {"_time_attr": "epoch"},
        ),
    ],
)
def test_schedulers(scheduler, cls, attrs):
    sch = make_scheduler(hp(SPACE, scheduler=scheduler), epochs=8)
    assert isinstance(sch, cls)
    for k, v in attrs.items():
        assert getattr(sch, k) == v


def test_ludwig_executor_scheduler_is_read():
    h = hp(SPACE, executor={"type": "ray", "num_samples": 4, "scheduler": {"type": "hyperband"}})
    assert h.scheduler.type == "hyperband" and h.executor.num_samples == 4


# ---------------------------------------------------------------------------- several objectives
MO = [("validation/y/loss", "minimize"), ("validation/y/accuracy", "maximize")]


def test_multi_objective_search_tells_every_metric_and_the_worst_of_each_on_failure():
    h = hp(
        SPACE, metric=["loss", {"metric": "accuracy", "goal": "maximize"}], search_alg={"sampler": "nsga2", "seed": 0}
    )
    assert h.multi_objective and h.metric == "loss"
    s = make_searcher(h, MO)
    for i, (loss, acc) in enumerate([(0.5, 0.8), (0.3, 0.6)]):
        s.suggest(f"t{i}")
        s.on_trial_complete(f"t{i}", {"validation/y/loss": loss, "validation/y/accuracy": acc})
    s.suggest("t2")
    s.on_trial_complete("t2", None, error=True)
    assert [t.values for t in s._ot_study.trials] == [[0.5, 0.8], [0.3, 0.6], [0.5, 0.6]]
    assert [d.name for d in s._ot_study.directions] == ["MINIMIZE", "MAXIMIZE"]


def test_pareto_set_from_last_epochs():
    from ludwig_hpo.results import EpochRecord, TrialRecord
    from ludwig_hpo.search.pareto import pareto_trial_ids

    def rec(tid, loss, acc, status="FINISHED"):
        m = {"validation/y/loss": loss, "validation/y/accuracy": acc}
        return TrialRecord(tid, status, {}, loss, loss, history=(EpochRecord(1, loss, m),))

    records = [
        rec("a", 0.5, 0.8),
        rec("b", 0.3, 0.6),
        rec("c", 0.6, 0.7),
        rec("d", 0.2, 0.9, "FAILED"),
        rec("e", 0.3, 0.8),
        TrialRecord("f", "FAILED", {}, None, None),
    ]
    assert pareto_trial_ids(records, MO) == ("e",)  # a (0.5, 0.8) is dominated by e (0.3, 0.8)
    assert pareto_trial_ids(records[:3], MO) == ("a", "b")


# ---------------------------------------------------------------------------- Ludwig's search_alg
def test_without_search_alg_the_search_is_ludwigs_seeded_random_variant_generator():
    h = hp(SPACE)
    assert (h.search_alg.type, h.search_alg.seed) == ("variant_generator", 42)
    assert isinstance(make_sampler(h), optuna.samplers.RandomSampler)
    assert run(h, 5) == run(hp(SPACE), 5)  # two sweeps suggest the same configurations


def test_random_state_is_the_seed_of_the_variant_generator():
    by_state = run(hp(SPACE, search_alg={"type": "variant_generator", "random_state": 3}), 5)
    assert by_state == run(hp(SPACE, search_alg={"type": "random", "seed": 3}), 5)
    assert by_state != run(hp(SPACE, search_alg={"type": "random", "seed": 4}), 5)
    with pytest.raises(ValueError, match="set twice"):
        hp(SPACE, search_alg={"type": "random", "seed": 3, "random_state": 3})


def test_tpe_defaults_are_optunas_own():
    sampler = make_sampler(hp(SPACE, search_alg={"type": "optuna"}))
    assert isinstance(sampler, optuna.samplers.TPESampler)
    default = inspect.signature(optuna.samplers.TPESampler).parameters["n_startup_trials"].default
    assert sampler._n_startup_trials == default == 10
    assert make_sampler(hp(SPACE, search_alg={"sampler": "tpe", "n_startup_trials": 3}))._n_startup_trials == 3


@pytest.mark.parametrize("kind", sorted(UNSUPPORTED_SEARCHERS))
def test_searchers_that_need_other_packages_are_one_line_naming_an_optuna_sampler(kind, tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: t\ndataset: {source: sklearn:breast_cancer}\n"
        "input_features: [{name: mean_radius, type: number}]\noutput_features: [{name: malignant, type: binary}]\n"
        f"hyperopt:\n  search_alg: {{type: {kind}}}\n"
        "  parameters: {trainer.learning_rate: {space: loguniform, lower: 1.0e-4, upper: 0.1}}\n"
    )
    with pytest.raises(ConfigError) as e:
        load_sweep(path)
    sampler = UNSUPPORTED_SEARCHERS[kind]
    assert str(e.value) == (
        f"{path}:6:16: hyperopt.search_alg.type: search_alg.type {kind!r} is not supported yet (Ray Tune's {kind} "
        "searcher needs a package not installed with ludwig_hpo); fix: use search_alg: "
        f"{{type: optuna, sampler: {sampler}}} (the same family of search) or {{type: variant_generator}}"
    )


def test_ludwigs_optuna_executor_is_the_same_optuna_search_one_trial_at_a_time():
    h = hp(
        SPACE,
        executor={"type": "optuna", "num_samples": 7, "sampler": "auto", "pruner": "median", "n_startup_trials": 3},
    )
    sa, ex = h.search_alg, h.executor
    assert (sa.type, sa.sampler, sa.n_startup_trials, sa.seed) == ("optuna", "tpe", 3, 42)
    assert (ex.type, ex.num_samples, ex.max_concurrent_trials, ex.time_budget_s) == ("ray", 7, 1, None)
    assert h.scheduler.type == "fifo"  # Ludwig's optuna trials never report to the pruner
    assert isinstance(make_sampler(h), optuna.samplers.TPESampler)
    gp = hp(SPACE, executor={"type": "optuna", "sampler": "gp"})
    assert gp.search_alg.sampler == "gp" and gp.executor.num_samples == 10


@pytest.mark.parametrize(
    ("executor", "extra", "message"),
    [
        ({"type": "optuna", "storage": "sqlite:///s.db"}, {}, "executor.storage (an Optuna study storage) is not"),
        ({"type": "optuna", "sampler": "nsga"}, {}, "sampler 'nsga' is not a sampler of the optuna executor"),
        ({"type": "optuna", "pruner": "sha"}, {}, "pruner 'sha' is not a pruner of the optuna executor"),
        ({"type": "optuna", "num_trials": 3}, {}, "'num_trials' is not an option of the optuna executor"),
        ({"type": "optuna"}, {"search_alg": {"type": "random"}}, "hyperopt.search_alg is set beside executor type"),
    ],
)
def test_optuna_executor_mistakes_are_one_line(executor, extra, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        hp(SPACE, executor=executor, **extra)


def test_a_time_budget_defaults_to_ludwigs_hour_and_null_lifts_it():
    assert hp(SPACE).executor.time_budget_s == 3600
    assert hp(SPACE, executor={"time_budget_s": None}).executor.time_budget_s is None
    assert hp(SPACE, executor={"max_concurrent_trials": None}).executor.max_concurrent_trials == "auto"
    with pytest.raises(ValueError, match="trial_driver_resources is not supported yet"):
        hp(SPACE, executor={"trial_driver_resources": {"CPU": 1}})
