"""What of Ray Data's messages reaches the console while the driver fits a streamed dataset
(``execution.cluster.ray_data_off_the_console``): never its progress lines; its warnings and
errors after the fact, unless the fit ends in the one-line data error. No Ray starts."""

from __future__ import annotations

import logging

import pytest

from ludwig_hpo.errors import DataError
from ludwig_hpo.execution.cluster import ray_data_off_the_console


def _log(level: int, text: str) -> None:
    logging.getLogger("ray.data._internal.execution.streaming_executor").log(level, text)


def test_progress_lines_never_show_and_warnings_show_after_a_fit_that_ends_well(ray_data_console):
    with ray_data_off_the_console():
        _log(logging.INFO, "Running Dataset: progress")
        _log(logging.WARNING, "the object store is nearly full")
        assert "nearly full" not in ray_data_console.getvalue()  # held while the fit runs
    assert "nearly full" in ray_data_console.getvalue() and "Running Dataset" not in ray_data_console.getvalue()
    _log(logging.INFO, "after the fit")
    assert "after the fit" in ray_data_console.getvalue()  # the console is Ray Data's again


def test_a_data_error_leaves_ray_datas_traceback_off_the_console(ray_data_console):
    with pytest.raises(DataError), ray_data_off_the_console():
        _log(logging.ERROR, "An exception was raised from a task of operator ReadCSV")
        raise DataError("cannot read this file: ...", source="rows/a.csv", key="dataset.source", fix="fix it")
    assert "ReadCSV" not in ray_data_console.getvalue()


def test_another_failure_shows_ray_datas_errors(ray_data_console):
    with pytest.raises(RuntimeError), ray_data_off_the_console():
        _log(logging.ERROR, "a worker died")
        raise RuntimeError("lost")
    assert "a worker died" in ray_data_console.getvalue()
