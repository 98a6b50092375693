"""Data larger than memory: sources of many files, splits by a hash of each row, preprocessing
fitted in one distributed pass and applied lazily (see :mod:`ludwig_hpo.data.streaming.record`).

Everything here is Ray-free and pure (pandas, numpy, pyarrow): what runs on Ray Data lives in
:mod:`ludwig_hpo.execution.streaming`, which hands these functions one batch at a time.
"""
