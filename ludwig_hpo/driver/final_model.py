"""The sweep's final model: which model ``best_model/`` and the parent run's logged model hold,
and its scores on the test split. Driver process only, after the search and after the k-fold
phase.

Without ``kfold``, or with ``kfold.select: search``, it is the search's best trial's best
weights, exported right after the search. With ``kfold.select: cv`` (the default) the choice
waits for the k-fold scores (:func:`~ludwig_hpo.results.selection.select_configuration`): the
chosen configuration's k-fold test run, which trained it on train+validation for its search
trial's best epoch count, kept its final weights; they become the final model, scored on the
test split beside the search's best trial's weights. That run is a journaled k-fold trial, so a
resumed sweep makes the same choice from the same weights without training again.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rich.console import Console

from ludwig_hpo.config.loader import LoadedSweep
from ludwig_hpo.data import PreparedData
from ludwig_hpo.data.streaming.record import StreamedData
from ludwig_hpo.driver.console import say
from ludwig_hpo.driver.holdout import score_best_on_test
from ludwig_hpo.driver.sweep_run import SweepOutput
from ludwig_hpo.results import KFoldRecord, TrialRecord
from ludwig_hpo.results.selection import ModelSelection, select_configuration
from ludwig_hpo.tracking import layout
from ludwig_hpo.train.report_keys import MODEL_FILE, MODEL_TRAIN_ROWS


class FinalModel:
    """Export and score the sweep's final model (driver only).

    Call :meth:`after_search` once the search has ended, then :meth:`after_kfold` with the
    k-fold phase's results (when it ran); read :attr:`test_scores` and :attr:`selection`.

    Args:
        best: the search's best trial, None when no trial scored.
        checkpoints: the search trials' checkpoint folders holding their best weights, by trial id.
        loaded: the sweep file.
        data: the prepared data, or a streamed dataset; its test split is scored in the
            driver, on the CPU (a streamed one read from its files a batch at a time).
        output: the sweep's output folder, store and parent run.
        console: where the lines saying what was chosen go.
    """

    def __init__(
        self,
        best: TrialRecord | None,
        checkpoints: dict[str, str],
        *,
        loaded: LoadedSweep,
        data: PreparedData | StreamedData,
        output: SweepOutput,
        console: Console,
    ) -> None:
        self.best, self.checkpoints = best, checkpoints
        self.loaded, self.data, self.output, self.console = loaded, data, output, console
        kfold = loaded.config.kfold
        #: ``kfold.select: cv``: best_model/ is written after the k-fold phase
        self.deferred = kfold is not None and kfold.select == "cv"
        #: the final model's scores on the test split (``SweepResult.test_scores``)
        self.test_scores: dict[str, float] = {}
        #: the search's best trial's weights on the test split
        self.search_test_scores: dict[str, float] = {}
        self.selection: ModelSelection | None = None
        self._exported = False

    def _export(self, rec: TrialRecord, checkpoint: str | None) -> None:
        from ludwig_hpo.driver.export import export_best

        out = self.output
        export_best(
            rec,
            checkpoint,
            loaded=self.loaded,
            data=self.data,
            paths=out.paths,
            store=out.store,
            parent=out.parent,
            console=self.console,
        )
        self._exported = True

    def after_search(self) -> None:
        """Without ``kfold.select: cv``: export the search's best trial as ``best_model/`` (and
        the logged model) and score it on the test split. With it: only score the search's best
        weights on the test split, for comparison; the export waits for the k-fold phase."""
        best = self.best
        if best is None:
            return
        if not self.deferred:
            self._export(best, self.checkpoints.get(best.trial_id))
            self.test_scores = self.search_test_scores = self._score(best)
            return
        weights = self._search_weights(best)
        if weights is not None:
            say(self.console, f"test split: the search's best trial {best.trial_id}, for comparison")
            self.search_test_scores = self._score(best, weights)

    def after_kfold(self, top: list[TrialRecord], kfold: tuple[KFoldRecord, ...], retrained: dict[int, str]) -> None:
        """Choose the final model from the k-fold phase (``top``: the re-evaluated search
        records in rank order, with the parameters they were re-evaluated with; ``retrained``:
        the checkpoint folder of each configuration's retrained model, by rank), export it
        when ``kfold.select: cv``, tag the parent run and print the choice. Without a k-fold
        result it exports the search's best (``cv``), as :meth:`after_search` would have.
        """
        cfg = self.loaded.config
        selection = select_configuration(kfold, cfg.hyperopt.goal, cfg.kfold.select if cfg.kfold else "search")
        if selection is None:
            self._export_search_best()
            return
        if self.deferred:
            selection = self._export_retrained(selection, top, retrained)
        else:
            selection = dataclasses.replace(selection, search_test_scores=self.search_test_scores)
        self.selection = selection
        self._tag(selection)
        how = (
            f"retrained on train+validation ({selection.train_rows} rows, {selection.epochs} epochs)"
            if selection.retrained
            else "the search trial's best weights"
        )
        say(
            self.console,
            f"final model: config #{selection.config_rank} (trial {selection.trial_id}), {how}: {selection.reason}",
        )

    def _export_search_best(self) -> None:
        if self.deferred and not self._exported and self.best is not None:
            self._export(self.best, self.checkpoints.get(self.best.trial_id))
            self.test_scores = self._score(self.best)

    def _export_retrained(
        self, selection: ModelSelection, top: list[TrialRecord], retrained: dict[int, str]
    ) -> ModelSelection:
        """Export the chosen configuration's retrained weights; without them (its test run
        failed), the search's best trial's weights, said in a warning and in the reason."""
        import torch

        folder = retrained.get(selection.config_rank)
        weights = Path(folder) / MODEL_FILE if folder else None
        chosen = next((r for r in top if r.trial_id == selection.trial_id), None)
        if chosen is None or weights is None or not weights.is_file():
            say(
                self.console,
                f"warning: config #{selection.config_rank}'s run on train+validation left no weights; "
                "the final model is the search's best trial's best weights",
            )
            self._export_search_best()
            best = self.best
            return dataclasses.replace(
                selection,
                config_rank=1,
                trial_id=best.trial_id if best else selection.trial_id,
                chosen_by="search_best",
                reason=f"{selection.reason}; config #{selection.config_rank}'s retrained model is missing",
                search_test_scores=self.search_test_scores,
            )
        saved = torch.load(weights, map_location="cpu", weights_only=True)
        self._export(chosen, folder)
        self.test_scores = self._score(chosen)
        return dataclasses.replace(
            selection,
            retrained=True,
            epochs=saved.get("epoch"),
            train_rows=saved.get(MODEL_TRAIN_ROWS),
            search_test_scores=self.search_test_scores,
        )

    def _search_weights(self, best: TrialRecord) -> Path | None:
        """The ``model.pt`` holding the search's best trial's best weights: its reported
        checkpoint's, else the newest it kept (as :func:`~ludwig_hpo.driver.export.export_best`
        finds them)."""
        folder = self.checkpoints.get(best.trial_id)
        if folder and (Path(folder) / MODEL_FILE).is_file():
            return Path(folder) / MODEL_FILE
        kept = self.output.paths.kept_weights(best.trial_id)
        return kept[-1] if kept else None

    def _score(self, rec: TrialRecord, weights: Path | None = None) -> dict[str, float]:
        # a streamed test split is read from its files as it is scored (the local cluster has stopped)
        return score_best_on_test(rec, self.loaded, self.data, self.output.paths, self.console, weights)

    def _tag(self, s: ModelSelection) -> None:
        out = self.output
        tags = {
            layout.FINAL_MODEL_SELECT_TAG: s.select,
            layout.FINAL_MODEL_CONFIG_RANK_TAG: s.config_rank,
            layout.FINAL_MODEL_TRIAL_ID_TAG: s.trial_id,
            layout.FINAL_MODEL_CHOSEN_BY_TAG: s.chosen_by,
            layout.FINAL_MODEL_REASON_TAG: s.reason,
            layout.FINAL_MODEL_RETRAINED_TAG: str(s.retrained).lower(),
        }
        if s.train_rows is not None:
            tags[layout.FINAL_MODEL_TRAIN_ROWS_TAG] = s.train_rows
        out.store.set_tags(out.parent, tags)
