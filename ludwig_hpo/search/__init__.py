"""Search: sweep-file spaces to Optuna distributions; the searcher and the Tune scheduler."""

from ludwig_hpo.search.space import decode, param_infos, to_optuna

__all__ = ["decode", "param_infos", "to_optuna"]
