"""The sweep report: one self-contained HTML page (plus its HiPlot page) per sweep."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import jinja2
import plotly.graph_objects as go
from markupsafe import Markup

from dashboards._format import (
    MISSING,
    STATUS_LABELS,
    format_cell,
    format_duration,
    format_number,
    metric_title,
    plain,
)
from dashboards._write import write_text_atomic
from dashboards.curves import curves_figure, curves_info
from dashboards.hiplot_page import hiplot_notes, write_hiplot_page
from dashboards.history import history_figure, history_info
from dashboards.importance import importance_figure, importance_info
from dashboards.kfold import KFoldInfo, kfold_figure, kfold_info, optimism_sentence
from dashboards.parallel import parallel_coordinates_figure, parallel_coordinates_info
from dashboards.pareto import pareto_figure, pareto_info
from dashboards.table import trials_table
from ludwig_hpo.config.paths import ROOT, SECTIONS, deep_merge
from ludwig_hpo.results import SweepResult
from ludwig_hpo.tracking.layout import HIPLOT_ARTIFACT, REPORT_ARTIFACT

#: The report's two files, logged to the sweep's parent run under the same names.
REPORT_FILE = REPORT_ARTIFACT
HIPLOT_FILE = HIPLOT_ARTIFACT
STATUS_ORDER = ("FINISHED", "KILLED", "FAILED", "RUNNING")

# div ids of the figures in report.html
PARALLEL_DIV_ID = "parallel-coordinates"
HISTORY_DIV_ID = "optimization-history"
KFOLD_DIV_ID = "kfold-vs-test"
IMPORTANCE_DIV_ID = "parameter-importance"
CURVES_DIV_ID = "learning-curves"
PARETO_DIV_ID = "pareto-front"

_PLOTLY_CONFIG = {"displaylogo": False, "responsive": True}


def build_report(result: SweepResult, report_path: Path, hiplot_path: Path) -> Path:
    """Write the sweep's report to ``report_path`` and return it.

    Writes ``hiplot_path`` (HiPlot view of the trials table) and then ``report_path``
    (the caller names both, e.g. a sweep folder's ``report.html`` and ``hiplot.html``): a
    header (sweep name, metric and goal, trial counts by status, wall time, best trial with
    its configuration as YAML and its metrics), parallel coordinates (axes by fANOVA
    importance), parameter importance, the optimization history, learning curves, metric vs
    wall time with its Pareto front,
    k-fold vs test (figure, confidence intervals, selection optimism and paired tests, or a
    note that it was not run), failed trials' errors and the trials table. Runs in the
    sweep driver or ``hpo report`` (``bench/report_build.py`` times it on large sweeps).
    The page embeds plotly.js once
    (several MB) and works offline; it links and frames the HiPlot page by its path relative
    to the report's folder, so the two files travel together. Each file is written
    atomically. Their folders are created if missing.

    Raises:
        ValueError: a log-scaled parameter has a value <= 0.
        OSError: a folder cannot be created or a file written.
    """
    report_path, hiplot_path = Path(report_path), Path(hiplot_path)
    for folder in {report_path.parent, hiplot_path.parent}:
        folder.mkdir(parents=True, exist_ok=True)
    table = trials_table(result)
    write_hiplot_page(table, hiplot_path)

    kfold = kfold_info(result)
    importance = importance_info(result)
    figures = [
        (parallel_coordinates_figure(parallel_coordinates_info(result, importance.params)), PARALLEL_DIV_ID),
        (importance_figure(importance), IMPORTANCE_DIV_ID),
        (history_figure(history_info(result)), HISTORY_DIV_ID),
        (curves_figure(curves_info(result)), CURVES_DIV_ID),
        (pareto_figure(pareto_info(result)), PARETO_DIV_ID),
    ]
    if kfold is not None:
        figures.append((kfold_figure(kfold), KFOLD_DIV_ID))
    html = {div_id: _figure_html(fig, div_id, first=i == 0) for i, (fig, div_id) in enumerate(figures)}

    page = (
        _environment()
        .get_template("report.html.j2")
        .render(
            sweep=_header(result),
            parallel_html=html[PARALLEL_DIV_ID],
            history_html=html[HISTORY_DIV_ID],
            importance_html=html[IMPORTANCE_DIV_ID],
            importance_note=_importance_note(importance),
            curves_html=html[CURVES_DIV_ID],
            pareto_html=html[PARETO_DIV_ID],
            kfold_html=html.get(KFOLD_DIV_ID),
            kfold_rows=_kfold_rows(kfold) if kfold is not None else [],
            kfold_metric=kfold.y_title if kfold is not None else "",
            kfold_optimism=optimism_sentence(kfold) if kfold is not None else "",
            kfold_tests=[t.verdict for t in kfold.tests] if kfold is not None else [],
            kfold_test_rows=_test_rows(kfold) if kfold is not None else [],
            hiplot_file=Path(os.path.relpath(hiplot_path.resolve(), report_path.parent.resolve())).as_posix(),
            hiplot_notes=hiplot_notes(table),
            failed=[(t.trial_id, t.error or MISSING) for t in result.trials if t.status == "FAILED"],
            table_columns=list(table.columns),
            table_align=[_alignment(table[c]) for c in table.columns],
            table_rows=[[format_cell(v) for v in row] for row in table.itertuples(index=False)],
        )
    )
    write_text_atomic(report_path, page)
    return report_path


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("dashboards", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _figure_html(fig: go.Figure, div_id: str, first: bool) -> Markup:
    # The page's section headings name the figures, so their own titles go.
    fig = go.Figure(fig)
    fig.update_layout(title=None, margin_t={PARALLEL_DIV_ID: 70, KFOLD_DIV_ID: 80}.get(div_id, 40))
    # plotly.js goes into the first figure only; the page then holds it exactly once.
    # Plotly's JSON escapes "<", and user strings in labels are entity-escaped already.
    return Markup(
        fig.to_html(
            full_html=False,
            include_plotlyjs=first,
            div_id=div_id,
            config=_PLOTLY_CONFIG,
            default_height=f"{fig.layout.height or 450}px",
        )
    )


def _alignment(column: Any) -> str:
    """``"num"`` for a column of numbers (right-aligned), else ``"text"``."""
    values = [v for v in column if v is not None]
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    return "num" if values and numeric else "text"


def _header(result: SweepResult) -> dict[str, Any]:
    counts: Counter[str] = Counter(t.status for t in result.trials)
    statuses = [s for s in STATUS_ORDER if counts[s]] + sorted(set(counts) - set(STATUS_ORDER))
    best = next((t for t in result.trials if t.trial_id == result.best_trial_id), None)
    return {
        "name": result.name,
        "metric": result.metric,
        "goal": result.goal,
        "metric_title": metric_title(result),
        "objectives": list(result.objectives),
        "n_trials": len(result.trials),
        "status_counts": [(s.lower(), STATUS_LABELS.get(s, s.lower()), counts[s]) for s in statuses],
        "wall_time": format_duration(result.wall_time_s),
        "output_dir": result.output_dir,
        "tracking_uri": result.tracking_uri,
        "best_trial_id": result.best_trial_id,
        "best_value": format_number(best.objective_best) if best else None,
        "best_params": best_config_yaml(best.params) if best else "",
        "best_metrics": _best_metrics(best) if best else [],
    }


def best_config_yaml(params: dict[str, Any]) -> str:
    """The parameters as a YAML block to paste into a sweep file: dotted paths nested
    (``trainer.learning_rate`` → ``trainer: {learning_rate: ...}``), values as YAML (lists
    and config blocks included). A block named after a feature is marked by a comment:
    its keys go into that feature's entry of ``input_features`` / ``output_features``."""
    import yaml

    tree: dict[str, Any] = {}
    for path, value in sorted(params.items(), key=lambda kv: kv[0] != ROOT):  # as apply_params: blocks first
        if path == ROOT and isinstance(value, dict):  # a partial config block, merged at the root
            tree = deep_merge(tree, _yaml_value(value))
            continue
        node = tree
        *heads, last = path.split(".")
        for head in heads:
            child = node.setdefault(head, {})
            if not isinstance(child, dict):  # "a" and "a.b" both set: keep the dotted key
                node, last = tree, path
                break
            node = child
        node[last] = _yaml_value(value)
    lines = []
    for key, value in tree.items():
        if key not in _CONFIG_SECTIONS:
            lines.append(f"# {key}: the feature named {key!r} (input_features / output_features)")
        lines.append(
            yaml.safe_dump(
                {key: value}, sort_keys=False, allow_unicode=True, default_flow_style=False, width=100
            ).rstrip()
        )
    return "\n".join(lines)


_CONFIG_SECTIONS = {*SECTIONS, "backend", "dataset", "hyperopt", "preprocessing"}


def _yaml_value(value: Any) -> Any:
    value = plain(value)
    if isinstance(value, (list, tuple)):
        return [_yaml_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _yaml_value(v) for k, v in value.items()}
    return value


def _best_metrics(best: Any) -> list[tuple[str, str]]:
    """The best trial's metrics at its best epoch, ``(name, value)`` sorted by name."""
    epoch = next((h for h in best.history if h.objective == best.objective_best), None)
    if epoch is None:
        return []
    return [(k, format_number(v)) for k, v in sorted(epoch.metrics.items())] + [("epoch", str(epoch.epoch))]


def _importance_note(info: Any) -> str:
    if info.note:
        return f"Not computed: {info.note}."
    return (
        f"fANOVA (Optuna) on a study rebuilt from {info.n_trials} scored trials; early-stopped "
        "trials count with the best value they reached."
    )


def _kfold_rows(info: KFoldInfo) -> list[dict[str, str]]:
    rows = []
    for i, label in enumerate(info.labels):
        scores, mean, std = info.fold_scores[i], info.means[i], info.stds[i]
        ci = MISSING
        if info.ci_lows[i] is not None and info.ci_highs[i] is not None:
            ci = f"[{format_number(info.ci_lows[i])}, {format_number(info.ci_highs[i])}]"
        failed = f" ({info.failed_folds[i]} failed)" if info.failed_folds[i] else ""
        rows.append(
            {
                "label": label,
                "k": f"{len(scores)}{failed}",
                "mean": format_number(mean),
                "std": format_number(std, 2),
                "ci": ci,
                "search": format_number(info.search_scores[i]),
                "test": format_number(info.test_scores[i]) if info.test_scores[i] is not None else "failed",
            }
        )
    return rows


def _test_rows(info: KFoldInfo) -> list[dict[str, str]]:
    return [
        {
            "pair": f"#{t.a} vs #{t.b}",
            "n": str(t.n),
            "diff": format_number(t.mean_diff, 3),
            "t": format_number(t.t_pvalue, 3),
            "w": format_number(t.wilcoxon_pvalue, 3),
            "verdict": t.verdict,
        }
        for t in info.tests
    ]
