"""Experiment tracking: MLflow parent/child runs written from the sweep driver."""

from ludwig_hpo.tracking.mlflow_store import MlflowStore, metric_name, param_value
from ludwig_hpo.tracking.protocol import Tracker

__all__ = ["MlflowStore", "Tracker", "metric_name", "param_value"]
