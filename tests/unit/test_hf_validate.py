"""``hpo validate`` with pretrained Hugging Face text encoders, without a network: a local model
is checked against the prepared text, a hub id not in the local cache is a note (exit 0), and a
key the pretrained weights cannot honour is one line. Through ``validate_lines`` (no Ray)."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from ludwig_hpo.driver.validate import validate_lines
from ludwig_hpo.errors import ConfigError

from ..conftest import SWEEPS


def _sweep(tmp_path, encoder):
    pd.read_csv(SWEEPS / "data" / "wordnet_glosses.csv").groupby("label").head(20).to_csv(
        tmp_path / "g.csv", index=False
    )
    raw = {
        "name": "hf-validate",
        "dataset": {"source": "g.csv"},
        "input_features": [
            {"name": "gloss", "type": "text", "preprocessing": {"max_sequence_length": 32}, "encoder": encoder}
        ],
        "output_features": [{"name": "label", "type": "category"}],
        "trainer": {"epochs": 1, "batch_size": 8},
        "hyperopt": {
            "goal": "maximize",
            "metric": "accuracy",
            "output_feature": "label",
            "parameters": {"gloss.encoder.reduce_output": {"space": "choice", "categories": ["mean", "sum"]}},
        },
    }
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


@pytest.fixture
def offline(monkeypatch, tmp_path):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)


def test_a_local_model_is_checked_and_its_text_prepared(offline, tmp_path, tiny_bert_dir):
    path = _sweep(tmp_path, {"type": "bert", "pretrained_model_name_or_path": str(tiny_bert_dir)})
    lines = validate_lines(path)
    assert lines[0].endswith(": valid")
    assert any(line.startswith("data: text gloss: vocabulary 120 tokens") for line in lines), lines
    assert not any(line.startswith("note:") for line in lines)


def test_a_hub_id_not_cached_is_a_note_not_an_error(offline, tmp_path):
    path = _sweep(tmp_path, {"type": "distilbert"})
    lines = validate_lines(path)
    assert lines[0].endswith(": valid")
    notes = [line for line in lines if line.startswith("note:")]
    assert len(notes) == 1 and "'distilbert-base-uncased' is a hub id" in notes[0] and "not checked offline" in notes[0]


def test_a_shape_key_the_pretrained_model_cannot_honour_is_one_line(offline, tmp_path, tiny_bert_dir):
    path = _sweep(tmp_path, {"type": "bert", "pretrained_model_name_or_path": str(tiny_bert_dir), "hidden_size": 64})
    with pytest.raises(ConfigError) as err:
        validate_lines(path)
    text = str(err.value)
    assert "input_features[gloss].encoder" in text and "hidden_size is 64" in text and "\n" not in text
