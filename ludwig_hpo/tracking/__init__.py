"""Experiment tracking: MLflow parent/child runs written from the sweep driver."""

from ludwig_hpo.tracking.mlflow_store import MlflowStore, metric_name, param_value

__all__ = ["MlflowStore", "metric_name", "param_value"]
