"""Sweep-file language: typed schema, the YAML loader, dotted parameter paths."""

from ludwig_hpo.config.loader import LoadedSweep, load_sweep, resolve_trial_config
from ludwig_hpo.config.metrics import METRICS
from ludwig_hpo.config.paths import PathError, apply_params
from ludwig_hpo.config.schema import SweepConfig

__all__ = ["LoadedSweep", "METRICS", "PathError", "SweepConfig", "apply_params", "load_sweep", "resolve_trial_config"]
