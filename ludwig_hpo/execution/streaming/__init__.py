"""Ray Data pipelines of a streamed dataset (the pure batch code is :mod:`ludwig_hpo.data.streaming`)."""
