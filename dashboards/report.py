"""The sweep report: one self-contained HTML page (plus its HiPlot page) per sweep."""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

import jinja2
import plotly.graph_objects as go
from markupsafe import Markup

from dashboards._format import (
    LABEL_ORDER,
    MISSING,
    format_duration,
    format_number,
    label_css,
    metric_title,
)
from dashboards._write import write_text_atomic
from dashboards.best_config import best_config
from dashboards.contour import contour_figure, contour_info
from dashboards.curves import curves_figure, curves_info
from dashboards.generated import generated_info
from dashboards.hiplot_page import hiplot_notes, write_hiplot_page
from dashboards.history import history_figure, history_info
from dashboards.importance import importance_figure, importance_info
from dashboards.kfold import KFoldInfo, kfold_figure, kfold_info, optimism_sentence
from dashboards.links import RunIds, run_url
from dashboards.parallel import parallel_coordinates_figure, parallel_coordinates_info
from dashboards.pareto import pareto_figure, pareto_info
from dashboards.slices import rank_figure, rank_info, slice_figure, slice_info
from dashboards.table import trials_table
from dashboards.trials_html import table_view
from ludwig_hpo.results import SweepResult
from ludwig_hpo.tracking.layout import HIPLOT_ARTIFACT, REPORT_ARTIFACT, SWEEP_FILE_ARTIFACT, TEST_SCORE_PREFIX

#: The report's two files, logged to the sweep's parent run under the same names.
REPORT_FILE = REPORT_ARTIFACT
HIPLOT_FILE = HIPLOT_ARTIFACT

# div ids of the figures in report.html
PARALLEL_DIV_ID = "parallel-coordinates"
HISTORY_DIV_ID = "optimization-history"
KFOLD_DIV_ID = "kfold-vs-test"
IMPORTANCE_DIV_ID = "parameter-importance"
CURVES_DIV_ID = "learning-curves"
PARETO_DIV_ID = "pareto-front"
SLICE_DIV_ID = "slice-plots"
CONTOUR_DIV_ID = "contour-plot"
RANK_DIV_ID = "rank-plot"
#: ids of the page's other parts a browser test can find
TRIALS_TABLE_ID = "trials-table"
TRIALS_FILTER_ID = "trials-filter"
TRIALS_STATUS_FILTER_ID = "trials-status-filter"
BEST_CONFIG_ID = "best-config"
GENERATED_ID = "generated-outputs"
LIVE_BANNER_ID = "live-banner"
#: while the sweep runs, the live page reloads itself this often (seconds)
LIVE_REFRESH_S = 30

_PLOTLY_CONFIG = {"displaylogo": False, "responsive": True}


