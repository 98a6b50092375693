"""Search-space translation to Optuna: bounds, log scale, categorical by value or by index,
and decoding sampled indices back to the sweep file's values."""

from __future__ import annotations

import optuna
import pytest
from pydantic import TypeAdapter

from ludwig_hpo.config.spaces import ParamSpace
from ludwig_hpo.results import ParamInfo
from ludwig_hpo.search import decode, param_infos, to_optuna

_SPACE = TypeAdapter(ParamSpace)


def space(**kw):
    return _SPACE.validate_python(kw)


D = optuna.distributions
TRANSLATIONS = [
    ("uniform", {"space": "uniform", "lower": 0.0, "upper": 0.5}, D.FloatDistribution(0.0, 0.5)),
    ("loguniform", {"space": "loguniform", "lower": 1e-4, "upper": 1e-1}, D.FloatDistribution(1e-4, 1e-1, log=True)),
    ("randint-upper-exclusive", {"space": "randint", "lower": 1, "upper": 4}, D.IntDistribution(1, 3)),
    ("randint-single-value", {"space": "randint", "lower": 2, "upper": 3}, D.IntDistribution(2, 2)),
    ("randint-negative", {"space": "randint", "lower": -3, "upper": 0}, D.IntDistribution(-3, -1)),
    (
        "choice-strings",
        {"space": "choice", "categories": ["adam", "adamw", "sgd"]},
        D.CategoricalDistribution(["adam", "adamw", "sgd"]),
    ),
    ("choice-numbers", {"space": "choice", "categories": [16, 32, 0.5]}, D.CategoricalDistribution([16, 32, 0.5])),
    (
        "choice-scalars-with-none-and-bool",
        {"space": "choice", "categories": [None, True, "x"]},
        D.CategoricalDistribution([None, True, "x"]),
    ),
    ("choice-lists", {"space": "choice", "categories": [[16], [32, 16]]}, D.CategoricalDistribution([0, 1])),
    (
        "choice-blocks",
        {"space": "choice", "categories": [{"type": "adam"}, {"type": "sgd", "momentum": 0.5}]},
        D.CategoricalDistribution([0, 1]),
    ),
    (
        "choice-mixed",
        {"space": "choice", "categories": ["adam", {"type": "sgd"}, [1]]},
        D.CategoricalDistribution([0, 1, 2]),
    ),
    (
        "quniform-step",
        {"space": "quniform", "lower": 0.0, "upper": 0.5, "q": 0.1},
        D.FloatDistribution(0.0, 0.5, step=0.1),
    ),
    (
        "qloguniform-rounded-after",
        {"space": "qloguniform", "lower": 0.001, "upper": 0.1, "q": 0.001},
        D.FloatDistribution(0.001, 0.1, log=True),
    ),
    ("randn-through-uniform", {"space": "randn", "mean": 1, "sd": 2}, D.FloatDistribution(1e-6, 1 - 1e-6)),
    ("qrandn-through-uniform", {"space": "qrandn", "mean": 0, "sd": 1, "q": 0.5}, D.FloatDistribution(1e-6, 1 - 1e-6)),
    (
        "qrandint-upper-inclusive",
        {"space": "qrandint", "lower": 8, "upper": 64, "q": 8},
        D.IntDistribution(8, 64, step=8),
    ),
    (
        "lograndint-upper-exclusive",
        {"space": "lograndint", "lower": 1, "upper": 100},
        D.IntDistribution(1, 99, log=True),
    ),
    (
        "qlograndint-rounded-after",
        {"space": "qlograndint", "lower": 8, "upper": 256, "q": 8},
        D.IntDistribution(8, 256, log=True),
    ),
    ("grid-scalars", {"space": "grid_search", "values": [1, 2]}, D.CategoricalDistribution([1, 2])),
    ("grid-blocks", {"space": "grid_search", "values": [{"a": 1}, [2]]}, D.CategoricalDistribution([0, 1])),
]


@pytest.mark.parametrize(("spec", "expected"), [t[1:] for t in TRANSLATIONS], ids=[t[0] for t in TRANSLATIONS])
def test_to_optuna(spec, expected):
    dist = to_optuna(space(**spec))
    assert dist == expected
    assert type(dist) is type(expected)


def test_float_distributions_are_not_log_unless_loguniform():
    assert to_optuna(space(space="uniform", lower=1e-4, upper=1e-1)).log is False
    assert to_optuna(space(space="loguniform", lower=1e-4, upper=1e-1)).log is True


def test_to_optuna_rejects_unknown():
    with pytest.raises(TypeError, match="no Optuna distribution for dict"):
        to_optuna({"space": "uniform"})


