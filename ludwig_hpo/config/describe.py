"""What ``hpo validate`` and the sweep's console say about a sweep file: its features, metric
and the resolved search (algorithm, scheduler, budget, space). Pure: a validated config in,
lines of text out (no markup)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ludwig_hpo.config.hyperopt import HyperoptConfig
from ludwig_hpo.config.llm import describe_llm
from ludwig_hpo.config.schema import SweepConfig

#: Scheduler options not shown as ``key value`` (the type is the line's subject; ``max_t`` is
#: shown with its unit; PBT's mutations have their own line).
_HIDDEN_SCHEDULER_OPTIONS = ("type", "time_attr", "max_t", "hyperparam_mutations")


def show(v: object) -> str:
    """A config value as the sweep file would write it: ``true``/``false``, floats with ``%g``."""
    if isinstance(v, bool):
        return str(v).lower()
    return f"{v:g}" if isinstance(v, float) else str(v)


def trial_count_text(hp: HyperoptConfig) -> str:
    """``"12 trials (grid of 4 points x num_samples 3)"``: the search's trial count and why."""
    n, g = hp.num_trials, hp.grid_points
    if hp.search_alg.type == "grid":
        return f"{n} trials (every point of the grid once)"
    if g > 1:
        return f"{n} trials (grid of {g} points x num_samples {hp.executor.num_samples})"
    return f"{n} trials"


def describe_sweep(cfg: SweepConfig) -> list[str]:
    """The sweep's name, dataset, features (``name (type)``, inputs -> outputs) and optimized
    metric(s) with the epochs per trial; an llm's base model, adapter and prompt."""
    hp = cfg.hyperopt
    metrics = ", ".join(f"{k} ({g})" for k, g in cfg.objectives)
    return [
        f"name: {cfg.name}   dataset: {cfg.dataset.source}",
        f"features: {', '.join(f'{f.name} ({f.type})' for f in cfg.input_features)} -> "
        f"{', '.join(f'{f.name} ({f.type})' for f in cfg.output_features)}",
        f"metric{'s (Pareto front)' if hp.multi_objective else ''}: {metrics}   epochs per trial: {cfg.trainer.epochs}",
        *(describe_llm(cfg) if cfg.is_llm else []),
    ]


def algorithm_text(hp: HyperoptConfig) -> str:
    """``"optuna tpe sampler (seed 3, n_startup_trials 10, multivariate false)"``, ``"grid
    search"`` (no seed: a grid has nothing random) or ``"random search (random) (seed 0)"``."""
    sa = hp.search_alg
    name = sa.effective_sampler
    opts = [f"seed {sa.seed}"]
    if name == "tpe":
        opts += [f"n_startup_trials {sa.n_startup_trials}", f"multivariate {str(sa.multivariate).lower()}"]
    for option in ("n_startup_trials", "population_size", "qmc_type"):
        if option in sa.model_fields_set and name != "tpe":
            opts.append(f"{option} {getattr(sa, option)}")
    algo = "grid search" if name == "grid" else f"optuna {name} sampler"
    if sa.type in ("variant_generator", "random"):
        algo = f"random search ({sa.type})"
    return algo + ("" if name == "grid" else f" ({', '.join(opts)})")


def _fifo_length(cfg: SweepConfig) -> str:
    # how long a trial runs when no scheduler stops it: train_steps overrides epochs, and
    # early_stop (Ludwig's default 5) can end it sooner
    tr = cfg.trainer
    length = f"{tr.train_steps} optimizer steps (trainer.train_steps)" if tr.train_steps else f"{tr.epochs} epochs"
    if tr.early_stop > 0:
        return (
            f"every trial runs up to {length}; trainer.early_stop ends one after {tr.early_stop} epochs in a row "
            f"without improvement of validation/{tr.validation_field}/{tr.validation_metric}"
        )
    return f"every trial runs all {length}"


def _scheduler_lines(cfg: SweepConfig, pbt_checkpoints: tuple[int, int] | None) -> list[str]:
    hp = cfg.hyperopt
    sch = hp.scheduler
    if sch.type == "fifo":
        return [f"scheduler: fifo ({_fifo_length(cfg)})"]
    unit = "epochs" if sch.in_epochs else "s"
    shown: dict[str, object] = {k: v for k, v in sch.model_dump().items() if k not in _HIDDEN_SCHEDULER_OPTIONS}
    max_t = getattr(sch, "max_t", None)
    if hasattr(sch, "max_t"):
        shown["max_t"] = (
            f"{max_t} {unit}"
            if max_t is not None and not sch.in_epochs
            else f"{cfg.trainer.epochs} epochs (trainer.epochs)"
        )
    lines = [
        f"scheduler: {sch.type} on {sch.time_attr} (" + ", ".join(f"{k} {show(v)}" for k, v in shown.items()) + ")"
    ]
    if sch.type == "pbt" and pbt_checkpoints is not None:
        first, every = pbt_checkpoints
        mutated = ", ".join(f"{p} ({'its own space' if v is None else show(v)})" for p, v in hp.pbt_mutated.items())
        lines.append(
            f"pbt perturbs: {mutated}; the rest stays as sampled; trials checkpoint at epoch {first} and every {every} after"
        )
    return lines


