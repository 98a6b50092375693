"""Where a sweep's record lives in MLflow: every run, tag, param, metric and artifact name the
sweep writes and the report source reads back.

The writer (the sweep driver, :class:`~ludwig_hpo.tracking.sink.MlflowSink`) and the reader
(:mod:`dashboards`, ``hpo report``) both take their names from here, so a report rebuilt from
MLflow alone reads what the sweep wrote. Keys of the epoch report that are logged as they are
(``objective``, the ``<split>/<feature>/<metric>`` scores, the once-logged batch sizes) keep
their home in :mod:`ludwig_hpo.train.report_keys`; they are named here only where MLflow gives
them a role of their own (a tag, the objective metric). Plain constants and pure functions
that import only the standard library and the report keys: any process may import it.

A sweep is one parent run (``run_kind=sweep``) and its child runs, nested through MLflow's
:data:`PARENT_RUN_ID_TAG`: one per search trial (``run_kind=trial``), one per k-fold fold
(``kfold``) and one per test re-run (``test``). Metrics are logged with ``step`` = epoch (1-based;
0 for values logged once).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Final

from ludwig_hpo.train.report_keys import (
    BATCH_SIZE_SOURCE,
    BATCH_SIZE_TRIED,
    OBJECTIVE,
    ONCE_KEYS,
    RESUMED_FROM_EPOCH,
    TRIAL_ID,
)

# ------------------------------------------------------------------------------ every run
#: MLflow's own tag nesting a run under its parent (``mlflow.utils.mlflow_tags.MLFLOW_PARENT_RUN_ID``).
PARENT_RUN_ID_TAG: Final = "mlflow.parentRunId"
#: What a run is: one of the ``RUN_KIND_*`` values.
RUN_KIND_TAG: Final = "run_kind"
RUN_KIND_SWEEP: Final = "sweep"
RUN_KIND_TRIAL: Final = "trial"
RUN_KIND_KFOLD: Final = "kfold"
RUN_KIND_TEST: Final = "test"
#: The sweep phase a child run belongs to: ``search`` or ``kfold`` (k-fold and test runs).
PHASE_TAG: Final = "phase"
PHASE_SEARCH: Final = "search"
PHASE_KFOLD: Final = "kfold"

# ------------------------------------------------------------------------------ the experiment
#: MLflow's experiment tag choosing what its UI shows first; a sweep's experiment is one of model
#: training (runs, metrics, models), not of GenAI development (traces).
EXPERIMENT_KIND_TAG: Final = "mlflow.experimentKind"
EXPERIMENT_KIND_MODEL_TRAINING: Final = "custom_model_development"
#: Experiment tag of the run-list view ``hpo ui`` opens (MLflow's shared-view tag prefix + our key);
#: the UI applies it when the URL carries ``viewStateShareKey=<key>`` (see tracking/ui_view.py).
SHARED_VIEW_TAG_PREFIX: Final = "mlflow.sharedViewState."
SWEEP_VIEW_KEY: Final = "ludwig_hpo_sweep"

# ------------------------------------------------------------------------------ parent run
#: The parent run is named ``<sweep name>-<start time in this format>`` (local time).
PARENT_RUN_STAMP_FORMAT: Final = "%Y%m%d-%H%M%S"
_PARENT_RUN_STAMP = re.compile(r"-\d{8}-\d{6}$")

# params: what the search optimizes and how
METRIC_PARAM: Final = "metric"  # the reported key the search optimizes
GOAL_PARAM: Final = "goal"  # minimize | maximize
NUM_SAMPLES_PARAM: Final = "num_samples"
SEARCH_ALG_PARAM: Final = "search_alg"  # <type>/<sampler>
SEED_PARAM: Final = "seed"
SCHEDULER_PARAM: Final = "scheduler"
EPOCHS_PARAM: Final = "epochs"
NUM_WORKERS_PARAM: Final = "num_workers"
KFOLD_K_PARAM: Final = "kfold.k"
KFOLD_TOP_K_PARAM: Final = "kfold.top_k"
#: At the end: ``best.<path>`` for every parameter of the best trial.
BEST_PARAM_PREFIX: Final = "best."

# tags: where the sweep came from
SWEEP_FILE_TAG: Final = "sweep_file"
SWEEP_FILE_SHA256_TAG: Final = "sweep_file_sha256"
HOST_TAG: Final = "host"
OUTPUT_DIR_TAG: Final = "output_dir"  # the output folder, resolved
#: ``version.<package>``: versions of this package, Python, torch, ray, optuna, mlflow.
VERSION_TAG_PREFIX: Final = "version."
GIT_COMMIT_TAG: Final = "git_commit"  # with "+dirty" when the work tree has uncommitted changes
#: MLflow's own commit tag (without "+dirty"), which its UI shows.
MLFLOW_GIT_COMMIT_TAG: Final = "mlflow.source.git.commit"
#: A multi-objective sweep's metrics and goals (:func:`objectives_tag_value`).
OBJECTIVES_TAG: Final = "objectives"
# tags: at the end
BEST_TRIAL_ID_TAG: Final = "best_trial_id"
BEST_MODEL_EPOCH_TAG: Final = "best_model.epoch"  # the epoch whose weights best_model/model.pt holds
BEST_MODEL_URI_TAG: Final = "best_model_uri"  # models:/<model id> (runs:/<parent run id>/model loads it too)
PYTORCH_MODEL_URI_TAG: Final = "pytorch_model_uri"  # models:/<model id> of the PyTorch-flavour model
REGISTERED_MODEL_TAG: Final = "registered_model"  # <registered name>/<version>
#: With ``kfold``, which configuration the final model (``best_model/``, the logged model) is:
#: ``kfold.select`` (``cv`` | ``search``), its rank in the search, its search trial, the rule
#: that chose it (``cv_mean`` | ``search_best``) and why, whether it was retrained on
#: train+validation (``true`` | ``false``) and on how many rows.
FINAL_MODEL_SELECT_TAG: Final = "final_model.select"
FINAL_MODEL_CONFIG_RANK_TAG: Final = "final_model.config_rank"
FINAL_MODEL_TRIAL_ID_TAG: Final = "final_model.source_trial_id"
FINAL_MODEL_CHOSEN_BY_TAG: Final = "final_model.chosen_by"
FINAL_MODEL_REASON_TAG: Final = "final_model.reason"
FINAL_MODEL_RETRAINED_TAG: Final = "final_model.retrained"
FINAL_MODEL_TRAIN_ROWS_TAG: Final = "final_model.train_rows"

#: The run's description, markdown (MLflow's own tag, shown on the run's overview page): the
#: best configuration, its scores and the k-fold and test scores of the top configurations.
DESCRIPTION_TAG: Final = "mlflow.note.content"
#: Why the search ended before its planned trials (``time budget reached after 2 of 8
#: trials``); absent when every planned trial ran. Text, so a tag.
STOP_REASON_TAG: Final = "stop_reason"

# metrics
#: ``best/<metric>``: the best trial's best value of the sweep's metric (step 0); also
#: ``best/<split>/<feature>/<metric>``: its other scores at that epoch.
BEST_METRIC_PREFIX: Final = "best/"
#: ``kfold/<config rank>/<statistic>`` (step 0): the k-fold re-evaluation of each top
#: configuration on the sweep's ``<feature>/<metric>``: the mean over the folds, the half-width
#: of its 95 % t confidence interval (mean ± ci95; two folds at least), the test split's score.
KFOLD_METRIC_PREFIX: Final = "kfold/"
KFOLD_MEAN: Final = "mean"
KFOLD_CI95: Final = "ci95"
KFOLD_TEST_SCORE: Final = "test"
#: ``test/<feature>/<metric>`` and ``test/combined/loss`` (step 0): the best trial's best weights
#: scored on the test split (the epoch report's score keys of the split ``test``).
TEST_SCORE_PREFIX: Final = "test/"
BATCH_SIZE_CACHE_HITS_METRIC: Final = "batch_size_cache_hits"
BATCH_SIZE_CACHE_LOOKUPS_METRIC: Final = "batch_size_cache_lookups"
#: The sweep's wall time in seconds as the sweep measured it (``results.json``'s ``wall_time_s``,
#: step 0): what ``hpo report`` shows, so the console, results.json and every report agree.
SWEEP_WALL_TIME_METRIC: Final = "sweep_wall_time_s"

# artifacts (a file logged with its own name keeps it: these are also the output folder's names)
SWEEP_FILE_ARTIFACT: Final = "sweep.yaml"  # the sweep file as written
SWEEP_RESOLVED_ARTIFACT: Final = "sweep_resolved.yaml"  # every default filled in
SEARCH_SPACE_ARTIFACT: Final = "search_space.json"  # {path: declared space + how the report draws it}
BEST_TRIAL_ARTIFACT: Final = "best_trial.json"  # trial id, metric, goal, value, parameters
RESULTS_ARTIFACT: Final = "results.json"
REPORT_ARTIFACT: Final = "report.html"
HIPLOT_ARTIFACT: Final = "hiplot.html"
BEST_MODEL_ARTIFACT: Final = "best_model"  # folder: weights, config, preprocessing
MODEL_ARTIFACT: Final = (
    "model"  # the parent run's MLflow logged model: raw rows in, Ludwig-named predictions out (pyfunc)
)
PYTORCH_MODEL_ARTIFACT: Final = "pytorch_model"  # the same model in MLflow's PyTorch flavour: prepared columns in

# ------------------------------------------------------------------------------ child runs
#: The trial's Tune id, the key by which a resumed sweep finds the trial's run again.
TRIAL_ID_TAG: Final = TRIAL_ID
#: MLflow's run status again, as the sweep decided it: FINISHED, KILLED, FAILED (RUNNING until then).
STATUS_TAG: Final = "status"
#: Who stopped the trial before its last epoch (one of the ``STOPPED_BY_*`` values): a FINISHED
#: run for the scheduler and the time budget (stopped early, nothing wrong), a KILLED run for an
#: interruption. Absent when the trial ran every epoch. Older stores hold early-stopped trials as
#: KILLED runs with ``scheduler`` or ``time budget``.
STOPPED_BY_TAG: Final = "stopped_by"
STOPPED_BY_SCHEDULER: Final = "scheduler"
#: its own ``trainer.early_stop`` patience ran out (the epoch report's ``end_reason``)
STOPPED_BY_EARLY_STOP: Final = "early_stop"
STOPPED_BY_TIME_BUDGET: Final = "time budget"
STOPPED_BY_INTERRUPTED: Final = "interrupted"
STOPPED_AT_EPOCH_TAG: Final = "stopped_at_epoch"
STOPPED_AT_RUNG_TAG: Final = "stopped_at_rung"  # 0 = the scheduler's first rung
#: Why a run was closed by the sweep rather than by its trial (runs lost with an interrupted driver).
NOTE_TAG: Final = "note"
#: FAILED runs: the error's first line (the traceback is the :data:`ERROR_ARTIFACT`).
ERROR_TAG: Final = "error"
#: Times the trial ran again after failing; ``retry_<n>_error`` the error of the n-th failure.
RETRIES_TAG: Final = "retries"
#: The epoch a trial continued from (a restored, retried or PBT-cloned trial).
RESUMED_FROM_EPOCH_TAG: Final = RESUMED_FROM_EPOCH
#: Decided inside the trial and logged once, as tags, from its first report.
ONCE_TAGS: Final = ONCE_KEYS
#: The per-worker batch size (one of :data:`ONCE_TAGS`).
BATCH_SIZE_TAG: Final = "batch_size"
#: The sizes the batch-size search tried (``"<size>:<samples/s or oom>;..."``).
BATCH_SIZE_TRIED_TAG: Final = BATCH_SIZE_TRIED
#: ``hit`` or ``miss``: whether a ``batch_size: auto`` trial's size came from the sweep's cache.
BATCH_SIZE_CACHE_TAG: Final = "batch_size_cache"
BATCH_SIZE_CACHE_HIT: Final = "hit"
BATCH_SIZE_CACHE_MISS: Final = "miss"
#: Where a ``batch_size: auto`` trial's size came from: ``probe``, ``sweep cache`` or
#: ``persisted cache`` (one of :data:`ONCE_TAGS`).
BATCH_SIZE_SOURCE_TAG: Final = BATCH_SIZE_SOURCE
#: The tags a run's end sets from the trial's state (cleared when a resumed or retried trial's
#: run is reopened, so the run's tags describe how it finally ended).
END_STATE_TAGS: Final = (STATUS_TAG, STOPPED_BY_TAG, STOPPED_AT_EPOCH_TAG, STOPPED_AT_RUNG_TAG, ERROR_TAG)

#: Keys a trial run may hold as params although they are not searched parameters (the sweep logs
#: them as tags; a store whose runs hold them as params is read without taking them for parameters).
OLDER_RUN_PARAMS: Final = frozenset(ONCE_KEYS)

#: The value the search optimizes, per epoch. A search trial's run holds it under its reported
#: key only (the sweep's ``metric`` param, e.g. ``validation/label/loss``); k-fold and test runs,
#: and runs written by older versions, hold it as ``objective`` too.
OBJECTIVE_METRIC: Final = OBJECTIVE
#: Where a trial's wall time went, as tags set at its end (seconds; the four parts sum to the
#: total): logged once, so not per-step metrics.
TIME_TAG_PREFIX: Final = "time."
TIME_TOTAL_S: Final = "time.total_s"
TIME_SETUP_S: Final = "time.setup_s"  # outside the epoch loop and the batch-size search
TIME_BATCH_SIZE_TUNING_S: Final = "time.batch_size_tuning_s"
TIME_TRAINING_S: Final = "time.training_s"
TIME_EVALUATION_S: Final = "time.evaluation_s"
#: The prefix of the same figures as metrics, in runs written by older versions.
TIME_METRIC_PREFIX: Final = "time/"
#: The loss-weighted sum of the output features' losses: ``<split>/combined/loss``.
COMBINED_LOSS_SUFFIX: Final = "/combined/loss"
#: Parameters that change while a trial runs (PBT): ``hparam/<path>`` metrics (numbers, per
#: step) and ``hparam.<path>`` tags (the current value); a logged param cannot change.
HPARAM_METRIC_PREFIX: Final = "hparam/"
HPARAM_TAG_PREFIX: Final = "hparam."
#: Metrics with a ``/`` that are not ``<split>/<feature>/<metric>`` scores.
NON_SCORE_METRIC_PREFIXES: Final = (TIME_METRIC_PREFIX, HPARAM_METRIC_PREFIX)

CONFIG_ARTIFACT: Final = "config.yaml"  # the trial's resolved config
#: An llm trial's generated outputs at its best epoch (the epoch report's ``generated_sample``:
#: a JSON list of ``{"prompt", "reference", "generated"}``), rewritten when a better epoch comes.
GENERATED_SAMPLE_ARTIFACT: Final = "generated_sample.json"
ERROR_ARTIFACT: Final = "error.txt"  # FAILED runs: the traceback

# ------------------------------------------------------------------------------ k-fold and test runs
#: The fold index (``"0"``, ``"1"``...) or :data:`KFOLD_TEST`; a child run with it is no search trial.
KFOLD_TAG: Final = "kfold"
KFOLD_TEST: Final = "test"
#: The configuration's rank in the search (1 = best).
CONFIG_RANK_TAG: Final = "config_rank"
#: The search trial whose configuration the run re-evaluates.
SOURCE_TRIAL_ID_TAG: Final = "source_trial_id"


# ------------------------------------------------------------------------------ composed names
def parent_run_name(sweep_name: str, started: dt.datetime) -> str:
    """The parent run's name: ``<sweep name>-<YYYYmmdd-HHMMSS>``."""
    return f"{sweep_name}-{started.strftime(PARENT_RUN_STAMP_FORMAT)}"


