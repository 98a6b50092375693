"""The exception tree: one-line format, builtin mix-ins, pickling between processes."""

from __future__ import annotations

import pickle

import pytest

from ludwig_hpo.errors import ConfigError, DataError, HpoError, ResourceError, TrackingError, TrialError, UserError
from ludwig_hpo.train.batch_size import BatchSizeError


@pytest.mark.parametrize(
    ("kwargs", "line"),
    [
        ({}, "bad value"),
        ({"source": "s.yaml:3:5"}, "s.yaml:3:5: bad value"),
        ({"key": "trainer.epochs"}, "trainer.epochs: bad value"),
        ({"fix": "use 3"}, "bad value; fix: use 3"),
        (
            {"source": "s.yaml:3:5", "key": "trainer.epochs", "fix": "use 3"},
            "s.yaml:3:5: trainer.epochs: bad value; fix: use 3",
        ),
        ({"source": "", "key": None, "fix": ""}, "bad value"),
    ],
)
def test_one_line_format(kwargs, line):
    err = UserError("bad value", **kwargs)
    assert err.one_line() == line
    assert str(err) == line


def test_one_line_collapses_whitespace():
    err = ConfigError("first line\nsecond\tline  here", source="a\nb", key="k", fix="do\r\nthis")
    assert err.one_line() == "a b: k: first line second line here; fix: do this"
    assert err.message == "first line\nsecond\tline  here", "the fields themselves are kept verbatim"


@pytest.mark.parametrize(
    ("cls", "builtin"),
    [
        (ConfigError, ValueError),
        (DataError, ValueError),
        (ResourceError, RuntimeError),
        (TrackingError, RuntimeError),
    ],
)
def test_builtin_mixins(cls, builtin):
    err = cls("m")
    assert isinstance(err, builtin)
    assert isinstance(err, UserError) and isinstance(err, HpoError)
    with pytest.raises(builtin):
        raise err


def test_trial_error_is_not_a_user_error():
    assert isinstance(TrialError("boom"), RuntimeError)
    assert not isinstance(TrialError("boom"), UserError)
    assert isinstance(BatchSizeError("x"), HpoError)


@pytest.mark.parametrize("cls", [UserError, ConfigError, DataError, ResourceError, TrackingError])
def test_pickle_round_trip(cls):
    err = cls(
        "lower < upper must hold",
        source="sweeps/x.yaml:12:5",
        key='hyperopt.parameters."a.b"',
        fix="correct the bounds",
    )
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is cls
    assert (back.message, back.source, back.key, back.fix) == (err.message, err.source, err.key, err.fix)
    assert str(back) == str(err)
    assert back.one_line() == err.one_line()


def test_pickle_round_trip_without_optional_fields():
    back = pickle.loads(pickle.dumps(ConfigError("only a message")))
    assert (back.message, back.source, back.key, back.fix) == ("only a message", None, None, None)


@pytest.mark.parametrize("err", [TrialError("trial t1 failed"), BatchSizeError("batch size 1 runs out of memory")])
def test_pickle_plain_errors(err):
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err) and str(back) == str(err)
