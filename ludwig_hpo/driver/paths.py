"""A sweep's output folder: the name of every file and folder in it, and which folder a sweep uses.

Layout of ``<output root>/<name>[_<n>]/``::

    sweep.yaml          the sweep file as run (a resume reads it when the original moved or changed)
    state.json          the phase reached (:mod:`ludwig_hpo.driver.state`)
    journal.jsonl       one line per ended trial (:mod:`ludwig_hpo.driver.journal`)
    results.json        the finished sweep's records (:mod:`ludwig_hpo.results.io`)
    report.html         the report, and hiplot.html, the HiPlot page it frames
    best_model/         model.pt (best weights), config.yaml (the trial's config), preprocessing.json
    mlflow.db           the embedded MLflow store, and mlartifacts/, its artifacts (when the sweep
                        has no other store, see :mod:`ludwig_hpo.tracking.resolve`)
    ray/                Tune's experiment folders (search/, kfold/) and Ray Train's trial storage (train/)

Pure except :func:`choose_output_dir` and :func:`default_output_dir`, which look at what exists.
Driver process only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ludwig_hpo.config.loader import LoadedSweep
from ludwig_hpo.tracking import layout
from ludwig_hpo.tracking.resolve import EMBEDDED_ARTIFACTS_FOLDER, EMBEDDED_STORE_FILE, sqlite_uri
from ludwig_hpo.train.report_keys import MODEL_FILE

#: Where sweeps go without ``--output`` or ``output_dir`` (relative to the current folder).
DEFAULT_OUTPUT_ROOT = Path("hpo_results")

#: The sweep's Tune experiments, each a folder under ``ray/`` (and the journal's ``experiment``).
Experiment = Literal["search", "kfold"]
SEARCH: Experiment = "search"
KFOLD: Experiment = "kfold"


@dataclass(frozen=True)
class SweepPaths:
    """Every file and folder of one sweep's output folder ``root`` (nothing is created here).

    The files the parent run also holds as artifacts (``sweep.yaml``, ``results.json``, the
    report's pages, ``best_model/``) take their names from :mod:`ludwig_hpo.tracking.layout`:
    a file is logged under its own name.
    """

    root: Path

    @property
    def sweep_file(self) -> Path:
        """``sweep.yaml``: the text of the sweep file the sweep started with."""
        return self.root / layout.SWEEP_FILE_ARTIFACT

    @property
    def state(self) -> Path:
        """``state.json``: the sweep's :class:`~ludwig_hpo.driver.state.SweepState`."""
        return self.root / "state.json"

    @property
    def state_tmp(self) -> Path:
        """``.state.json.tmp``: ``state.json`` being written (renamed over it when complete)."""
        return self.root / ".state.json.tmp"

    @property
    def journal(self) -> Path:
        """``journal.jsonl``: one JSON line per trial that ended."""
        return self.root / "journal.jsonl"

    @property
    def batch_sizes(self) -> Path:
        """The batch sizes this sweep's ``batch_size: auto`` trials tuned (``{"version", "entries"}``);
        a resumed sweep reuses them, like the user's persisted cache."""
        return self.root / "batch_sizes.json"

    @property
    def results(self) -> Path:
        """``results.json``: the finished sweep's :class:`~ludwig_hpo.results.SweepResult`."""
        return self.root / layout.RESULTS_ARTIFACT

    @property
    def report(self) -> Path:
        """``report.html``: the sweep's report page."""
        return self.root / layout.REPORT_ARTIFACT

    @property
    def hiplot(self) -> Path:
        """``hiplot.html``: the HiPlot page the report links and frames (by relative path)."""
        return self.root / layout.HIPLOT_ARTIFACT

    @property
    def best_model(self) -> Path:
        """``best_model/``: the best trial's weights, configuration and preprocessing."""
        return self.root / layout.BEST_MODEL_ARTIFACT

    @property
    def best_weights(self) -> Path:
        """``best_model/model.pt``: the best trial's best weights (``{"state_dict", "epoch"}``),
        a copy of a checkpoint's weights file."""
        return self.best_model / MODEL_FILE

    @property
    def best_config(self) -> Path:
        """``best_model/config.yaml``: the sweep file's mapping with the best trial's parameters."""
        return self.best_model / "config.yaml"

    @property
    def served_model(self) -> Path:
        """``model/``: the best model as an MLflow pyfunc model folder (raw rows in, Ludwig-named
        predictions out), as the parent run's logged model ``model`` holds it (``hpo predict DIR``)."""
        return self.root / layout.MODEL_ARTIFACT

    @property
    def best_preprocessing(self) -> Path:
        """``best_model/preprocessing.json``: the preprocessing fitted on the training split."""
        return self.best_model / "preprocessing.json"

    @property
    def mlflow_db(self) -> Path:
        """``mlflow.db``: the embedded MLflow store's SQLite file."""
        return self.root / EMBEDDED_STORE_FILE

    @property
    def tracking_uri(self) -> str:
        """The embedded store's tracking URI (``sqlite:///<absolute root>/mlflow.db``)."""
        return sqlite_uri(self.root)

    @property
    def artifacts(self) -> Path:
        """``mlartifacts/``: the embedded store's artifacts."""
        return self.root / EMBEDDED_ARTIFACTS_FOLDER

    @property
    def ray(self) -> Path:
        """``ray/``: Tune's storage path (absolute: Tune requires it)."""
        return (self.root / "ray").resolve()

    @property
    def ray_log(self) -> Path:
        """``ray.log``: what Ray told the driver about the local cluster (a worker's death, ...),
        one line each, without colour codes (the console shows the sweep's own lines)."""
        return self.root / "ray.log"

    @property
    def train_storage(self) -> Path:
        """``ray/train/``: Ray Train's storage of fresh multi-worker trials (one folder per trial id)."""
        return self.ray / "train"

    def experiment(self, name: Experiment) -> Path:
        """``ray/<name>/``: the folder of Tune experiment ``name`` (``search`` or ``kfold``)."""
        return self.ray / name

    def tuner_state(self, name: Experiment) -> Path:
        """``ray/<name>/tuner.pkl``: present once Tune started experiment ``name`` (it can be restored)."""
        return self.experiment(name) / "tuner.pkl"

    def kept_weights(self, trial_id: str) -> list[Path]:
        """The ``model.pt`` files of the checkpoints kept for a search trial, oldest first: its
        own Train storage (fresh multi-worker trials), else its Tune trial folder."""
        name = MODEL_FILE
        own = sorted(self.train_storage.glob(f"{trial_id}/checkpoint_*/{name}"))
        return own or sorted(self.experiment(SEARCH).glob(f"*_{trial_id}_*/checkpoint_*/{name}"))


def _output_root(loaded: LoadedSweep, output_root: Path | None) -> Path:
    return output_root or (Path(loaded.config.output_dir) if loaded.config.output_dir else DEFAULT_OUTPUT_ROOT)


def choose_output_dir(loaded: LoadedSweep, output_root: Path | None) -> Path:
    """``<root>/<name>``, or ``<name>_1``, ``_2``... if taken. ``root``: the ``--output`` option,
    else the file's ``output_dir`` (relative to the current folder), else ``hpo_results``."""
    root = _output_root(loaded, output_root)
    candidate, n = root / loaded.config.name, 0
    while candidate.exists():
        n += 1
        candidate = root / f"{loaded.config.name}_{n}"
    return candidate


def default_output_dir(loaded: LoadedSweep, output_root: Path | None) -> Path:
    """The latest existing output folder of this sweep name (``<name>``, ``<name>_1``, ...),
    where an unfinished sweep would be resumed; ``<root>/<name>`` when there is none."""
    root = _output_root(loaded, output_root)
    latest, n = root / loaded.config.name, 0
    while (root / f"{loaded.config.name}_{n + 1}").exists():
        n += 1
        latest = root / f"{loaded.config.name}_{n}"
    return latest