SPACES = {
    "trainer.learning_rate": {"space": "loguniform", "lower": 1e-4, "upper": 1e-1},
    "combiner.output_size": {"space": "choice", "categories": [16, 32]},
    "trainer.optimizer": {"space": "choice", "categories": [{"type": "adam"}, {"type": "sgd", "momentum": 0.5}]},
    "combiner.sizes": {"space": "choice", "categories": [[8], [16, 8]]},
    "image.encoder.num_layers": {"space": "randint", "lower": 1, "upper": 4},
}


@pytest.fixture
def spaces():
    return {k: space(**v) for k, v in SPACES.items()}


@pytest.mark.parametrize(
    ("sampled", "decoded"),
    [
        ({"trainer.optimizer": 1}, {"trainer.optimizer": {"type": "sgd", "momentum": 0.5}}),
        ({"trainer.optimizer": 0}, {"trainer.optimizer": {"type": "adam"}}),
        ({"combiner.sizes": 1}, {"combiner.sizes": [16, 8]}),
        ({"combiner.sizes": 1.0}, {"combiner.sizes": [16, 8]}),  # an index that went through a float store
        ({"combiner.output_size": 32}, {"combiner.output_size": 32}),  # scalar choices are sampled by value
        (
            {"trainer.learning_rate": 0.01, "image.encoder.num_layers": 3},
            {"trainer.learning_rate": 0.01, "image.encoder.num_layers": 3},
        ),
        ({"not.a.space": "kept"}, {"not.a.space": "kept"}),
    ],
)
def test_decode(spaces, sampled, decoded):
    assert decode(spaces, sampled) == decoded


def test_sample_then_decode_gives_original_values(spaces):
    dists = {path: to_optuna(s) for path, s in spaces.items()}
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    seen = []
    for _ in range(20):
        trial = study.ask(dists)
        values = decode(spaces, trial.params)
        study.tell(trial, 0.0)
        assert values["trainer.optimizer"] in SPACES["trainer.optimizer"]["categories"]
        assert values["combiner.sizes"] in SPACES["combiner.sizes"]["categories"]
        assert values["combiner.output_size"] in (16, 32)
        assert 1 <= values["image.encoder.num_layers"] <= 3
        assert 1e-4 <= values["trainer.learning_rate"] <= 1e-1
        seen.append(values["image.encoder.num_layers"])
    assert set(seen) == {1, 2, 3}, "the exclusive upper bound is never sampled; every other value is"


def test_param_infos(spaces):
    infos = param_infos(spaces)
    assert infos == (
        ParamInfo("trainer.learning_rate", "loguniform", log=True, lower=1e-4, upper=1e-1),
        ParamInfo("combiner.output_size", "choice", categories=(16, 32)),
        ParamInfo("trainer.optimizer", "choice", categories=({"type": "adam"}, {"type": "sgd", "momentum": 0.5})),
        ParamInfo("combiner.sizes", "choice", categories=([8], [16, 8])),
        ParamInfo("image.encoder.num_layers", "randint", log=False, lower=1.0, upper=4.0),
    )
    assert isinstance(infos[-1].lower, float)


def test_param_infos_from_a_shipped_sweep(repo_root):
    from ludwig_hpo.config import load_sweep

    cfg = load_sweep(repo_root / "sweeps" / "digits.yaml").config
    infos = param_infos(cfg.hyperopt.parameters)
    assert [i.path for i in infos] == list(cfg.hyperopt.parameters)
    assert [i.space for i in infos] == ["loguniform", "randint", "uniform", "choice"]


# every space: sampled values decode into the space, both documented ends are reached
EVERY_SPACE = [
    ({"space": "uniform", "lower": -1, "upper": 1}, None),
    ({"space": "quniform", "lower": 0.0, "upper": 0.5, "q": 0.1}, {0.0, 0.1, 0.2, 0.3, 0.4, 0.5}),
    ({"space": "loguniform", "lower": 1e-4, "upper": 1e-1}, None),
    ({"space": "qloguniform", "lower": 0.5, "upper": 2.0, "q": 0.5}, {0.5, 1.0, 1.5, 2.0}),
    ({"space": "randn", "mean": 10, "sd": 0.5}, None),
    ({"space": "qrandn", "mean": 0, "sd": 1, "q": 1}, None),
    ({"space": "randint", "lower": -2, "upper": 2}, {-2, -1, 0, 1}),
    ({"space": "qrandint", "lower": 0, "upper": 9, "q": 3}, {0, 3, 6, 9}),
    ({"space": "lograndint", "lower": 1, "upper": 4}, {1, 2, 3}),
    ({"space": "qlograndint", "lower": 2, "upper": 8, "q": 2}, {2, 4, 6, 8}),
    ({"space": "choice", "categories": [[1, 2], {"a": 1}, "x"]}, None),
    ({"space": "grid_search", "values": [3, 4]}, {3, 4}),
    # bounds that are not multiples of q: the multiples of q between them, as in Ray Tune
    ({"space": "quniform", "lower": 0.05, "upper": 0.37, "q": 0.1}, {0.1, 0.2, 0.3}),
    ({"space": "qloguniform", "lower": 0.3, "upper": 2.2, "q": 0.5}, {0.5, 1.0, 1.5, 2.0}),
    ({"space": "qrandint", "lower": 10, "upper": 40, "q": 8}, {16, 24, 32, 40}),
    ({"space": "qlograndint", "lower": 3, "upper": 21, "q": 5}, {5, 10, 15, 20}),
]


