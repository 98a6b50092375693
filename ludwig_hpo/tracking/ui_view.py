"""The column set MLflow's run list opens with for a sweep: its metric, its searched parameters.

MLflow's UI opens an experiment's run list on a few attribute columns (source, models, dataset)
and hides every metric and parameter behind "Show more columns". It also reads a *shared view*:
an experiment tag ``mlflow.sharedViewState.<key>`` holding the list's state as JSON
(``selectedColumns`` among it), applied when the page's URL carries ``viewStateShareKey=<key>``.
This module writes that tag for a sweep's experiment, so the URL ``hpo ui`` prints opens on the
parent run with its trials folded under it and the columns a sweep is judged by. Column ids are
the UI's own: ``<metrics|params|tags|attributes>.`<key>```. Driver process (``hpo ui``'s).
"""

from __future__ import annotations

import json
from typing import Final

from ludwig_hpo.tracking import layout
from ludwig_hpo.tracking.names import mlflow_key, name_of_key

#: The URL query that makes the UI apply the sweep's view (one per experiment, rewritten by
#: every ``hpo ui``).
SHARE_QUERY: Final = f"viewStateShareKey={layout.SWEEP_VIEW_KEY}"


def column(kind: str, key: str) -> str:
    """The UI's id of a run-list column, e.g. ``metrics.`validation/label/loss```. Pure."""
    return f"{kind}.`{key}`"


def sweep_columns(metric: str, searched: list[str]) -> list[str]:
    """The columns a sweep's run list shows, in order (pure).

    Args:
        metric: the reported key the search optimizes (a trial run's metric), e.g.
            ``"validation/label/loss"``; the parent run holds the best trial's value under
            ``best/<metric>``, shown beside it.
        searched: the searched parameters' dotted paths as written (their MLflow param keys are
            their :func:`~ludwig_hpo.tracking.names.mlflow_key` spelling).
    """
    cols = [
        column("attributes", "Duration"),
        column("metrics", mlflow_key(metric)),
        column("metrics", mlflow_key(layout.best_metric(metric))),
        column("tags", layout.STOPPED_BY_TAG),
    ]
    cols += [column("params", mlflow_key(p)) for p in searched]
    return cols


def view_state(metric: str, searched: list[str]) -> str:
    """The shared view's JSON: the sweep's columns, every run listed, no sort (a sort by a
    metric would flatten the parent/child tree). Pure."""
    state = {
        "searchFilter": "",
        "orderByKey": "attributes.start_time",
        "orderByAsc": False,
        "startTime": "ALL",
        "lifecycleFilter": "Active",
        "selectedColumns": sweep_columns(metric, searched),
        "runsHiddenMode": "SHOW_ALL",
    }
    return json.dumps(state)


def write_sweep_view(tracking_uri: str, experiment_id: str, parent_run_id: str) -> str | None:
    """Write the sweep's shared view on its experiment, from what its parent run records (the
    optimized metric) and its first trial's run (the searched parameters); return the URL query that opens it, or None
    when the parent run records no metric (then the UI's own columns are shown).

    Raises:
        mlflow.exceptions.MlflowException: the store cannot be read or written.
    """
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    params = client.get_run(parent_run_id).data.params
    metric = params.get(layout.METRIC_PARAM)
    if not metric:
        return None
    children = client.search_runs(
        [experiment_id],
        filter_string=f"tags.`{layout.PARENT_RUN_ID_TAG}` = '{parent_run_id}' and "
        f"tags.`{layout.RUN_KIND_TAG}` = '{layout.RUN_KIND_TRIAL}'",
        max_results=1,
    )
    if children:
        searched = [name_of_key(k) for k in children[0].data.params]
    else:  # no trial has started: the best configuration's params, once the sweep wrote them
        names = (name_of_key(key) for key in params)
        searched = [n[len(layout.BEST_PARAM_PREFIX) :] for n in names if n.startswith(layout.BEST_PARAM_PREFIX)]
    client.set_experiment_tag(
        experiment_id, layout.SHARED_VIEW_TAG_PREFIX + layout.SWEEP_VIEW_KEY, view_state(metric, searched)
    )
    return SHARE_QUERY
