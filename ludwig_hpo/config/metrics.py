"""The metrics each output feature type reports, with Ludwig's names, and whether larger is
better: the one table the schema checks ``hyperopt.metric`` against and the heads compute
(:mod:`ludwig_hpo.model.metrics`)."""

from __future__ import annotations

#: Metrics each output feature type reports, and whether larger is better. ``mae`` is the short
#: name of ``mean_absolute_error`` (both are reported, with the same value).
METRICS: dict[str, dict[str, bool]] = {
    "number": {
        "loss": False,
        "mean_squared_error": False,
        "mean_absolute_error": False,
        "mae": False,
        "root_mean_squared_error": False,
        "root_mean_squared_percentage_error": False,
        "mean_absolute_percentage_error": False,
        "r2": True,
    },
    "binary": {
        "loss": False,
        "accuracy": True,
        "precision": True,
        "recall": True,
        "specificity": True,
        "roc_auc": True,
    },
    "category": {"loss": False, "accuracy": True, "hits_at_k": True, "roc_auc": True},
    "set": {"loss": False, "jaccard": True},
    "vector": {"loss": False, "mean_squared_error": False, "mean_absolute_error": False, "r2": True},
    # model_type llm's text output: teacher-forced (loss, perplexity = exp(loss), the share of
    # target tokens predicted, the share of rows whose every target token is predicted) and on
    # generated outputs of a validation sample (exact match of the text, ROUGE-L F-measure)
    "text": {
        "loss": False,
        "perplexity": False,
        "token_accuracy": True,
        "sequence_accuracy": True,
        "exact_match": True,
        "rouge_l": True,
    },
    "combined": {"loss": False},
}
#: The ``text`` metrics scored on generated outputs (a bounded validation sample), not teacher-forced.
GENERATED_METRICS = ("exact_match", "rouge_l")
