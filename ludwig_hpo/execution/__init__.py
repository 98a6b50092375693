"""The Ray side of a sweep: trial specs, the worker entry, trainables, warm pools, fresh Train jobs,
the batch-size cache actor, executor choice, the cluster and resource planning."""
