"""A streamed dataset on a local Ray: a folder of Parquet files read, split and fitted in one
distributed pass to the statistics the in-memory path fits on the same rows, each split's lazy
pipeline giving the in-memory arrays, and a bad split value refused naming its file. One
local cluster for the module."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data import prepare
from ludwig_hpo.data.streaming.record import FOLD_KEY, split_batch
from ludwig_hpo.errors import DataError
from tests.unit.conftest import _sweep_dict
from tests.unit.test_streaming_data import INPUTS, OUTPUTS, _assert_same_meta, _frame

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def cluster():
    from ludwig_hpo.execution.cluster import local_cluster

    with local_cluster(num_cpus=2, num_gpus=0, trial_slots=1, train_jobs=False):
        yield


def _folder(tmp_path: Path, df: pd.DataFrame, parts: int = 6) -> Path:
    folder = tmp_path / "rows"
    folder.mkdir()
    for i, part in enumerate(np.array_split(np.arange(len(df)), parts)):
        df.iloc[part].to_parquet(folder / f"part-{i}.parquet", index=False)
    return folder


def _cfg(folder: Path, **sections) -> SweepConfig:
    raw = _sweep_dict(INPUTS, OUTPUTS, preprocessing={"split": {"type": "fixed"}}, **sections)
    raw["dataset"] = {"source": str(folder), "streaming": True}
    return SweepConfig.model_validate(raw)


def test_a_folder_of_parquet_files_fits_the_in_memory_statistics_and_streams_the_in_memory_arrays(cluster, tmp_path):
    from ludwig_hpo.execution.streaming.prepare import prepare_streamed

    df = _frame()
    folder = _folder(tmp_path, df)
    cfg = _cfg(folder)
    # the in-memory path on the same rows, in the same order (the files' order)
    whole = pd.concat([pd.read_parquet(p) for p in sorted(folder.glob("*.parquet"))], ignore_index=True)
    memory = prepare(whole, cfg)
    streamed = prepare_streamed(cfg, None)
    _assert_same_meta(streamed.meta, memory.meta)
    assert streamed.rows == {name: len(memory.splits[name]) for name in ("train", "validation", "test")}
    assert len(streamed.sources) == 6 and streamed.bytes > 0
    for name in ("train", "validation"):
        batches = list(streamed.datasets[name].iter_batches(batch_size=None, batch_format="numpy"))
        inputs, targets = split_batch({k: np.concatenate([b[k] for b in batches]) for k in batches[0]})
        rows = memory.splits[name]
        for feat, x in inputs.items():
            # Ray Data may hand blocks back in another order: compare the rows as sets of rows
            want = memory.inputs[feat][rows]
            assert x.shape == want.shape and x.dtype == want.dtype, feat
            np.testing.assert_allclose(np.sort(x, axis=0), np.sort(want, axis=0), rtol=1e-6, err_msg=feat)
        for feat, y in targets.items():
            np.testing.assert_allclose(np.sort(y), np.sort(memory.targets[feat][rows]), rtol=1e-6, err_msg=feat)
        assert (np.concatenate([b[FOLD_KEY] for b in batches]) == -1).all()


def test_a_split_value_in_one_file_is_refused_naming_that_file(cluster, tmp_path):
    from ludwig_hpo.execution.streaming.prepare import prepare_streamed

    df = _frame(90)
    df.loc[80, "split"] = 7  # in the last of six files
    folder = _folder(tmp_path, df)
    with pytest.raises(DataError) as e:
        prepare_streamed(_cfg(folder), None)
    text = str(e.value)
    assert "part-5.parquet" in text and "'split'" in text and "\n" not in text


def test_kfold_folds_of_a_streamed_dataset_partition_its_train_and_validation_rows(cluster, tmp_path):
    from ludwig_hpo.execution.streaming.prepare import fold_datasets, prepare_streamed

    folder = _folder(tmp_path, _frame(300))
    streamed = prepare_streamed(_cfg(folder, kfold={"k": 3}), None)
    assert streamed.folds == 3 and sum(streamed.fold_rows) == streamed.rows["train"] + streamed.rows["validation"]
    for fold in range(3):
        train, held = fold_datasets(streamed, fold)
        folds_seen = np.concatenate([b[FOLD_KEY] for b in held.iter_batches(batch_format="numpy")])
        assert len(folds_seen) == streamed.fold_rows[fold] and (folds_seen == fold).all()
        assert train.count() == sum(streamed.fold_rows) - streamed.fold_rows[fold]
    with pytest.raises(ValueError):
        fold_datasets(streamed, 3)


def test_a_text_column_streams_the_in_memory_vocabulary_and_ids(cluster, tmp_path, tiny_bert_dir):
    from ludwig_hpo.execution.streaming.prepare import prepare_streamed
    from tests.unit.test_streaming_text import _frame as text_frame

    df = text_frame(240)
    df["bert"] = df["review"]
    folder = _folder(tmp_path, df)
    raw = _sweep_dict(
        [
            {"name": "review", "type": "text", "preprocessing": {"most_common": 6, "max_sequence_length": 9}},
            {
                "name": "bert",
                "type": "text",
                "preprocessing": {"tokenizer": "hf_tokenizer", "pretrained_model_name_or_path": str(tiny_bert_dir)},
            },
        ],
        [{"name": "label", "type": "category"}],
        preprocessing={"split": {"type": "fixed"}},
    )
    raw["dataset"] = {"source": str(folder), "streaming": True}
    cfg = SweepConfig.model_validate(raw)
    whole = pd.concat([pd.read_parquet(p) for p in sorted(folder.glob("*.parquet"))], ignore_index=True)
    memory = prepare(whole, cfg)
    streamed = prepare_streamed(cfg, None)
    for name in ("review", "bert"):
        got, want = streamed.meta[name], memory.meta[name]
        assert (got.vocab, got.shape, got.stats) == (want.vocab, want.shape, want.stats), name
    batches = list(streamed.datasets["train"].iter_batches(batch_size=None, batch_format="numpy"))
    inputs, _ = split_batch({k: np.concatenate([b[k] for b in batches]) for k in batches[0]})
    for name in ("review", "bert"):
        want = memory.inputs[name][memory.splits["train"]]
        assert inputs[name].shape == want.shape and inputs[name].dtype == np.int64, name
        # Ray Data may hand blocks back in another order: compare the rows as a multiset
        assert sorted(map(tuple, inputs[name].tolist())) == sorted(map(tuple, want.tolist())), name


def test_csv_columns_whose_first_block_misleads_the_type_fit_the_in_memory_statistics(cluster, tmp_path):
    from ludwig_hpo.execution.streaming.prepare import prepare_streamed

    # past pyarrow's first block (1 MiB of text), from whose rows Ray Data's CSV reader would
    # otherwise type each column: "n" integers there, fractions later; "c" with no value there
    n = 400_000
    rng = np.random.default_rng(3)
    df = pd.DataFrame(
        {
            "n": rng.integers(0, 9, n).astype(object),
            "c": [None] * (n - 20_000) + list(rng.choice(["red", "blue"], 20_000)),
            "y": rng.integers(0, 2, n),
            "split": np.select([np.arange(n) % 10 == 8, np.arange(n) % 10 == 9], [1, 2], 0),  # 80/10/10
        }
    )
    df.loc[n - 20_000 :, "n"] = rng.normal(size=20_000)
    folder = tmp_path / "rows"
    folder.mkdir()
    df.to_csv(folder / "rows.csv", index=False)
    raw = _sweep_dict(
        [{"name": "n", "type": "number"}, {"name": "c", "type": "category"}],
        [{"name": "y", "type": "binary"}],
        preprocessing={"split": {"type": "fixed"}},
    )
    raw["dataset"] = {"source": str(folder), "streaming": True}
    cfg = SweepConfig.model_validate(raw)
    memory = prepare(pd.read_csv(folder / "rows.csv"), cfg)
    streamed = prepare_streamed(cfg, None)
    _assert_same_meta(streamed.meta, memory.meta)
    assert streamed.rows["train"] == len(memory.splits["train"])


def test_a_failed_read_is_one_error_and_ray_data_prints_nothing_on_the_console(cluster, tmp_path, ray_data_console):
    from ludwig_hpo.execution.cluster import ray_data_off_the_console
    from ludwig_hpo.execution.streaming.prepare import prepare_streamed

    n = 200_000  # the bad row past the first block (1 MiB of text), which the header check reads
    rng = np.random.default_rng(4)
    df = pd.DataFrame({"n": rng.normal(size=n), "c": rng.choice(["red", "blue"], n), "y": rng.integers(0, 2, n)})
    folder = tmp_path / "rows"
    folder.mkdir()
    df.to_csv(folder / "rows.csv", index=False)
    lines = (folder / "rows.csv").read_text().splitlines()
    lines[n - 100] += ",extra"
    (folder / "rows.csv").write_text("\n".join(lines) + "\n")
    raw = _sweep_dict(
        [{"name": "n", "type": "number"}, {"name": "c", "type": "category"}], [{"name": "y", "type": "binary"}]
    )
    raw["dataset"] = {"source": str(folder), "streaming": True}
    with pytest.raises(DataError, match="Expected 3 columns, got 4") as e, ray_data_off_the_console():
        prepare_streamed(SweepConfig.model_validate(raw), None)
    assert "\n" not in str(e.value) and str(folder / "rows.csv") in str(e.value)
    assert ray_data_console.getvalue() == ""  # Ray Data logs the failed read's traceback otherwise
