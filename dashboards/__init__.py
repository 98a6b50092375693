"""Sweep reports: trials table → figure info → plotly figures → one HTML page.

``build_report(result, out_dir)`` writes ``report.html`` and ``hiplot.html`` for a
:class:`ludwig_hpo.results.SweepResult`; ``trials_table(result)`` is the one-row-per-trial
frame everything else starts from.
"""

from dashboards.report import build_report
from dashboards.table import trials_table

__all__ = ["build_report", "trials_table"]
