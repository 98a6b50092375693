"""Experiment tracking: the sweep's MLflow parent and child runs.

:mod:`~ludwig_hpo.tracking.layout` names every tag, param, metric and artifact (for the writer and
the report source); :class:`~ludwig_hpo.tracking.protocol.Tracker` is what the sweep asks of its
store, which :class:`~ludwig_hpo.tracking.mlflow_store.MlflowStore` and its process proxy
:class:`~ludwig_hpo.tracking.process.StoreProcess` implement. Import the modules themselves: this
package imports nothing, so the layout stays light for the records and the report source.
"""
