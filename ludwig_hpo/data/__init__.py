"""Data: sources, seeded splits and k-fold indices, preprocessing fitted on the training split."""

from ludwig_hpo.data.preprocess import FeatureMeta, PreparedData, prepare
from ludwig_hpo.data.rows import batch_size_note
from ludwig_hpo.data.sources import dataset_folder, load_dataframe
from ludwig_hpo.data.split import kfold_indices, split_indices

__all__ = [
    "FeatureMeta",
    "PreparedData",
    "batch_size_note",
    "dataset_folder",
    "kfold_indices",
    "load_dataframe",
    "prepare",
    "split_indices",
]