def build_report(
    result: SweepResult,
    report_path: Path,
    hiplot_path: Path,
    *,
    mlflow_ui_url: str | None = None,
    run_ids: RunIds | None = None,
    live: bool = False,
) -> Path:
    """Write the sweep's report to ``report_path`` and return it.

    Writes ``hiplot_path`` (HiPlot view of the trials table) and then ``report_path``
    (the caller names both, e.g. a sweep folder's ``report.html`` and ``hiplot.html``): a
    header (sweep name, metric and goal, trial counts by state, wall time, best trial with
    the ``hpo train`` command lines that train its configuration again and its metrics),
    parallel coordinates (axes by fANOVA importance), parameter importance with the
    direction of each effect, slice plots (the metric against each parameter), a contour
    of the two most important parameters, a rank plot, the optimization history, learning
    curves, an llm sweep's generated outputs of its best trials (prompt, reference, answer),
    metric vs wall time with its Pareto front, k-fold vs test (figure, confidence
    intervals, selection optimism and paired tests, or a note that it was not run), failed
    trials' errors and the trials table (sortable and filterable by a small inline script).
    Runs in the sweep driver or ``hpo report`` (``bench/report_build.py`` times it on large
    sweeps).

    Args:
        result: the sweep (finished, or as it stands while it runs).
        report_path, hiplot_path: where the two pages go.
        mlflow_ui_url: the MLflow UI's address (e.g. what ``hpo ui`` prints); with
            ``run_ids``, each trial links to its run at
            ``<ui>/#/experiments/<experiment id>/runs/<run id>``. Defaults to the tracking
            URI when that is an ``http(s)`` server.
        run_ids: the MLflow run of each trial (and their experiment); None: no links.
        live: the sweep is still running: the page says so and reloads itself every
            :data:`LIVE_REFRESH_S` seconds. The final report (False) has no reload.

    The page embeds plotly.js once (several MB) and works offline; it links and frames the
    HiPlot page by its path relative to the report's folder, so the two files travel
    together. Each file is written atomically. Their folders are created if missing.

    Raises:
        ValueError: a log-scaled parameter has a value <= 0.
        OSError: a folder cannot be created or a file written.
    """
    report_path, hiplot_path = Path(report_path), Path(hiplot_path)
    for folder in {report_path.parent, hiplot_path.parent}:
        folder.mkdir(parents=True, exist_ok=True)
    table = trials_table(result)
    write_hiplot_page(table, hiplot_path, result.parameters)

    kfold = kfold_info(result)
    importance = importance_info(result)
    figures = [
        (parallel_coordinates_figure(parallel_coordinates_info(result, importance.params)), PARALLEL_DIV_ID),
        (importance_figure(importance), IMPORTANCE_DIV_ID),
        (slice_figure(slice_info(result, importance.params)), SLICE_DIV_ID),
        (contour_figure(contour_info(result, importance.params)), CONTOUR_DIV_ID),
        (rank_figure(rank_info(result, importance.params)), RANK_DIV_ID),
        (history_figure(history_info(result)), HISTORY_DIV_ID),
        (curves_figure(curves_info(result)), CURVES_DIV_ID),
        (pareto_figure(pareto_info(result)), PARETO_DIV_ID),
    ]
    if kfold is not None:
        figures.append((kfold_figure(kfold), KFOLD_DIV_ID))
    html = {div_id: _figure_html(fig, div_id, first=i == 0) for i, (fig, div_id) in enumerate(figures)}

    ui = mlflow_ui_url or (result.tracking_uri if result.tracking_uri.startswith(("http://", "https://")) else None)
    links = {}
    if ui and run_ids is not None:
        links = {tid: run_url(ui, run_ids.experiment_id, rid) for tid, rid in run_ids.by_trial.items()}
    page = (
        _environment()
        .get_template("report.html.j2")
        .render(
            sweep=_header(result),
            live=live,
            live_refresh_s=LIVE_REFRESH_S,
            ids={
                "table": TRIALS_TABLE_ID,
                "filter": TRIALS_FILTER_ID,
                "status_filter": TRIALS_STATUS_FILTER_ID,
                "best": BEST_CONFIG_ID,
                "live": LIVE_BANNER_ID,
                "generated": GENERATED_ID,
            },
            generated=generated_info(result),
            figures=html,
            div={
                "parallel": PARALLEL_DIV_ID,
                "history": HISTORY_DIV_ID,
                "importance": IMPORTANCE_DIV_ID,
                "slice": SLICE_DIV_ID,
                "contour": CONTOUR_DIV_ID,
                "rank": RANK_DIV_ID,
                "curves": CURVES_DIV_ID,
                "pareto": PARETO_DIV_ID,
                "kfold": KFOLD_DIV_ID,
            },
            importance_note=_importance_note(importance),
            kfold_rows=_kfold_rows(kfold) if kfold is not None else [],
            kfold_metric=kfold.y_title if kfold is not None else "",
            kfold_ci_note=kfold.ci_note if kfold is not None else "",
            kfold_optimism=optimism_sentence(kfold) if kfold is not None else "",
            kfold_tests=[t.verdict for t in kfold.tests] if kfold is not None else [],
            kfold_test_rows=_test_rows(kfold) if kfold is not None else [],
            hiplot_file=Path(os.path.relpath(hiplot_path.resolve(), report_path.parent.resolve())).as_posix(),
            hiplot_notes=hiplot_notes(table),
            failed=[(t.trial_id, t.error or MISSING) for t in result.trials if t.label == "failed"],
            table=table_view(table, result.best_trial_id, links),
            status_labels=[s for s in LABEL_ORDER if s in set(table["status"])],
        )
    )
    write_text_atomic(report_path, page)
    return report_path


