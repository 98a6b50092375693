"""Ludwig's ``sample_ratio`` / ``sample_size`` (seeded, before the split) and
``oversample_minority`` / ``undersample_majority`` (the training split of a binary target
only): the rows and counts that reach training."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ludwig_hpo.data import prepare

INPUTS = [{"name": "rid", "type": "number", "preprocessing": {"normalization": None}}]
BINARY_Y = [{"name": "y", "type": "binary"}]


def _frame(n: int = 200, positives: int | None = None) -> pd.DataFrame:
    y = [0, 1] * (n // 2) if positives is None else [1] * positives + [0] * (n - positives)
    return pd.DataFrame({"rid": np.arange(n, dtype=float), "y": y})


def _prepared(df: pd.DataFrame, make_config, outputs=BINARY_Y, **preprocessing):
    return prepare(df, make_config(INPUTS, outputs, preprocessing=preprocessing))


def test_sample_ratio_keeps_a_seeded_sample_before_the_split(make_config):
    data = _prepared(_frame(), make_config, sample_ratio=0.5)
    assert data.num_rows == 100
    kept = data.inputs["rid"][:, 0].astype(int)
    expected = pd.DataFrame({"rid": range(200)}).sample(frac=0.5, random_state=42)["rid"].tolist()
    assert kept.tolist() == expected, "pandas' sample, seeded with Ludwig's random_seed 42"
    assert {k: len(v) for k, v in data.splits.items()} == {"train": 70, "validation": 10, "test": 20}
    again = _prepared(_frame(), make_config, sample_ratio=0.5)
    assert again.inputs["rid"].tolist() == data.inputs["rid"].tolist()


def test_sample_size_keeps_that_many_rows(make_config):
    assert _prepared(_frame(), make_config, sample_size=60).num_rows == 60
    assert _prepared(_frame(), make_config, sample_size=500).num_rows == 200, "more than the rows: every row"


def test_sample_size_and_ratio_together_is_a_config_error(make_config):
    with pytest.raises(Exception, match="sample_size and sample_ratio < 1 are both set"):
        make_config(INPUTS, BINARY_Y, preprocessing={"sample_ratio": 0.5, "sample_size": 10})


def _counts(data, split: str = "train") -> tuple[int, int]:
    y = data.targets["y"][data.splits[split]]
    return int((y == 1).sum()), int((y == 0).sum())


def test_oversample_minority_repeats_minority_training_rows(make_config):
    df = _frame(positives=40)  # 40 positives, 160 negatives
    plain = _prepared(df, make_config)
    data = _prepared(df, make_config, oversample_minority=0.5)
    pos, neg = _counts(plain)
    assert _counts(data) == (round(neg * 0.5), neg), "the minority becomes half the majority"
    assert len(np.unique(data.splits["train"])) < len(data.splits["train"]), "drawn with replacement"
    for split in ("validation", "test"):
        assert data.splits[split].tolist() == plain.splits[split].tolist(), "only the training split changes"


def test_undersample_majority_drops_majority_training_rows(make_config):
    df = _frame(positives=40)
    plain = _prepared(df, make_config)
    data = _prepared(df, make_config, undersample_majority=0.5)
    pos, _ = _counts(plain)
    assert _counts(data) == (pos, int(pos / 0.5))
    assert set(data.splits["train"]) <= set(plain.splits["train"])


def test_balancing_is_for_one_binary_output(make_config):
    with pytest.raises(Exception, match="oversample_minority balances one binary output feature"):
        make_config(INPUTS, [{"name": "y", "type": "category"}], preprocessing={"oversample_minority": 0.5})
    with pytest.raises(Exception, match="oversample_minority and undersample_majority are both set"):
        make_config(INPUTS, BINARY_Y, preprocessing={"oversample_minority": 0.5, "undersample_majority": 0.5})


def test_kfold_folds_hold_each_row_once_after_oversampling(make_config):
    df = _frame(positives=40)
    data = prepare(df, make_config(INPUTS, BINARY_Y, preprocessing={"oversample_minority": 1.0}, kfold={"k": 2}))
    held = np.concatenate([h for _, h in data.folds])
    assert len(held) == len(np.unique(held))


def test_global_max_sequence_length_is_accepted_and_eval_steps_is_not_supported(make_config):
    make_config(INPUTS, BINARY_Y, preprocessing={"global_max_sequence_length": 512})
    with pytest.raises(Exception, match="eval_steps is not supported yet"):
        make_config(INPUTS, BINARY_Y, preprocessing={"eval_steps": 10})


def test_a_sample_ratio_that_keeps_no_row_names_the_file(tmp_path, make_config):
    from ludwig_hpo.data import load_dataframe
    from ludwig_hpo.errors import DataError

    _frame().to_csv(tmp_path / "rows.csv", index=False)
    cfg = make_config(INPUTS, BINARY_Y, preprocessing={"sample_ratio": 0.001})
    with pytest.raises(DataError) as info:
        prepare(load_dataframe(str(tmp_path / "rows.csv"), tmp_path), cfg)
    assert info.value.one_line() == (
        f"{tmp_path / 'rows.csv'}: preprocessing.sample_ratio: sample_ratio 0.001 keeps no row of 200; "
        "fix: raise preprocessing.sample_ratio"
    )
