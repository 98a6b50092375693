"""Bad input to a fine-tuned llm's prediction: rows without a column its prompt reads are one
line naming the dataset file and the key that reads the column (no model is run)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from ludwig_hpo.config import load_sweep
from ludwig_hpo.data import load_dataframe
from ludwig_hpo.errors import DataError
from ludwig_hpo.model.llm_pyfunc import ServedLLM

SWEEP = """\
name: gloss
model_type: llm
base_model: ./tiny-llama
dataset: {source: rows.csv}
input_features:
  - {name: lemma, type: text}
output_features:
  - {name: gloss, type: text}
prompt:
  template: "Define the {pos} {lemma}:"
adapter: {type: lora}
"""


class _Model(SimpleNamespace):
    """Stands in for the LLMModel: the column check reads no weight."""

    def cpu(self) -> _Model:
        return self

    def eval(self) -> _Model:
        return self


@pytest.fixture
def served(tmp_path: Path) -> ServedLLM:
    (tmp_path / "sweep.yaml").write_text(SWEEP)
    cfg = load_sweep(tmp_path / "sweep.yaml", search=False).config  # a model config, as hpo train reads
    meta = {"gloss": SimpleNamespace(fitted={"template": "Define the {pos} {lemma}:"})}
    return ServedLLM(_Model(tokenizer=None), cfg, meta)  # type: ignore[arg-type]


@pytest.mark.parametrize(("header", "key"), [("lemma", "prompt.template"), ("pos", "input_features[lemma]")])
def test_rows_without_a_column_the_prompt_reads_name_the_file_and_key(served, tmp_path, header, key):
    rows = tmp_path / "rows.csv"
    rows.write_text(f"{header}\nx\n")
    with pytest.raises(DataError) as info:
        served.prompts(load_dataframe(str(rows), tmp_path))
    line = info.value.one_line()
    assert line.startswith(f"{rows}: {key}: the rows lack the column") and "\n" not in line, line
    assert info.value.fix == "give the columns lemma, pos"


def test_evaluation_rows_without_a_target_are_bad_rows_as_training_dropped_them(served, tmp_path):
    from ludwig_hpo.model.raw_rows import BadRowsError

    rows = tmp_path / "rows.csv"
    rows.write_text("lemma,pos,gloss\ncat,noun,a small feline\ndog,noun,\n")
    with pytest.raises(BadRowsError) as info:
        served.prepare_labelled(load_dataframe(str(rows), tmp_path))
    assert info.value.source == str(rows) and info.value.lines() == [
        "line 3: column 'gloss' has no value, and output_features[gloss] drops such rows (missing_value_strategy: drop_row)"
    ]
    rows.write_text("lemma,pos,gloss\ndog,noun,\n")
    with pytest.raises(BadRowsError):  # none left to score, even when bad rows are skipped
        served.prepare_labelled(load_dataframe(str(rows), tmp_path), skip_bad_rows=True)


def test_predictions_with_a_carriage_return_read_back_as_one_row_each(tmp_path):
    # a generated text may hold a bare "\r", which CSV readers take as a row's end unless quoted
    import pandas as pd

    from ludwig_hpo.driver.predict import write_atomically

    frame = pd.DataFrame({"gloss_response": ["one\r two", "three", 'four "quoted",\nfive'], "n": [1, 2, 3]})
    write_atomically(frame, tmp_path / "predictions.csv")
    back = pd.read_csv(tmp_path / "predictions.csv")
    assert back["gloss_response"].tolist() == frame["gloss_response"].tolist() and back["n"].tolist() == [1, 2, 3]


def test_a_target_column_empty_in_every_row_says_so_rather_than_too_few_rows(make_config):
    # drop_row (a target's default) would leave no row: the split's "too few rows" would not say why
    import numpy as np
    import pandas as pd

    from ludwig_hpo.data import prepare

    cfg = make_config([{"name": "x", "type": "number"}], [{"name": "y", "type": "number"}])
    frame = pd.DataFrame({"x": np.arange(30.0), "y": [np.nan] * 30})
    with pytest.raises(DataError) as info:
        prepare(frame, cfg)
    assert info.value.key == "output_features[y]" and "30 of 30 rows empty" in info.value.message
    assert "fill_with_const" in (info.value.fix or "")