def describe_search(cfg: SweepConfig, *, pbt_checkpoints: tuple[int, int] | None = None) -> list[str]:
    """Lines about the search: algorithm and trial count, points run first, scheduler, time
    budget, and one line per searched parameter (its space described).

    Args:
        cfg: the validated sweep file.
        pbt_checkpoints: ``(first, every)``, the epochs at which PBT trials checkpoint
            (:func:`ludwig_hpo.search.schedulers.pbt_checkpoints`); the PBT line is left out
            when None.
    """
    hp = cfg.hyperopt
    lines = [f"search: {trial_count_text(hp)}; {algorithm_text(hp)}"]
    if hp.search_alg.points_to_evaluate:
        lines.append(f"points_to_evaluate: {len(hp.search_alg.points_to_evaluate)} configuration(s) run first")
    lines += _scheduler_lines(cfg, pbt_checkpoints)
    budget = hp.executor.time_budget_s
    stops = "then the search ends: no trial starts and running trials are stopped"
    lines.append(f"time budget: {f'{budget:g} s ({stops})' if budget else 'none (all trials run)'}")
    lines.append(f"search space ({len(hp.parameters)} parameter(s)):")
    width = max(len(p) for p in hp.parameters)
    lines += [f"  {p:<{width}}  {s.describe()}" for p, s in hp.parameters.items()]
    return lines


def search_line(cfg: SweepConfig) -> str:
    """The line the sweep's console starts its search with: trial count, algorithm (a grid has no seed), scheduler,
    epochs, objectives and time budget. Pure."""
    hp, budget = cfg.hyperopt, cfg.hyperopt.executor.time_budget_s
    return (
        f"search: {trial_count_text(hp)}, {algorithm_text(hp)}, scheduler {hp.scheduler.type}, "
        f"{cfg.trainer.epochs} epochs max, optimizing {', '.join(f'{k} ({g})' for k, g in cfg.objectives)}; "
        f"time budget: {f'{budget:g}s' if budget else 'none'}"
    )


def text_stats_line(name: str, stats: dict[str, float], length: int) -> str:
    """``hpo validate``'s line of one text feature, from its prepared statistics (the training
    split's: vocabulary size, token counts per row with the special tokens, rows cut at the
    prepared ``length``). Pure."""
    cut = int(stats.get("truncated", 0))
    return (
        f"text {name}: vocabulary {int(stats.get('vocab_size', 0))} tokens; tokens per training row "
        f"p50 {show(stats.get('length_p50', 0.0))}, p90 {show(stats.get('length_p90', 0.0))}, "
        f"p99 {show(stats.get('length_p99', 0.0))}, max {int(stats.get('length_max', 0))}; "
        f"rows padded or cut to {length}"
        + (f" ({cut} training row(s) cut at max_sequence_length)" if cut else " (none cut)")
    )


def image_stats_line(name: str, shape: tuple[int, ...], stats: Mapping[str, float] | None = None) -> str:
    """``hpo validate``'s line of one image feature from its prepared shape: (channels, height,
    width), or (height, width) for one channel, and its pixel statistics (``scale``, the
    divisor of each batch; ``imagenet1k`` / ``imagenet1k_skipped``, see
    :func:`ludwig_hpo.data.images.prepare_images`). Pure."""
    channels, height, width = shape if len(shape) == 3 else (1, *shape[-2:])
    line = f"image {name}: {height}x{width} pixels, {channels} channel(s)"
    stats = stats or {}
    if "scale" in stats:
        line += f"; pixels divided by {show(stats['scale'])}"
    if stats.get("imagenet1k"):
        line += ", then standardized with ImageNet's mean and std (standardize_image: imagenet1k)"
    elif stats.get("imagenet1k_skipped"):
        line += f"; standardize_image imagenet1k not applied: it needs 3 channels, not {channels} (as in Ludwig)"
    return line


def feature_stats_lines(meta: Mapping[str, Any], names: list[str]) -> list[str]:
    """The per-feature lines ``hpo validate`` prints after preparing the data: one per text
    feature (:func:`text_stats_line`) and per image feature (:func:`image_stats_line`) of
    ``names``, in order. ``meta``: feature name -> its prepared metadata (``type``, ``shape``,
    ``stats``, as :class:`ludwig_hpo.data.FeatureMeta`). Pure."""
    lines = []
    for name in names:
        m = meta.get(name)
        if m is None:
            continue
        if m.type == "text":
            lines.append(text_stats_line(name, dict(m.stats), int(m.shape[0])))
        elif m.type == "image" and len(m.shape) >= 2:
            lines.append(image_stats_line(name, tuple(int(v) for v in m.shape), dict(m.stats)))
    return lines
