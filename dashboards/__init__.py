"""Sweep reports: trials table → figure info → plotly figures → one HTML page.

``build_report(result, report_path, hiplot_path)`` writes the report page and its HiPlot page
for a :class:`ludwig_hpo.results.SweepResult`; ``load_sweep_result(uri, experiment=... | run_id=...)``
rebuilds that result from the sweep's MLflow runs alone. ``trials_table(result)`` (one row
per trial), ``epochs_table(result)`` (one row per trial and epoch) and
``kfold_table(result)`` (one row per k-fold or test score) are the tidy tables everything
else starts from.
"""

from dashboards.mlflow_source import load_sweep_result
from dashboards.report import build_report
from dashboards.table import epochs_table, kfold_table, trials_table

__all__ = ["build_report", "epochs_table", "kfold_table", "load_sweep_result", "trials_table"]
