"""The report's table of generated outputs: for an llm sweep, a few validation rows the best
trials answered at their best epoch, each beside its prompt and reference.

:func:`generated_info` is the data -> info step (pure, what the tests assert); the page renders
the info with the report's template, which escapes every text (a prompt or an answer may hold
HTML). A sweep without generated outputs (any non-llm sweep) gets no info and no section.
"""

from __future__ import annotations

from dataclasses import dataclass

from dashboards._format import format_number
from ludwig_hpo.config.metrics import GENERATED_METRICS
from ludwig_hpo.results import SweepResult
from ludwig_hpo.results.ranking import rank_trials
from ludwig_hpo.results.records import GeneratedOutput

#: How many of the best trials show their generated outputs, and how many rows each.
TOP_TRIALS = 3
ROWS_SHOWN = 5


@dataclass(frozen=True)
class GeneratedRowView:
    """One row of a trial's table: the texts as generated, and whether the answer matched the
    reference exactly (leading and trailing whitespace aside)."""

    prompt: str
    reference: str
    generated: str
    exact: bool


@dataclass(frozen=True)
class GeneratedTrialView:
    """One trial's table: its rank among the scored trials (1 = best), id, objective at its
    best epoch (formatted), its generated-output scores at that epoch (``(name, value)``) and rows."""

    rank: int
    trial_id: str
    objective: str
    scores: tuple[tuple[str, str], ...]
    rows: tuple[GeneratedRowView, ...]


@dataclass(frozen=True)
class GeneratedInfo:
    """What the report's generated-outputs section shows: the sweep's metric and the tables of
    its best trials that kept generated outputs, best first."""

    metric: str
    trials: tuple[GeneratedTrialView, ...]


def generated_trial_ids(result: SweepResult, top: int = TOP_TRIALS) -> list[str]:
    """The trials whose generated outputs the report shows: the ``top`` best scored trials of a
    sweep that scored generated outputs (a ``<split>/<output>/exact_match`` or ``rouge_l``
    metric), else none; what a report rebuilt from MLflow fetches. Pure."""
    scored = any(
        key.rsplit("/", 1)[-1] in GENERATED_METRICS for t in result.trials for h in t.history for key in h.metrics
    )
    if not scored:
        return []
    sign = 1.0 if result.goal == "minimize" else -1.0
    return [t.trial_id for t in rank_trials(result.trials, sign)[:top]]


def generated_info(result: SweepResult, top: int = TOP_TRIALS, rows: int = ROWS_SHOWN) -> GeneratedInfo | None:
    """The generated outputs of the ``top`` best scored trials that kept some (their first
    ``rows`` rows each), best first; None when no trial kept any (a non-llm sweep). Pure."""
    sign = 1.0 if result.goal == "minimize" else -1.0
    ranked = rank_trials(result.trials, sign)
    views: list[GeneratedTrialView] = []
    for rank, t in enumerate(ranked, start=1):
        if len(views) == top:
            break
        if not t.generated:
            continue
        best = next((h for h in t.history if h.objective == t.objective_best), None)
        scores = tuple(
            (key, format_number(value))
            for key, value in sorted((best.metrics if best else {}).items())
            if key.rsplit("/", 1)[-1] in GENERATED_METRICS
        )
        views.append(
            GeneratedTrialView(
                rank=rank,
                trial_id=t.trial_id,
                objective=format_number(t.objective_best),
                scores=scores,
                rows=tuple(_row(g) for g in t.generated[:rows]),
            )
        )
    if not views:
        return None
    return GeneratedInfo(metric=result.metric, trials=tuple(views))


def _row(g: GeneratedOutput) -> GeneratedRowView:
    return GeneratedRowView(g.prompt, g.reference, g.generated, g.generated.strip() == g.reference.strip())