def sweep_name_of(run_name: str) -> str:
    """The sweep's name from its parent run's name (the name itself when it has no stamp)."""
    return _PARENT_RUN_STAMP.sub("", run_name) or run_name


def trial_run_name(trial_id: str) -> str:
    """A search trial's run name: ``trial_<trial id>``."""
    return f"trial_{trial_id}"


def version_tag(package: str) -> str:
    """``version.<package>``."""
    return VERSION_TAG_PREFIX + package


def best_param(path: str) -> str:
    """``best.<path>``: the parent run's param of the best trial's value of ``path``."""
    return BEST_PARAM_PREFIX + path


def best_metric(metric: str) -> str:
    """``best/<metric>``: the parent run's metric of the best trial's best value."""
    return BEST_METRIC_PREFIX + metric


def kfold_metric(config_rank: int, statistic: str) -> str:
    """``kfold/<config rank>/<statistic>``: a parent run's metric of the k-fold re-evaluation
    (``statistic``: :data:`KFOLD_MEAN`, :data:`KFOLD_CI95` or :data:`KFOLD_TEST_SCORE`)."""
    return f"{KFOLD_METRIC_PREFIX}{config_rank}/{statistic}"


def registered_model_value(name: str, version: str) -> str:
    """The :data:`REGISTERED_MODEL_TAG` value: ``<name>/<version>``."""
    return f"{name}/{version}"


