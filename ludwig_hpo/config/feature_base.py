"""What every feature has: a name (checked against section names and MLflow's key length) and
the column it reads. Typed, frozen; no I/O."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from ludwig_hpo.config.base import RuleError, _Base
from ludwig_hpo.tracking.names import MAX_KEY_LENGTH, mlflow_key

#: Names a feature may not take: top-level keys (a parameter path starts with a section or a
#: feature name) and ``combined``, the objective's name for all outputs together.
RESERVED_NAMES = frozenset(
    {
        "trainer",
        "combiner",
        "backend",
        "hyperopt",
        "dataset",
        "defaults",
        "kfold",
        "tracking",
        "report",
        "input_features",
        "output_features",
        "combined",
        "name",
        "output_dir",
    }
)


#: The longest MLflow key of a feature's name: room is left for the split, the metric and the
#: parameter fields around it (``best.<name>.encoder.embedding_size``, ``validation/<name>/roc_auc``).
MAX_FEATURE_KEY_LENGTH = MAX_KEY_LENGTH - 50


def _renamed(name: str) -> str:
    """A name suggestion for a feature whose name cannot stay: letters, digits and ``_``."""
    return re.sub(r"\W+", "_", name).strip("_") or "feature"


class _Feature(_Base):
    name: str = Field(min_length=1)
    column: str | None = None

    @field_validator("name")
    @classmethod
    def _name_ok(cls, v: str) -> str:
        if v in RESERVED_NAMES:
            raise ValueError(f"feature name {v!r} is reserved (it names a config section); rename the feature")
        head = v.split(".", 1)[0]
        if "." in v and head in RESERVED_NAMES:
            raise RuleError(
                f"feature name {v!r} starts with {head + '.'!r}, which parameter paths read as the {head} section",
                fix=f"rename the feature and keep its column, e.g. {{name: {_renamed(v)}, column: {v!r}}}",
            )
        if len(mlflow_key(v)) > MAX_FEATURE_KEY_LENGTH:
            raise RuleError(
                f"feature name {v[:40]!r}... is {len(mlflow_key(v))} characters as an MLflow key; its metric and "
                f"parameter keys (at most {MAX_KEY_LENGTH} characters) need it at most {MAX_FEATURE_KEY_LENGTH}",
                fix=f"give the feature a shorter name and keep its column, e.g. {{name: {_renamed(v[:20])}, "
                "column: <the column's name>}",
            )
        return v

    @property
    def source_column(self) -> str:
        """The dataset column read for this feature (``column``, else ``name``)."""
        return self.column or self.name
