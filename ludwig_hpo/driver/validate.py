"""``hpo validate``: every check a sweep runs before it creates anything (the file, its
dataset read and preprocessed, the resources, the executor, the tracking store's place), and
what the sweep would do, without starting Ray. Runs in the command's own process."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

#: What ``hpo validate`` says of a model config without a ``hyperopt`` section.
TRAIN_ONLY = "valid for hpo train; a sweep needs a hyperopt section"
#: What ``hpo validate`` says without ``--model``.
MODEL_NOT_BUILT = (
    "losses and encoders not built against the data (hpo validate --model builds them; "
    "hpo sweep and hpo train do before any trial)"
)


def validate_lines(sweep_file: Path, dataset: Path | None = None, *, model: bool = False) -> list[str]:
    """The lines ``hpo validate`` prints: ``<file>: valid``, then the sweep's features and
    metric, the search, the data's rows per split, resources, executor, k-fold, the output
    folder and the MLflow store. Every check runs before any line is made, so "valid" is said
    only of a file that passed them all. A file without ``hyperopt`` (a Ludwig model config)
    is checked as ``hpo train`` runs it: ``<file>: valid for hpo train; a sweep needs a
    hyperopt section``, then the same lines but the search's (its folder: ``<name>-train``).

    Args:
        sweep_file: the sweep file (or a Ludwig config).
        dataset: a CSV/Parquet file replacing ``dataset.source``.
        model: also build the model's losses and encoders against the prepared data
            (:func:`~ludwig_hpo.model.checks.check_prepared`, as ``hpo sweep`` / ``hpo train``
            do before any trial). It imports torch; without it the command imports neither
            torch nor Ray and checks the Hugging Face models from their JSON files only.

    Raises:
        UserError: the file, its dataset or the resources are wrong (one line naming the fix).
    """
    from ludwig_hpo.config import load_sweep
    from ludwig_hpo.config.backend import unused_key_notes
    from ludwig_hpo.config.describe import describe_search, describe_sweep
    from ludwig_hpo.data import load_dataframe
    from ludwig_hpo.driver.paths import choose_output_dir
    from ludwig_hpo.driver.single_run import single_run_sweep
    from ludwig_hpo.driver.streamed_checks import check_streamed_sweep, in_memory_line
    from ludwig_hpo.execution.cluster import local_plan
    from ludwig_hpo.execution.executor import choose_executor
    from ludwig_hpo.model.hf_checks import offline_view
    from ludwig_hpo.tracking.resolve import resolve_tracking

    loaded = load_sweep(sweep_file, dataset=dataset, search=False)
    if not loaded.searched:
        loaded = single_run_sweep(loaded)
    cfg = loaded.config
    pbt = None
    if cfg.hyperopt.scheduler.type == "pbt":
        from ludwig_hpo.search.schedulers import pbt_checkpoints

        pbt = pbt_checkpoints(cfg.hyperopt)
    lines = [*describe_sweep(cfg), *(describe_search(cfg, pbt_checkpoints=pbt) if loaded.searched else [])]
    data_cfg, hf_notes = offline_view(cfg)  # no network here: a hub tokenizer not cached is a note
    plan = local_plan(cfg, loaded.path)  # quantization without a GPU is refused here too
    if (streamed := check_streamed_sweep(loaded, plan)) is not None:
        lines.append(streamed)  # its rows are split and fitted by hpo sweep, with Ray Data
    elif cfg.is_llm and not _base_model_local(cfg, str(sweep_file)):
        df = load_dataframe(cfg.dataset.source, loaded.base_dir)
        lines.append(_llm_rows_unprepared(df, cfg))  # its tokenizer is not here: nothing to tokenise with
        lines.extend([*hf_notes, *_llm_notes(cfg, str(sweep_file))])
    else:
        df = load_dataframe(cfg.dataset.source, loaded.base_dir)
        lines.extend(_prepared_lines(df, cfg, data_cfg, hf_notes, loaded, str(sweep_file), model))
    if streamed is None and (memory := in_memory_line(loaded)) is not None:
        lines.append(memory)  # why dataset.streaming did not stream it
    lines.append(f"resources: {plan.describe()}")
    if (note := plan.concurrency_note()) is not None:
        lines.append(note)
    lines += unused_key_notes(cfg.backend, cfg.hyperopt.executor.kubernetes_namespace)
    choice = choose_executor(cfg.backend.trial_executor, use_gpu=plan.use_gpu, pbt=cfg.hyperopt.scheduler.type == "pbt")
    lines.append(f"trial executor: {choice.executor} ({choice.reason})")
    if cfg.kfold:
        final = (
            "the best CV mean the paired test tells from the search's best, retrained on train+validation"
            if cfg.kfold.select == "cv"
            else "the search's best trial's weights"
        )
        lines.append(
            f"k-fold: top {cfg.kfold.top_k} configurations x {cfg.kfold.k} folds + test; "
            f"final model (kfold.select: {cfg.kfold.select}): {final}"
        )
    results = choose_output_dir(loaded, None)
    lines.append(f"results: {results}")
    lines.append(f"mlflow: {resolve_tracking(cfg.tracking, cfg.name, os.environ, results).describe()}")
    return [
        f"{sweep_file}: {'valid' if loaded.searched else TRAIN_ONLY}",
        *(f"warning: {w}" for w in loaded.warnings),
        *lines,
    ]


def _prepared_lines(
    df: Any, cfg: Any, data_cfg: Any, hf_notes: list[str], loaded: Any, source: str, model: bool
) -> list[str]:
    """The data lines of ``hpo validate``: the rows prepared (``data_cfg``: the config without
    what cannot be read offline), the model checks (``model``: built against the data, else
    from the models' files), the notes. Driver.

    Raises:
        UserError: the data or a model check fails (one line).
    """
    from ludwig_hpo.config.describe import feature_stats_lines
    from ludwig_hpo.data import batch_size_note, dataset_folder, prepare
    from ludwig_hpo.model.hf_checks import check_models_available, check_text_encoders

    data = prepare(df, data_cfg, dataset_folder(cfg.dataset.source, loaded.base_dir))
    if model:
        from ludwig_hpo.model.checks import check_prepared

        hf_notes = hf_notes + check_prepared(data_cfg, data.meta, source, network=False)
    else:
        hf_notes = hf_notes + check_models_available(data_cfg, source, network=False)
        check_text_encoders(data_cfg.input_features, data.meta, source)
        hf_notes += _llm_notes(cfg, source)
        hf_notes.append(f"model: {MODEL_NOT_BUILT}")
    lines = [
        f"data: {data.num_rows} rows ({', '.join(f'{k} {len(v)}' for k, v in data.splits.items())}); "
        f"features read and preprocessed without error"
    ]
    lines.extend(f"data: {filled.text()}" for filled in data.filled)
    lines.extend(f"data: {line}" for line in feature_stats_lines(data.meta, [f.name for f in data_cfg.input_features]))
    lines.extend(hf_notes)
    lines.extend(batch_size_note(cfg, len(data.splits["train"])))
    return lines


def _base_model_local(cfg: Any, source: str) -> bool:
    """Whether an llm's ``base_model`` is here (a folder, or in the local cache), so its
    tokenizer can prepare the rows offline. Driver.

    Raises:
        UserError: a name of neither form (one line at ``base_model``).
    """
    from ludwig_hpo.data import hf_loader
    from ludwig_hpo.errors import ConfigError

    try:
        return hf_loader.resolve(cfg.base_model).local
    except hf_loader.HFModelError as e:
        raise ConfigError(str(e), source=source, key="base_model", fix=e.fix) from e


def _llm_rows_unprepared(df: Any, cfg: Any) -> str:
    """The data line of an llm whose tokenizer is not here: its columns and prompt template
    checked against the rows (:func:`~ludwig_hpo.data.llm.render_prompts`), not tokenized.

    Raises:
        UserError: a missing column, a template naming a column the data lacks.
    """
    from ludwig_hpo.data.llm import render_prompts
    from ludwig_hpo.data.origin import DataOrigin
    from ludwig_hpo.data.rows import column_of

    origin = DataOrigin.of(df)
    feat, out = cfg.input_features[0], cfg.output_features[0]
    column = column_of(df, feat, "input_features", origin)
    column_of(df, out, "output_features", origin)
    prompt = cfg.prompt
    render_prompts(df, str(column.name), getattr(prompt, "template", None), getattr(prompt, "task", None), origin)
    return f"data: {len(df)} rows read, columns and prompt template checked; not tokenized (base_model is not here)"


def _llm_notes(cfg: Any, source: str) -> list[str]:
    """An llm's base model and adapter checked offline (:mod:`ludwig_hpo.model.llm_checks`);
    nothing for another model. Driver; imports torch and transformers for an llm only."""
    if not cfg.is_llm:
        return []
    from ludwig_hpo.model.llm_checks import check_base_model

    return check_base_model(cfg, source, network=False)
