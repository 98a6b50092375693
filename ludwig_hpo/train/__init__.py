"""Training: the worker loop (flat, torch only), batch-size search and probe, the Tune trainable."""

from ludwig_hpo.train.batch_size import BatchSizeChoice, search_batch_size
from ludwig_hpo.train.loop import Job, train_loop

__all__ = ["BatchSizeChoice", "Job", "search_batch_size", "train_loop"]