@pytest.mark.parametrize(("spec", "support"), EVERY_SPACE, ids=[s["space"] for s, _ in EVERY_SPACE])
def test_samples_decode_into_the_space(spec, support):
    from ludwig_hpo.search.space import decode_value

    s = space(**spec)
    dist = to_optuna(s)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    values = []
    for _ in range(300):
        trial = study.ask({"p": dist})
        values.append(decode_value(s, trial.params["p"]))
        study.tell(trial, 0.0)
    for v in values:
        assert s.problem_with(v) is None, v
    if support is not None:
        assert set(values) == support
    if spec["space"] in ("randint", "qrandint", "lograndint", "qlograndint"):
        assert all(type(v) is int for v in values)
    if spec["space"] == "randn":
        assert abs(sum(values) / len(values) - 10) < 0.15
    if spec["space"] == "choice":
        assert [1, 2] in values and {"a": 1} in values  # lists and blocks intact, never strings


@pytest.mark.parametrize("spec", [s for s, _ in EVERY_SPACE], ids=[s["space"] for s, _ in EVERY_SPACE])
def test_encode_inverts_decode(spec):
    from ludwig_hpo.search.space import decode_value, encode_value

    s = space(**spec)
    for v in s.probe_values():
        if s.problem_with(v) is None:
            assert (
                decode_value(s, encode_value(s, v)) == pytest.approx(v)
                if not isinstance(v, (list, dict))
                else decode_value(s, encode_value(s, v)) == v
            )


def test_describe_shows_inclusive_integer_ranges():
    assert space(space="randint", lower=1, upper=4).describe() == "randint [1, 4) = integers 1..3, linear scale"
    assert (
        space(space="qrandint", lower=8, upper=64, q=8).describe()
        == "qrandint [8, 64] = integers 8..64 step 8, linear scale"
    )
    assert space(space="loguniform", lower=1e-4, upper=0.1).describe() == "loguniform float in [0.0001, 0.1), log scale"


# ---------------------------------------------------------------------------- Tune config keys
AWKWARD_SPACES = {
    "a/b.encoder.embedding_size": {"space": "choice", "categories": [4, 8]},
    "size (cm).encoder": {"space": "choice", "categories": [{"type": "dense"}, {"type": "passthrough"}]},
    "x.y.encoder.dropout": {"space": "uniform", "lower": 0.0, "upper": 0.5},
    "100%/w.encoder.output_size": {"space": "randint", "lower": 2, "upper": 9},
}


def test_tune_keys_hold_no_slash_and_decode_to_the_paths_as_written():
    from ludwig_hpo.search.space import tune_keyed

    spaces = {k: space(**v) for k, v in AWKWARD_SPACES.items()}
    keyed = tune_keyed({p: to_optuna(s) for p, s in spaces.items()})
    assert not any("/" in k for k in keyed)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    trial = study.ask(keyed)
    decoded = decode(spaces, trial.params)
    assert set(decoded) == set(AWKWARD_SPACES)
    assert decoded["size (cm).encoder"] in ({"type": "dense"}, {"type": "passthrough"})


def test_a_config_tune_unflattened_at_a_slash_decodes_to_the_path():
    # an experiment saved before its keys were spelled without '/': Tune nested them
    spaces = {k: space(**v) for k, v in AWKWARD_SPACES.items()}
    nested = {"a": {"b.encoder.embedding_size": 8}, "size (cm).encoder": 1}
    assert decode(spaces, nested) == {"a/b.encoder.embedding_size": 8, "size (cm).encoder": {"type": "passthrough"}}


def test_quantized_bounds_snap_inwards_and_an_empty_grid_is_one_line():
    assert space(space="qrandint", lower=10, upper=40, q=8).describe() == (
        "qrandint [10, 40] = integers 16..40 step 8, linear scale"
    )
    assert space(space="quniform", lower=0.05, upper=0.37, q=0.1).probe_values() == [0.1, 0.2, 0.3]
    with pytest.raises(ValueError, match=r"no multiple of q=32 lies in \[8, 16\]"):
        space(space="qrandint", lower=8, upper=16, q=32)


def test_sample_from_is_refused_in_one_line():
    from ludwig_hpo.config.hyperopt import HyperoptConfig

    with pytest.raises(ValueError, match="space sample_from .* is not supported yet"):
        HyperoptConfig.model_validate({"parameters": {"trainer.learning_rate": {"space": "sample_from"}}})
