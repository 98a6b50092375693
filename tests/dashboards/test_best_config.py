"""The report's best configuration applies to the sweep file as it is: its ``--set`` overrides,
run through the CLI's own parser and the config loader, give a valid configuration holding the
best trial's values and the batch size it used; the command names ``hpo train`` options that
exist."""

from __future__ import annotations

import re
import shlex
from html import unescape
from pathlib import Path

import pytest

from dashboards import build_report
from dashboards.best_config import best_config, best_sets, yaml_text
from dashboards.report import BEST_CONFIG_ID
from ludwig_hpo.config import load_sweep
from ludwig_hpo.config.overrides import parse_set, with_overrides
from ludwig_hpo.results import ParamInfo

SWEEP = """\
name: digits-cnn
dataset:
  source: sklearn:digits
input_features:
  - {name: image, type: image, encoder: {type: stacked_cnn, num_layers: 2, channels: 16, dropout: 0.1}}
output_features:
  - {name: label, type: category}
combiner: {type: concat, num_fc_layers: 1, output_size: 64}
trainer:
  epochs: 4
  optimizer: {type: adamw}
  learning_rate: 1.0e-3
  batch_size: auto
hyperopt:
  goal: minimize
  metric: loss
  output_feature: label
  executor: {num_samples: 4}
  parameters:
    trainer.learning_rate: {space: loguniform, lower: 1.0e-5, upper: 3.0e-2}
    image.encoder.num_layers: {space: randint, lower: 1, upper: 4}
    image.encoder.dropout: {space: uniform, lower: 0.0, upper: 0.5}
    trainer.optimizer: {space: choice, categories: [{type: sgd, momentum: 0.9}, {type: adam}]}
    .: {space: choice, categories: [{combiner: {output_size: 8, num_fc_layers: 2}}, {combiner: {output_size: 32}}]}
"""

BEST = {
    "trainer.learning_rate": 1.234e-05,
    "image.encoder.num_layers": 3,
    "image.encoder.dropout": 0.30000000000000004,
    "trainer.optimizer": {"type": "sgd", "momentum": 0.9},
    ".": {"combiner": {"output_size": 8, "num_fc_layers": 2}},
}


@pytest.fixture
def sweep_file(tmp_path: Path) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP)
    return path


def _apply(sweep_file: Path, set_args: list[str]):
    """What ``hpo train FILE --set ...`` does with the arguments: the CLI's parser, the loader."""
    items = []
    for arg in set_args:
        flag, value = shlex.split(arg)
        assert flag == "--set"
        items.append(parse_set(value))
    return with_overrides(load_sweep(sweep_file), items)


def test_set_form_applied_to_the_sweep_file_gives_the_best_values(sweep_file, make_trial):
    best = make_trial("t3", BEST, 0.1)  # batch size 64 per worker
    again = best_config(best, str(sweep_file), "results/digits-cnn")
    cfg = _apply(sweep_file, again.set_args).config
    image = cfg.input_features[0]
    assert cfg.trainer.learning_rate == 1.234e-05
    assert image.encoder.num_layers == 3 and image.encoder.dropout == 0.30000000000000004
    assert cfg.trainer.optimizer.type == "sgd" and cfg.trainer.optimizer.momentum == 0.9
    assert cfg.combiner.output_size == 8 and cfg.combiner.num_fc_layers == 2  # the "." block's leaves
    assert cfg.trainer.batch_size == 64  # the size the trial used, not "auto"
    assert image.encoder.channels == 16  # the rest of the file is as it was


def test_commands_use_hpo_train_options_that_exist(sweep_file, make_trial):
    from typer.main import get_command

    from ludwig_hpo.cli import app

    train = get_command(app).commands["train"]  # type: ignore[attr-defined]  # a click Group
    options = {o for p in train.params for o in getattr(p, "opts", [])}
    assert {"--set", "--from-sweep"} <= options
    again = best_config(make_trial("t3", BEST, 0.1), str(sweep_file), "/out/digits-cnn")
    assert (
        again.from_sweep_command == f"hpo train {sweep_file} --from-sweep /out/digits-cnn --set trainer.batch_size=64"
    )
    for command in (again.command, again.from_sweep_command):
        words = shlex.split(command)
        assert words[:3] == ["hpo", "train", str(sweep_file)]
        assert {w for w in words if w.startswith("--")} <= options


def test_values_read_back_through_set():
    for value in (1e-05, 0.001, "adam", "16", "yes", {"type": "sgd", "momentum": 0.9}, [8, 16], True, None, 3):
        assert parse_set(f"p={yaml_text(value)}")[1] == value


def test_a_parameter_that_sets_the_batch_size_is_not_repeated():
    sets = best_sets({"trainer.batch_size": 32}, batch_size=32)
    assert sets == [("trainer.batch_size", "32")]


def test_report_block_is_the_set_form_of_the_best_trial(tmp_path, sweep_file, make_trial, make_sweep):
    lr = ParamInfo("trainer.learning_rate", "loguniform", log=True, lower=1e-5, upper=3e-2)
    trials = [make_trial("t0", {lr.path: 1e-3}, 0.5), make_trial("t1", {lr.path: 2.5e-4}, 0.2)]
    page = build_report(make_sweep(trials, parameters=[lr]), tmp_path / "report.html", tmp_path / "hiplot.html")
    html = page.read_text(encoding="utf-8")
    block = re.search(rf'<div id="{BEST_CONFIG_ID}">(.*?)</div>', html, re.DOTALL)
    assert block is not None
    commands = [unescape(c) for c in re.findall(r'<pre class="command[^"]*">(.*?)</pre>', block.group(1), re.DOTALL)]
    set_command = next(c for c in commands if "--from-sweep" not in c)
    args = [f"--set {shlex.quote(v)}" for v in shlex.split(set_command)[4::2]]
    cfg = _apply(sweep_file, args).config
    assert cfg.trainer.learning_rate == 2.5e-4 and cfg.trainer.batch_size == 64
    assert "trainer:" not in block.group(1)  # no YAML block that would repeat the file's own section
