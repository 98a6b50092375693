"""An epoch's batches as Ludwig's batcher cuts them: every row is trained, a short last batch
included, except a last batch of a single row (Ludwig's ``ignore_last``)."""

from __future__ import annotations

import pytest

from ludwig_hpo.train.plan import batches_per_epoch, plan_training

from .trainer_helpers import config


@pytest.mark.parametrize(
    ("rows", "batch", "expected"),
    [(96, 16, 6), (100, 16, 7), (97, 16, 6), (98, 16, 7), (10, 16, 1), (1, 16, 1), (17, 16, 1), (16, 16, 1)],
)
def test_the_short_last_batch_is_trained_unless_it_has_one_row(rows, batch, expected):
    assert batches_per_epoch(rows, batch) == expected


def test_the_plan_counts_the_short_last_batch_per_rank():
    tr = config({}).trainer
    # 2 ranks: 100 rows -> 50 per rank -> batches of 16, 16, 16, 2
    assert plan_training(tr, 100, 16, 2, None).steps_per_epoch == 4
    assert plan_training(tr, 98, 16, 2, None).steps_per_epoch == 3  # 49 per rank: the last row alone is dropped
