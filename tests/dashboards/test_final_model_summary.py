"""The report summary's final-model line (``kfold.select``): which configuration, how it was
chosen and trained, and its test score beside the search's best trial's."""

from __future__ import annotations

from dashboards.report import _final_model
from ludwig_hpo.results import SweepResult
from ludwig_hpo.results.selection import ModelSelection


def result(selection: ModelSelection | None, test: dict[str, float]) -> SweepResult:
    return SweepResult("s", "validation/label/accuracy", "maximize", (), (), test_scores=test, selection=selection)


def test_a_retrained_cv_choice_shows_its_rule_rows_and_both_test_scores():
    sel = ModelSelection(
        "cv",
        2,
        "t2",
        "cv_mean",
        "config #2 has the best CV mean",
        (0.8, 0.9),
        0.01,
        retrained=True,
        epochs=4,
        train_rows=480,
        search_test_scores={"test/label/accuracy": 0.81},
    )
    info = _final_model(result(sel, {"test/label/accuracy": 0.93, "test/label/loss": 0.2}))
    assert info == {
        "config": "config #2 (trial t2)",
        "select": "cv",
        "chosen_by": "best CV mean",
        "reason": "config #2 has the best CV mean",
        "trained": "retrained on train+validation (480 rows, 4 epochs)",
        "test": "test/label/accuracy = 0.93",
        "search_test": "0.81",
    }


def test_select_search_shows_the_search_weights_without_a_comparison():
    sel = ModelSelection("search", 1, "t1", "search_best", "kfold.select is search: the search's best trial")
    info = _final_model(result(sel, {"test/label/accuracy": 0.9}))
    assert info is not None
    assert (info["chosen_by"], info["trained"], info["search_test"]) == (
        "search's best",
        "the search trial's best weights",
        None,
    )
    assert _final_model(result(None, {})) is None
