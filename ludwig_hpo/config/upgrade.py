"""Ludwig's own upgrades of its legacy config spellings (``ludwig.utils.backward_compatibility``,
for ECD configs): a file written for an older Ludwig reads as today's Ludwig reads it.

Each upgrade applied gives one warning line naming the old and the new key, and records where
the moved keys came from, so that an error after the upgrade still points at the file's line
and column where the old key was written (:func:`upgrade_located`). Pure: no I/O; the caller
(the loader, in the driver) prints the warnings.
"""

from __future__ import annotations

import copy
from typing import Any

from ludwig_hpo.config.base import KeyPath
from ludwig_hpo.config.paths import RawMapping
from ludwig_hpo.config.reader import Marks, mark_for
from ludwig_hpo.config.upgrade_features import (
    FC_KEYS,
    SEQUENCE_TYPES,
    UpgradeState,
    feature_keys,
    rename,
    upgrade_fc_size,
    upgrade_feature,
    upgrade_initializers,
    upgrade_missing_strategy,
    upgrade_regularizers,
    upgrade_sequence_preprocessing,
)

#: Ludwig's feature types (and ``numerical``, its old name of ``number``): a key of these under
#: the top-level ``preprocessing`` is that type's defaults.
_FEATURE_TYPES = (
    "audio",
    "bag",
    "binary",
    "category",
    "date",
    "h3",
    "image",
    "number",
    "sequence",
    "set",
    "text",
    "timeseries",
    "vector",
)
#: Ludwig 0.7 moved the learning-rate schedule of ``trainer`` into ``trainer.learning_rate_scheduler``.
_LR_SCHEDULER_KEYS = {
    "reduce_learning_rate_on_plateau": "reduce_on_plateau",
    "reduce_learning_rate_on_plateau_patience": "reduce_on_plateau_patience",
    "reduce_learning_rate_on_plateau_rate": "reduce_on_plateau_rate",
    "reduce_learning_rate_eval_metric": "reduce_eval_metric",
    "reduce_learning_rate_eval_split": "reduce_eval_split",
    "decay": "decay",
    "decay_steps": "decay_steps",
    "decay_rate": "decay_rate",
    "staircase": "staircase",
    "learning_rate_warmup_epochs": "warmup_evaluations",
}


def _preprocessing(raw: RawMapping, st: UpgradeState) -> None:
    prep = raw.get("preprocessing")
    if not isinstance(prep, dict):
        return
    at: KeyPath = ("preprocessing",)
    split: dict[str, Any] = {}
    if "split_probabilities" in prep:
        split["probabilities"] = prep.pop("split_probabilities")
        st.move((*at, "split_probabilities"), (*at, "split", "probabilities"))
        st.note(
            (*at, "split_probabilities"),
            "preprocessing.split_probabilities: is Ludwig's old name for preprocessing.split.probabilities:; "
            "read as preprocessing.split.probabilities:",
        )
    if "stratify" in prep:
        split.update(type="stratify", column=prep.pop("stratify"))
        st.move((*at, "stratify"), (*at, "split", "column"))
        st.note(
            (*at, "stratify"),
            "preprocessing.stratify: is Ludwig's old form of preprocessing.split: {type: stratify, column: ...}; "
            "read as preprocessing.split",
        )
    if "force_split" in prep:
        prep.pop("force_split")
        split.setdefault("type", "random")
        st.note(
            (*at, "force_split"),
            "preprocessing.force_split: is Ludwig's old form of preprocessing.split.type:; "
            f"read as preprocessing.split.type: {split['type']}",
        )
    if split:
        old = prep.get("split")
        prep["split"] = {**split, **old} if isinstance(old, dict) else split
    for key in list(prep):
        ftype = "number" if key == "numerical" else key
        if ftype not in _FEATURE_TYPES or not isinstance(prep[key], dict):
            continue
        params = prep.pop(key)
        params = params.get("preprocessing", params) if isinstance(params.get("preprocessing"), dict) else params
        defaults = raw.setdefault("defaults", {})
        if not isinstance(defaults, dict):
            continue
        entry = defaults.setdefault(ftype, {})
        if isinstance(entry, dict):
            entry["preprocessing"] = {**(entry.get("preprocessing") or {}), **params}
        st.move((*at, key), ("defaults", ftype, "preprocessing"))
        st.note(
            (*at, key),
            f"preprocessing.{key}: is Ludwig's old place of defaults.{ftype}.preprocessing:; "
            f"read as defaults.{ftype}.preprocessing:",
        )
    if not prep:
        del raw["preprocessing"]


