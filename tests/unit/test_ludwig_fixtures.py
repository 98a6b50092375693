"""Every Ludwig config of tests/fixtures/ludwig through ``hpo validate``'s checks (the file, its
dataset read and preprocessed): those written as Ludwig writes them are accepted; the ones
listed in :data:`EXPECTED_REFUSED` are refused in one line naming the file and the reason. The
datasets beside them are what ``make_data.py`` writes."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import sklearn  # noqa: F401 (sets KMP_* variables on import: before the hygiene check)
from typer.testing import CliRunner

from ludwig_hpo.cli import app
from ludwig_hpo.driver.validate import validate_lines
from ludwig_hpo.errors import UserError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ludwig"
CONFIGS = sorted(FIXTURES.glob("*.yaml"))

#: ``{fixture: (family, text its one-line error holds)}``: the configs refused today, and why.
#: Every other fixture must be accepted.
EXPECTED_REFUSED: dict[str, tuple[str, str]] = {
    "refused_text_spacy_tokenizer.yaml": ("features", "tokenizer 'english_tokenize' is not supported"),
    "refused_text_output.yaml": ("outputs", "output feature type text (generation) is not supported yet"),
    "refused_audio.yaml": ("features", "type audio is not supported yet"),
    "refused_gbm.yaml": ("model_type", "model_type gbm is not supported yet"),
    "refused_hyperopt_searcher.yaml": ("hyperopt", "search_alg.type 'hyperopt' is not supported yet"),
    "refused_checkpoints_per_epoch.yaml": ("trainer", "checkpoints_per_epoch is not supported yet"),
    "refused_combiner_project_aggregate.yaml": ("combiners", "combiner type 'project_aggregate' is not supported yet"),
}

#: Fixtures written in Ludwig's legacy spellings, and upgrades each must report.
LEGACY = {
    "titanic_legacy.yaml": ["training:", "numerical", "fc_size", "stratify", "sampler", "serial", '"training.'],
    "wine_quality_legacy.yaml": ["preprocessing.numerical", "split_probabilities", "force_split", "backfill"],
    "insurance_legacy_decoder.yaml": ["decoder.fc_output_size", "use_bias", '"charges.fc_size"'],
    "features_legacy_sequence.yaml": ["word_tokenizer", "word_sequence_length_limit", "encoder: embed"],
}


def dataset_of(config: Path) -> Path:
    """The CSV a fixture trains on: its ``# dataset: FILE`` comment, else the CSV whose name
    starts the fixture's (the longest), else ``data.csv``."""
    m = re.search(r"^# dataset: (\S+)", config.read_text(), re.M)
    if m:
        return config.parent / m.group(1)
    own = [c for c in config.parent.glob("*.csv") if config.stem.startswith(c.stem)]
    return max(own, key=lambda c: len(c.stem)) if own else config.parent / "data.csv"


def test_there_are_enough_fixtures_and_every_refused_one_exists():
    assert len(CONFIGS) >= 30
    names = {c.name for c in CONFIGS}
    assert set(EXPECTED_REFUSED) <= names
    assert set(LEGACY) <= names
    assert all(dataset_of(c).is_file() for c in CONFIGS)


@pytest.mark.parametrize("config", CONFIGS, ids=[c.name for c in CONFIGS])
def test_fixture_is_accepted_unless_listed_refused(config, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the output folder hpo validate names is relative to it
    data = dataset_of(config)
    if config.name not in EXPECTED_REFUSED:
        lines = validate_lines(config, data)
        assert lines[0].startswith(f"{config}: valid"), lines[0]
        return
    family, reason = EXPECTED_REFUSED[config.name]
    with pytest.raises(UserError) as info:
        validate_lines(config, data)
    line = info.value.one_line()
    assert "\n" not in line and line.startswith(str(config)), line
    assert reason in line, f"{family}: {line}"
    assert info.value.fix, line


@pytest.mark.parametrize("name", sorted(LEGACY))
def test_legacy_spellings_are_upgraded_with_one_located_warning_each(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = FIXTURES / name
    lines = validate_lines(config, dataset_of(config))
    warnings = [line for line in lines if line.startswith("warning: ")]
    assert len(warnings) == len(set(warnings))
    for word in LEGACY[name]:
        assert any(word in w for w in warnings), (word, warnings)
    assert all(re.match(rf"warning: {re.escape(str(config))}:\d+:\d+: ", w) for w in warnings), warnings


def test_hpo_validate_prints_each_upgrade_warning_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = FIXTURES / "titanic_legacy.yaml"
    result = CliRunner().invoke(app, ["validate", str(config), "--dataset", str(dataset_of(config))])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("warning: ")]
    assert lines and len(lines) == len(set(lines))
    assert any("training: is Ludwig's old name for trainer:" in line for line in lines)


def test_the_datasets_are_what_make_data_writes(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("make_data", FIXTURES / "make_data.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "HERE", tmp_path)
    module.main()
    written = sorted(p.name for p in tmp_path.glob("*.csv"))
    assert len(written) >= 7
    for name in written:
        assert (tmp_path / name).read_bytes() == (FIXTURES / name).read_bytes(), name
    assert sum(p.stat().st_size for p in FIXTURES.rglob("*") if p.is_file()) < 1_200_000
