"""``results.json``: a finished sweep's :class:`SweepResult` on disk (written atomically)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, overload

from ludwig_hpo.results import EpochRecord, KFoldRecord, ParamInfo, SweepResult, TrialRecord
from ludwig_hpo.results.records import GeneratedOutput, ended_status
from ludwig_hpo.results.selection import ModelSelection


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)  # "nan", "inf", "-inf": JSON has no literal for them
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


@overload
def _number(v: float | str) -> float: ...
@overload
def _number(v: None) -> None: ...
def _number(v: float | str | None) -> float | None:
    """A number written by :func:`_clean` read back (``"nan"``, ``"inf"``, ``"-inf"`` as floats)."""
    return float(v) if isinstance(v, str) else v


def write_result(result: SweepResult, path: Path) -> None:
    """Write ``result`` as JSON to ``path`` (temp file + rename: never half-written)."""
    text = json.dumps(_clean(dataclasses.asdict(result)), indent=1, default=str)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".results-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def read_result(path: Path) -> SweepResult:
    """Read a ``results.json`` written by :func:`write_result`.

    Raises:
        OSError, ValueError, KeyError: missing or malformed file.
    """
    d = json.loads(Path(path).read_text())

    def epoch(h: dict[str, Any]) -> EpochRecord:
        return EpochRecord(
            epoch=h["epoch"],
            objective=_number(h["objective"]),
            metrics={k: _number(x) for k, x in h["metrics"].items()},
        )

    def trial(t: dict[str, Any]) -> TrialRecord:
        # Files written before early-stopped trials were FINISHED hold them as KILLED.
        status, stopped_by = ended_status(t["status"], t.get("stopped_by"))
        return TrialRecord(
            **{
                **t,
                "status": status,
                "stopped_by": stopped_by,
                "objective_last": _number(t["objective_last"]),
                "objective_best": _number(t["objective_best"]),
                "history": tuple(epoch(h) for h in t["history"]),
                # absent from files written before llm trials kept their generated outputs
                "generated": tuple(GeneratedOutput(**g) for g in t.get("generated", ())),
            }
        )

    trials = tuple(trial(t) for t in d["trials"])
    params = tuple(
        ParamInfo(**{**p, "categories": tuple(p["categories"]) if p["categories"] is not None else None})
        for p in d["parameters"]
    )
    kfold = tuple(
        KFoldRecord(
            **{**k, "fold_scores": tuple(_number(x) for x in k["fold_scores"]), "test_score": _number(k["test_score"])}
        )
        for k in d["kfold"]
    )
    return SweepResult(
        **{
            **d,
            "parameters": params,
            "trials": trials,
            "kfold": kfold,
            "objectives": tuple(d.get("objectives", ())),
            "pareto_trial_ids": tuple(d.get("pareto_trial_ids", ())),
            "stop_reason": d.get("stop_reason"),  # absent from files of sweeps that ran every trial
            # absent from files written before the best trial was scored on the test split
            "test_scores": {k: _number(v) for k, v in d.get("test_scores", {}).items()},
            "selection": _selection(d.get("selection")),  # absent from files written before kfold.select
        }
    )


def _selection(d: dict[str, Any] | None) -> ModelSelection | None:
    if d is None:
        return None
    return ModelSelection(
        **{
            **d,
            "cv_means": tuple(None if m is None else _number(m) for m in d["cv_means"]),
            "p_value": _number(d["p_value"]),
            "search_test_scores": {k: _number(v) for k, v in d["search_test_scores"].items()},
        }
    )