def _defaults(raw: RawMapping, st: UpgradeState) -> None:
    defaults = raw.get("defaults")
    if not isinstance(defaults, dict):
        return
    for ftype, block in defaults.items():
        if not isinstance(block, dict):
            continue
        at: KeyPath = ("defaults", ftype)
        if "type" in block:
            block.pop("type")
            st.note((*at, "type"), f"defaults.{ftype}.type: is not a defaults key (Ludwig drops it); removed")
        if ftype in SEQUENCE_TYPES:
            upgrade_sequence_preprocessing(block.get("preprocessing"), (*at, "preprocessing"), st)
        upgrade_missing_strategy(block.get("preprocessing"), (*at, "preprocessing"), st)
        for module, size in (("encoder", "output_size"), ("decoder", "fc_output_size")):
            if isinstance(block.get(module), dict):
                upgrade_fc_size(block[module], (*at, module), st, size)


def _trainer(raw: RawMapping, st: UpgradeState) -> None:
    trainer = raw.get("trainer")
    if not isinstance(trainer, dict):
        return
    at: KeyPath = ("trainer",)
    if trainer.get("eval_batch_size") == 0:
        del trainer["eval_batch_size"]
        st.note(
            (*at, "eval_batch_size"),
            "trainer.eval_batch_size: 0 is Ludwig's old spelling of its default (evaluate in training-sized "
            "batches); removed",
        )
    rename(trainer, "increase_batch_size_on_plateau_max", "max_batch_size", at, st)
    rename(trainer, "validation_measure", "validation_metric", at, st)
    if "type" in trainer and raw.get("model_type") != "llm":
        kind = trainer.pop("type")
        st.note((*at, "type"), f"trainer.type: {kind} is set by model_type in today's Ludwig; removed")
    scheduler = trainer.get("learning_rate_scheduler")
    scheduler = dict(scheduler) if isinstance(scheduler, dict) else {}
    moved = False
    for old, new in _LR_SCHEDULER_KEYS.items():
        if old not in trainer:
            continue
        value = trainer.pop(old)
        new_key = f"trainer.learning_rate_scheduler.{new}"
        if new in scheduler:
            st.note((*at, old), f"trainer.{old}: is Ludwig's old place of {new_key}:, which is also set; ignored")
            continue
        if old == "decay" and isinstance(value, bool):
            value = "exponential" if value else None
        elif old == "reduce_learning_rate_on_plateau" and isinstance(value, (bool, int, float)):
            value = int(value)
        moved = True
        if value is not None:
            scheduler[new] = value
            st.move((*at, old), (*at, "learning_rate_scheduler", new))
        st.note((*at, old), f"trainer.{old}: is Ludwig's old place of {new_key}:; read as {new_key}: {value}")
    if moved or scheduler:
        trainer["learning_rate_scheduler"] = scheduler
        if not scheduler:
            del trainer["learning_rate_scheduler"]


def _parameter_path(path: str, raw: RawMapping) -> str:
    """A ``hyperopt.parameters`` path with the renames above applied to it."""
    new = path
    if new.startswith("training."):
        new = "trainer." + new[len("training.") :]
    head, _, rest = new.partition(".")
    if head == "combiner" and rest == "fc_size":
        new = "combiner.output_size"
    elif head == "trainer" and rest in _LR_SCHEDULER_KEYS:
        new = f"trainer.learning_rate_scheduler.{_LR_SCHEDULER_KEYS[rest]}"
    else:
        for section in ("input_features", "output_features"):
            feats = raw.get(section)
            for feat in feats if isinstance(feats, list) else []:
                if not isinstance(feat, dict) or feat.get("name") != head or "." in rest or not rest:
                    continue
                if rest not in feature_keys(section):
                    module = "encoder" if section == "input_features" else "decoder"
                    key = "output_size" if rest == "fc_size" else rest
                    if module == "decoder" and key in (*FC_KEYS, "fc_size"):
                        key = "fc_output_size" if rest == "fc_size" else f"fc_{rest}"
                    new = f"{head}.{module}.{key}"
    return new


