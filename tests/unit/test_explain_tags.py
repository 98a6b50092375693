"""A tagged section (optimizer, combiner, feature, loss, space) whose type names no model: one
line at the tag's own key saying whether it is a Ludwig type not supported yet or a typo."""

from __future__ import annotations

from pathlib import Path

import pytest

from ludwig_hpo.config import load_sweep
from ludwig_hpo.errors import ConfigError

BASE = """\
name: tiny
dataset:
  source: sklearn:digits
input_features:
  - {name: size, type: number}
output_features:
  - {name: label, type: category}
trainer:
  epochs: 2
combiner:
  type: concat
"""


def _error(tmp_path: Path, old: str, new: str) -> str:
    assert BASE.count(old) == 1
    path = tmp_path / "sweep.yaml"
    path.write_text(BASE.replace(old, new))
    with pytest.raises(ConfigError) as info:
        load_sweep(path)
    return str(info.value)


@pytest.mark.parametrize(
    ("old", "new", "expect"),
    [
        (
            "  epochs: 2\n",
            "  epochs: 2\n  optimizer:\n    type: muon\n",
            "11:5: trainer.optimizer.type: muon is not supported yet; fix: use one of the supported types: adam, adamw",
        ),
        (
            "  type: concat\n",
            "  type: hypernetwork\n",
            "11:3: combiner.type: hypernetwork is not supported yet; fix: use one of the supported types: concat,",
        ),
        (
            "{name: label, type: category}",
            "{name: label, type: anomaly}",
            "output_features[label].type: anomaly is not supported yet",
        ),
        (
            "  epochs: 2\n",
            "  epochs: 2\n  optimizer:\n    type: adamm\n",
            "trainer.optimizer.type: unknown type 'adamm'; fix: did you mean 'adam'",
        ),
        ("  type: concat\n", "  type: zzz\n", "combiner.type: unknown type 'zzz'; fix: use one of concat, tabnet"),
    ],
)
def test_unknown_tag_is_one_line_at_the_tag(tmp_path, old, new, expect):
    message = _error(tmp_path, old, new)
    assert expect in message
    assert "Input tag" not in message and "\n" not in message