def retry_error_tag(retry: int) -> str:
    """``retry_<n>_error``: the error that made a trial run again the ``retry``-th time (1-based)."""
    return f"retry_{retry}_error"


def hparam_metric(path: str) -> str:
    """``hparam/<path>``: a mutated parameter's value per step (numbers only)."""
    return HPARAM_METRIC_PREFIX + path


def hparam_tag(path: str) -> str:
    """``hparam.<path>``: a mutated parameter's current value."""
    return HPARAM_TAG_PREFIX + path


def is_score_metric(name: str) -> bool:
    """Whether a child run's metric is a ``<split>/<feature>/<metric>`` score (not ``objective``,
    a counter, or a ``time/`` or ``hparam/`` metric)."""
    return "/" in name and not name.startswith(NON_SCORE_METRIC_PREFIXES)


def redundant_scores(names: set[str], keep: str | None = None) -> frozenset[str]:
    """The scores among ``names`` that repeat another one: in a sweep of one output feature a
    split's ``<split>/combined/loss`` is that feature's loss times its weight, the same curve.
    Of each such pair the combined loss goes, unless ``keep`` (the sweep's metric) is a combined
    loss: then the feature's losses go, in every split, so the metric keeps its name and each
    curve is there once. A trial's run and its epoch records do not hold them. Pure."""
    keep_combined = keep is not None and keep.endswith(COMBINED_LOSS_SUFFIX)
    out = set()
    for name in names:
        if name.endswith(COMBINED_LOSS_SUFFIX):
            split = name[: -len(COMBINED_LOSS_SUFFIX)]
            losses = [n for n in names if n.startswith(split + "/") and n.endswith("/loss") and n != name]
            if len(losses) == 1 and losses[0].count("/") == 2:
                out.add(losses[0] if keep_combined else name)
    return frozenset(out)


def objectives_tag_value(objectives: list[tuple[str, str]]) -> str:
    """The :data:`OBJECTIVES_TAG` value of a multi-objective sweep: a JSON list of
    ``{"metric": <reported key>, "goal": minimize | maximize}``, in the order given."""
    return json.dumps([{"metric": k, "goal": g} for k, g in objectives])


def parse_objectives_tag(text: str | None) -> list[tuple[str, str]]:
    """``[(reported key, goal)]`` from an :data:`OBJECTIVES_TAG` value; empty when there is
    none, it cannot be read, or it names fewer than two objectives or an unknown goal (the
    report then treats the sweep as single-metric)."""
    try:
        items = json.loads(text or "[]")
        out = [(str(o["metric"]), str(o["goal"])) for o in items]
    except (ValueError, TypeError, KeyError):
        return []
    if len(out) < 2 or any(g not in ("minimize", "maximize") for _, g in out):
        return []
    return out