def _hyperopt(raw: RawMapping, st: UpgradeState) -> None:
    hp = raw.get("hyperopt")
    if not isinstance(hp, dict):
        return
    at: KeyPath = ("hyperopt",)
    params = hp.get("parameters")
    if isinstance(params, dict):
        renamed: dict[str, Any] = {}
        for path, space in params.items():
            new = _parameter_path(path, raw) if isinstance(path, str) else path
            if new != path and new not in params:
                st.move((*at, "parameters", path), (*at, "parameters", new))
                st.note(
                    (*at, "parameters", path),
                    f'hyperopt.parameters."{path}": is Ludwig\'s old path of "{new}"; read as "{new}"',
                )
                renamed[new] = space
            else:
                renamed[path] = space
        hp["parameters"] = renamed
    executor = hp.get("executor")
    if isinstance(executor, dict):
        if executor.get("type") not in (None, "ray", "optuna"):  # optuna: Ludwig's own optuna executor
            st.note(
                (*at, "executor", "type"),
                f"hyperopt.executor.type: {executor['type']} is an executor Ludwig replaced by ray; read as ray",
            )
            executor["type"] = "ray"
        if "search_alg" in executor:
            alg = executor.pop("search_alg")
            if "search_alg" not in hp:
                hp["search_alg"] = {"type": alg} if isinstance(alg, str) else alg
                st.move((*at, "executor", "search_alg"), (*at, "search_alg"))
                st.note(
                    (*at, "executor", "search_alg"),
                    "hyperopt.executor.search_alg: is Ludwig's old place of hyperopt.search_alg:; "
                    "read as hyperopt.search_alg:",
                )
    sampler = hp.get("sampler")
    if isinstance(sampler, dict):
        # Ludwig 0.4's sampler section (grid, random, ray): search_alg, num_samples and
        # scheduler move out; the sampler's own type is dropped (its default search is Ray's
        # variant generator).
        hp.pop("sampler")
        executor = hp.setdefault("executor", {"type": "ray"})
        moved = []
        if "search_alg" in sampler and "search_alg" not in hp:
            alg = sampler["search_alg"]
            hp["search_alg"] = {"type": alg} if isinstance(alg, str) else alg
            st.move((*at, "sampler", "search_alg"), (*at, "search_alg"))
            moved.append("search_alg -> hyperopt.search_alg")
        elif "search_alg" not in hp:
            hp["search_alg"] = {"type": "variant_generator"}
            moved.append(f"type {sampler.get('type')} -> hyperopt.search_alg.type: variant_generator")
        for key in ("num_samples", "scheduler"):
            if key in sampler and isinstance(executor, dict) and key not in executor:
                if key == "scheduler" and not sampler[key]:
                    continue
                executor[key] = sampler[key]
                st.move((*at, "sampler", key), (*at, "executor", key))
                moved.append(f"{key} -> hyperopt.executor.{key}")
        st.note(
            (*at, "sampler"),
            f"hyperopt.sampler: is Ludwig's old form of hyperopt.search_alg and hyperopt.executor; read as "
            f"{', '.join(moved) or 'hyperopt.search_alg'}",
        )
    if isinstance(hp.get("search_alg"), str):
        alg = hp["search_alg"]
        hp["search_alg"] = {"type": alg}
        st.move((*at, "search_alg"), (*at, "search_alg", "type"))
        st.note((*at, "search_alg"), f"hyperopt.search_alg: {alg} is Ludwig's old form of search_alg: {{type: {alg}}}")


#: Ludwig's old names of its llm keys -> today's.
_LLM_RENAMES = {"model_name": "base_model", "generation_config": "generation"}


def _llm(raw: RawMapping, st: UpgradeState) -> None:
    if raw.get("model_type") != "llm":
        return
    trainer = raw.get("trainer")
    if not (isinstance(trainer, dict) and "type" in trainer):
        # Ludwig's llm trainer defaults to type none (no training), which is not supported here:
        # a file that leaves it out would be only evaluated by Ludwig, and is fine-tuned here
        st.note(
            ("trainer",) if isinstance(trainer, dict) else ("model_type",),
            "trainer.type is not written: Ludwig's llm default is none (no training, not supported); "
            "read as finetune, which trains (write trainer.type: finetune to keep this line quiet)",
        )
    for old, new in _LLM_RENAMES.items():
        if old not in raw:
            continue
        if new in raw:
            st.note((old,), f"{old}: is Ludwig's old name of {new}:, which is also set; ignored")
            raw.pop(old)
            continue
        raw[new] = raw.pop(old)
        st.move((old,), (new,))
        st.note((old,), f"{old}: is Ludwig's old name of {new}:; read as {new}:")


