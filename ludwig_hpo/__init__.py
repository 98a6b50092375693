"""ludwig_hpo: declarative hyperparameter sweeps for PyTorch on Ray Tune, Optuna, Ray Train and MLflow.

The package imports nothing heavy at import time; Ray, torch and MLflow are imported by
the modules that need them.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
