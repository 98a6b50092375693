"""Training, torch only, on every rank: the epoch report's keys, the worker loop, evaluation,
checkpoints, the batch-size search and probe, the DDP/FSDP strategy and precision.

Import the modules themselves (``ludwig_hpo.train.loop``, ...): this package imports nothing,
so :mod:`ludwig_hpo.train.report_keys` stays free of torch for the driver and the report source.
"""
