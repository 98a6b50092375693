"""Plain records of a sweep (no heavy imports): trials, epochs, k-fold scores, the whole result."""

from ludwig_hpo.results.records import EpochRecord, KFoldRecord, ParamInfo, SweepResult, TrialRecord

__all__ = ["EpochRecord", "KFoldRecord", "ParamInfo", "SweepResult", "TrialRecord"]