_LIVE_PARTS = re.compile(r"<!--live-->.*?<!--/live-->", re.DOTALL)


def freeze_live_page(report_path: Path) -> bool:
    """Remove a live page's self-reload and its "live" banner (the parts :func:`build_report`
    writes with ``live=True`` only), atomically; returns False when the page has none. Cheap:
    the page is not built again. For a sweep that stopped before its final report.

    Raises:
        OSError: the page cannot be read or written.
    """
    page = Path(report_path).read_text(encoding="utf-8")
    frozen = _LIVE_PARTS.sub("", page)
    if frozen == page:
        return False
    write_text_atomic(Path(report_path), frozen)
    return True


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


def _header(result: SweepResult) -> dict[str, Any]:
    counts: Counter[str] = Counter(t.label for t in result.trials)
    best = next((t for t in result.trials if t.trial_id == result.best_trial_id), None)
    sweep_file = (Path(result.output_dir) / SWEEP_FILE_ARTIFACT).as_posix() if result.output_dir else "SWEEP.yaml"
    again = best_config(best, sweep_file, result.output_dir) if best else None
    return {
        "name": result.name,
        "metric": result.metric,
        "goal": result.goal,
        "metric_title": metric_title(result),
        "objectives": list(result.objectives),
        "n_trials": len(result.trials),
        "status_counts": [(label_css(s), s, counts[s]) for s in LABEL_ORDER if counts[s]],
        "wall_time": format_duration(result.wall_time_s),
        "stop_reason": result.stop_reason,
        "wall_time_s": "" if result.wall_time_s is None else f"{result.wall_time_s:.1f}",
        "output_dir": result.output_dir,
        "tracking_uri": result.tracking_uri,
        "best_trial_id": result.best_trial_id,
        "best_value": format_number(best.objective_best) if best else None,
        "best_sets": again.set_args if again else [],
        "best_command": again.command if again else "",
        "best_from_sweep": again.from_sweep_command if again else None,
        "best_batch_size": best.batch_size if best else None,
        "best_metrics": _best_metrics(best) if best else [],
        "final_model": _final_model(result),
    }


def _final_model(result: SweepResult) -> dict[str, Any] | None:
    """What the summary says about the final model with ``kfold``: its configuration, how it
    was chosen (``kfold.select``, the rule and why) and trained, and its test score beside the
    search's best trial's; None without the k-fold phase."""
    sel = result.selection
    if sel is None:
        return None
    key = TEST_SCORE_PREFIX + result.metric.split("/", 1)[-1]
    test, search = result.test_scores.get(key), sel.search_test_scores.get(key)
    return {
        "config": f"config #{sel.config_rank} (trial {sel.trial_id})",
        "select": sel.select,
        "chosen_by": "best CV mean" if sel.chosen_by == "cv_mean" else "search's best",
        "reason": sel.reason,
        "trained": (
            f"retrained on train+validation ({sel.train_rows} rows, {sel.epochs} epochs)"
            if sel.retrained
            else "the search trial's best weights"
        ),
        "test": f"{key} = {format_number(test)}" if test is not None else None,
        "search_test": format_number(search) if sel.retrained and search is not None else None,
    }


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
        "trials count with the best value they reached. The direction of each effect is the sign of "
        "Spearman's rank correlation of the parameter with the metric (green: higher values are "
        "better, orange: lower values are better, grey: a categorical parameter)."
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