def _upgrade(raw: RawMapping) -> tuple[RawMapping, UpgradeState]:
    raw = copy.deepcopy(raw)
    st = UpgradeState()
    _llm(raw, st)
    if "training" in raw and "trainer" not in raw:
        raw["trainer"] = raw.pop("training")
        st.move(("training",), ("trainer",))
        st.note(("training",), "training: is Ludwig's old name for trainer:; read as trainer:")
    for section in ("input_features", "output_features"):
        feats = raw.get(section)
        if isinstance(feats, list):
            for i, feat in enumerate(feats):
                if isinstance(feat, dict):
                    upgrade_feature(feat, (section, i), section, st)
    combiner = raw.get("combiner")
    if isinstance(combiner, dict):
        upgrade_fc_size(combiner, ("combiner",), st)
        upgrade_regularizers(combiner, ("combiner",), st)
    for section in ("combiner", "defaults"):
        upgrade_initializers(raw.get(section), (section,), st)
    _preprocessing(raw, st)
    _defaults(raw, st)
    _trainer(raw, st)
    _hyperopt(raw, st)
    return raw, st


# ---------------------------------------------------------------------------- public
def upgrade(raw: RawMapping) -> tuple[RawMapping, list[str]]:
    """``raw`` (a parsed config) with Ludwig's legacy spellings upgraded, and one warning line
    per upgrade naming the old and the new key. ``raw`` itself is not changed. Pure.

    Upgraded: ``training`` -> ``trainer``; feature type ``numerical`` -> ``number``; ``bias``
    -> ``use_bias``; encoder / decoder options written at the feature level (and ``encoder:
    <type>``) -> ``encoder:`` / ``decoder:``; ``fc_size`` -> ``output_size`` (decoders:
    ``fc_output_size``); Ludwig 0.4's sequence preprocessing names; ``missing_value_strategy``
    ``backfill`` / ``pad``; scalar ``loss.class_weights``; ``preprocessing.<type>`` ->
    ``defaults.<type>.preprocessing``; ``split_probabilities`` / ``stratify`` /
    ``force_split`` -> ``preprocessing.split``; ``trainer.eval_batch_size: 0``,
    ``increase_batch_size_on_plateau_max``, ``validation_measure``, ``trainer.type``, the
    learning-rate schedule keys -> ``trainer.learning_rate_scheduler``; ``hyperopt.sampler``
    and ``executor.search_alg`` -> ``search_alg`` (``num_samples``, ``scheduler`` into
    ``executor``), old executor types -> ``ray``, parameter paths spelled the old ways
    (``training.x``, ``<feature>.<encoder option>``).
    """
    out, st = _upgrade(raw)
    return out, [line for _, line in st.notes]


def upgrade_located(raw: RawMapping, marks: Marks, src: str) -> tuple[RawMapping, list[str], Marks]:
    """:func:`upgrade`, with each warning prefixed by ``src:line:column`` of the old key, and
    ``marks`` extended so that every moved key (and what it holds) is marked where the old
    key was written. Pure.

    Args:
        raw: the parsed config.
        marks: the file's marks (:func:`ludwig_hpo.config.reader.read_sweep_file`).
        src: the file, as errors name it.

    Returns:
        The upgraded mapping, the warning lines (file order of the upgrades applied) and the marks.
    """
    out, st = _upgrade(raw)
    located = dict(marks)
    for old, new in st.moves:
        n = len(old)
        for path, mark in list(located.items()):
            if path[:n] == old:
                located.setdefault((*new, *path[n:]), mark)
    lines = []
    for at, line in st.notes:
        where = mark_for(located, at)
        lines.append(f"{src}:{where[0]}:{where[1]}: {line}" if where else f"{src}: {line}")
    return out, lines, located
