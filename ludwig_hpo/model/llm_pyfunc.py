"""An LLM's best model as an MLflow pyfunc model that takes raw rows and generates: a DataFrame
with the dataset's columns in (the input feature's and those ``prompt.template`` names), one
column ``<output>_response`` out (the generated text of each row, special tokens skipped, as
Ludwig names an llm's decoded text output).

Everything it needs is in its ``llm`` artifact (see :class:`ServedLLM`), so it loads and
generates without Ray and without the sweep's output folder (and, but for a hub id's base
model not in the local cache, without a network):

- ``adapter/``: the adapter in peft's ``save_pretrained`` format (``adapter_config.json``,
  ``adapter_model.safetensors``), loaded into the rebuilt model's adapter;
- ``base/``: the base model's files (weights and tokenizer) when ``base_model`` is a local
  folder (a hub id is kept as a reference and read from the local Hugging Face cache or the hub,
  as for training);
- ``model/``: instead of both, the whole model and its tokenizer (``save_pretrained``) when
  ``adapter.postprocessor.merge_adapter_into_base_model`` is true (the adapter merged into the
  base weights) or the model was fully fine-tuned (no adapter);
- ``llm.json`` (which of those it holds, the base model as the config named it),
  ``config.json`` (the sweep file's mapping and the trial's parameters, from which the prompt
  template, the generation config and the cuts are resolved) and ``preprocessing.json`` (the
  fitted :class:`FeatureMeta`).

MLflow's transformers flavour is not used: a peft model logged with it keeps only the base
model's hub id, and loading it downloads the base model (a local base folder is not kept).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import torch
from mlflow.pyfunc import PythonModel

from ludwig_hpo.config.loader import resolve_trial_config
from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data.preprocess import FeatureMeta
from ludwig_hpo.errors import DataError
from ludwig_hpo.model.pyfunc import Scored, meta_from_json, quiet_artifacts
from ludwig_hpo.model.raw_rows import RawRows
from ludwig_hpo.tracking.models import requirements

if TYPE_CHECKING:
    from ludwig_hpo.data import PreparedData

#: The pyfunc model's artifact (a folder) holding what :class:`ServedLLM` loads, and its parts.
LLM_ARTIFACT = "llm"
ADAPTER_DIR, BASE_DIR, MODEL_DIR = "adapter", "base", "model"
SPEC_FILE, CONFIG_FILE, META_FILE = "llm.json", "config.json", "preprocessing.json"
#: ``llm.json``'s ``weights``: an adapter over the base, a merged model, a fully fine-tuned one.
ADAPTER, MERGED, FULL = "adapter", "merged", "full"
#: Ludwig's suffix of an llm text output's generated text column.
RESPONSE_SUFFIX = "_response"
#: Prompts per ``generate`` call.
GENERATE_BATCH = 8


def response_column(output: str) -> str:
    """The prediction column of the llm's text output ``output``: ``<output>_response``. Pure."""
    return f"{output}{RESPONSE_SUFFIX}"


def _left_padded(prompts: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max([len(p) for p in prompts] + [1])
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.int64)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        if p:
            ids[i, width - len(p) :] = torch.as_tensor(p, dtype=torch.int64)
            mask[i, width - len(p) :] = 1
    return ids, mask


class ServedLLM:
    """A fine-tuned llm with its tokenizer, prompt and generation config, as saved in the
    pyfunc's ``llm`` folder. The CLI or scoring process, CPU.

    Args:
        model: the :class:`~ludwig_hpo.model.llm.LLMModel` (its adapter loaded, or the merged
            model as its base), eval mode.
        cfg: the trial's resolved config, its ``base_model`` where ``model`` read its base
            from; meta: its :class:`FeatureMeta` per feature.
    """

    def __init__(self, model: Any, cfg: SweepConfig, meta: dict[str, FeatureMeta]) -> None:
        self.model, self.cfg, self.meta = model.cpu().eval(), cfg, meta
        self.tokenizer = model.tokenizer
        self.output = cfg.output_features[0].name
        fitted = meta[self.output].fitted
        self.template: str | None = fitted.get("template")
        self.task: str | None = fitted.get("task")
        self.limits = dict(fitted.get("limits") or {})

    # ------------------------------------------------------------------ reading rows
    def input_columns(self) -> list[str]:
        """The dataset columns the prompt reads: the input feature's, then those the template names."""
        from ludwig_hpo.data.llm import SAMPLE, TASK, template_fields

        columns = [self.cfg.input_features[0].source_column]
        if self.template is not None:
            columns += [f.name for f in template_fields(self.template) if f.name not in (SAMPLE, TASK)]
        return list(dict.fromkeys(columns))

    def _check_columns(self, df: pd.DataFrame) -> None:
        from ludwig_hpo.data.origin import DataOrigin

        missing = [c for c in self.input_columns() if c not in df.columns]
        if missing:
            feat = self.cfg.input_features[0]
            # the dataset file the rows came from (none for served rows), and the key reading the column
            key = f"input_features[{feat.name}]" if feat.source_column in missing else "prompt.template"
            raise DataError(
                f"the rows lack the column{'s' if len(missing) > 1 else ''} {', '.join(missing)} the prompt reads",
                source=DataOrigin.of(df).source,
                key=key,
                fix=f"give the columns {', '.join(self.input_columns())}",
            )

    def prompts(self, df: pd.DataFrame) -> list[str]:
        """Each row's prompt, rendered and cut as in training (:mod:`ludwig_hpo.data.llm`).

        Raises:
            DataError: a column the prompt reads is missing; a float field's cell is not a number.
        """
        from ludwig_hpo.data.llm import fill_constant, lowercase, render_prompts

        self._check_columns(df)
        feat = self.cfg.input_features[0]
        frame = df.reset_index(drop=True).copy()
        frame[feat.source_column] = fill_constant(frame[feat.source_column], feat.preprocessing)
        rendered = render_prompts(frame, feat.source_column, self.template, self.task)
        return lowercase(rendered, feat.preprocessing)

    def prompt_ids(self, prompts: list[str]) -> list[list[int]]:
        """The prompts' token ids as training fed them (special tokens, the prompt's cut). Pure
        but for the tokenizer."""
        from ludwig_hpo.data.llm import Limits, encode_rows

        limits = Limits(prompt=self.limits.get("prompt"), target=None, total=self.limits.get("total"))
        enc = encode_rows(prompts, None, self.tokenizer, limits)
        return [row[:n].tolist() for row, n in zip(enc.ids, enc.prompt_lengths, strict=True)]

    # ------------------------------------------------------------------ generating
    @torch.no_grad()
    def generate(self, prompts: list[str]) -> list[str]:
        """The generated answer of each prompt (new tokens up to EOS, decoded without special
        tokens), with the config's ``generation`` (a sampled one seeded by ``trainer.seed``,
        so the same rows give the same answers)."""
        tok = self.tokenizer
        pad = self.model.pad_id
        stop = {v for v in (tok.eos_token_id, tok.pad_token_id, self.model.eos_id) if v is not None}
        ids_all = self.prompt_ids(prompts)
        out: list[str] = []
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.cfg.trainer.seed)
            for start in range(0, len(ids_all), GENERATE_BATCH):
                ids, mask = _left_padded(ids_all[start : start + GENERATE_BATCH], pad)
                generated = self.model.generate(ids, mask)
                for row in generated[:, ids.shape[1] :].tolist():
                    cut = next((i for i, v in enumerate(row) if v in stop), len(row))
                    out.append(tok.decode(row[:cut], skip_special_tokens=True))
        return out

    def predict(self, df: pd.DataFrame, *, skip_bad_rows: bool = False, data_dir: Path | None = None) -> Scored:
        """``<output>_response`` of each row of ``df`` (a missing input cell is the feature's
        ``fill_value``, as in training, so no row is bad). ``skip_bad_rows`` and ``data_dir``
        are accepted as :meth:`~ludwig_hpo.model.pyfunc.ServedModel.predict` takes them.

        Raises:
            DataError: a column the prompt reads is missing, a float field's cell is not a number.
        """
        del skip_bad_rows, data_dir  # no row of an llm can be bad, and no path is read
        texts = self.generate(self.prompts(df))
        frame = pd.DataFrame({response_column(self.output): texts})
        data = self._data(len(df), {}, {})
        return Scored(frame, RawRows(data=data, kept=np.arange(len(df)), bad=()))

    def prepare_labelled(
        self, df: pd.DataFrame, *, skip_bad_rows: bool = False, data_dir: Path | None = None
    ) -> RawRows:
        """``df``'s rows (with the output's column) as training prepared them, ids and labels,
        for :func:`~ludwig_hpo.train.evaluate.evaluate` (split ``"rows"``: every row).

        Raises:
            DataError: a column the prompt or the target reads is missing; no row keeps a
                target token after the cut.
            BadRowsError: rows without a target where the output's ``missing_value_strategy``
                is ``drop_row`` (training dropped such rows), unless ``skip_bad_rows`` leaves
                them out; or every row is such a row.
        """
        del data_dir
        from ludwig_hpo.data.llm import prepare_llm
        from ludwig_hpo.data.origin import DataOrigin
        from ludwig_hpo.model.raw_rows import BadRow, BadRowsError

        self._check_columns(df)
        origin = DataOrigin.of(df)
        frame = df.reset_index(drop=True)
        out = self.cfg.llm_output
        col = out.source_column
        if col not in frame.columns:
            raise DataError(
                f"column {col!r} is not in the rows (the model scores it)",
                source=origin.source,
                key=f"output_features[{out.name}]",
                fix=f"add the column {col!r}",
            )
        missing = frame[col].isna().to_numpy() if out.preprocessing.missing_value_strategy == "drop_row" else None
        why = f"column {col!r} has no value, and output_features[{out.name}] drops such rows (missing_value_strategy: drop_row)"
        bad = (
            tuple(BadRow(int(r), origin.rows(int(r)), why) for r in np.flatnonzero(missing))
            if missing is not None
            else ()
        )
        kept = np.flatnonzero(~missing) if missing is not None else np.arange(len(frame))
        if (bad and not skip_bad_rows) or len(kept) == 0:
            raise BadRowsError(bad, origin.source)
        frame = frame.iloc[kept].reset_index(drop=True)
        rows = np.arange(len(frame))
        llm = prepare_llm(frame, self.cfg, rows, origin, load_tokenizer=lambda _: self.tokenizer)
        data = self._data(len(frame), {llm.input_name: llm.ids}, {llm.output_name: llm.labels})
        return RawRows(data=data, kept=kept, bad=bad)

    def _data(self, n: int, inputs: dict[str, np.ndarray], targets: dict[str, np.ndarray]) -> PreparedData:
        from ludwig_hpo.data import PreparedData

        return PreparedData(inputs=inputs, targets=targets, splits={"rows": np.arange(n)}, folds=(), meta=self.meta)

    # ------------------------------------------------------------------ files
    @classmethod
    def load(cls, folder: Path) -> ServedLLM:
        """The model saved in ``folder`` by :func:`save_llm_folder`: an llm model built on its
        ``base/`` files (else on its hub id, the local cache first, as in training) with the
        saved adapter loaded, or on its merged ``model/``.

        Raises:
            DataError: the folder is not an llm model's (a file is missing), its base model
                cannot be loaded (a hub id with no network, say), or the adapter does not fit it.
        """
        from ludwig_hpo.model.llm import build_llm

        missing = [f for f in (SPEC_FILE, CONFIG_FILE, META_FILE) if not (folder / f).exists()]
        if missing:
            raise DataError(
                f"not an llm model folder: {', '.join(missing)} missing",
                source=str(folder),
                fix="pass a sweep's output folder, or the runs:/<parent run>/model URI",
            )
        spec = json.loads((folder / SPEC_FILE).read_text())
        doc = json.loads((folder / CONFIG_FILE).read_text())
        cfg = resolve_trial_config(doc["raw"], doc["params"])
        meta = meta_from_json(json.loads((folder / META_FILE).read_text()))
        if spec["weights"] == ADAPTER:
            base = str(folder / BASE_DIR) if spec.get("base_files") else str(spec["base_model"])
            update: dict[str, Any] = {"base_model": base}
        else:  # the whole model is the base, with no adapter
            base = str(folder / MODEL_DIR)
            update = {"base_model": base, "adapter": None}
        # the config names where this model reads its base from (a rebuilt model loads it there)
        cfg = cfg.model_copy(update=update)
        try:
            model = build_llm(cfg, meta)
        except (OSError, ValueError) as e:
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise DataError(
                f"cannot load the base model {base!r}: {first[:300]}",
                source=str(folder),
                fix="put the base model in the local Hugging Face cache (the hub needs a network)",
            ) from None
        if spec["weights"] == ADAPTER:
            _load_adapter(model, folder / ADAPTER_DIR)
        return cls(model, cfg, meta)


def _load_adapter(model: Any, folder: Path) -> None:
    """Load the adapter peft's ``save_pretrained`` wrote in ``folder`` into ``model``'s peft model.

    Raises:
        DataError: the adapter's weights do not fit the model's adapter (another rank, other modules).
    """
    from peft import set_peft_model_state_dict
    from peft.utils import load_peft_weights

    weights = load_peft_weights(str(folder), device="cpu")
    try:
        result = set_peft_model_state_dict(model.model, weights)
    except RuntimeError as e:
        raise DataError(
            f"the saved adapter does not fit its config: {str(e).splitlines()[0]}", source=str(folder)
        ) from None
    unexpected = list(getattr(result, "unexpected_keys", []) or [])
    if unexpected:
        raise DataError(
            f"the saved adapter holds weights its config has not, e.g. {unexpected[0]!r}", source=str(folder)
        )


@contextlib.contextmanager
def _no_progress_bars() -> Iterator[None]:
    """transformers' progress bars off (``save_pretrained`` draws one per weight file, which
    would land on the sweep's console after its summary), as they were on exit."""
    from transformers.utils import logging as hf_logging

    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            hf_logging.enable_progress_bar()


@_no_progress_bars()
def save_llm_folder(
    folder: Path,
    model: Any,
    cfg: SweepConfig,
    meta: dict[str, FeatureMeta],
    raw: dict[str, Any],
    params: dict[str, Any],
) -> ServedLLM:
    """Write the ``llm`` folder of a trained :class:`~ludwig_hpo.model.llm.LLMModel` (CPU; left
    as it is: a merge is made on a copy, its base weights may be shared) and return the
    :class:`ServedLLM` loaded from what was written. ``raw`` and ``params``: the sweep file's
    mapping and the trial's sampled values ``cfg`` was resolved from. Driver only.

    Raises:
        OSError: a file cannot be written or the base folder read.
        DataError: as :meth:`ServedLLM.load`.
    """
    from ludwig_hpo.data.hf_loader import resolve

    folder.mkdir(parents=True, exist_ok=True)
    adapter = getattr(cfg, "adapter", None)
    merge = adapter is not None and adapter.postprocessor.merge_adapter_into_base_model
    spec: dict[str, Any] = {"format": 1, "base_model": cfg.base_model}
    if adapter is not None and not merge:
        model.model.save_pretrained(folder / ADAPTER_DIR)
        where = resolve(str(cfg.base_model))
        spec.update(weights=ADAPTER, base_files=where.kind == "folder")
        if where.kind == "folder" and where.path is not None:  # a local base goes with the model
            shutil.copytree(where.path, folder / BASE_DIR, ignore=shutil.ignore_patterns(".*"))
    else:
        whole = model.merged()  # a copy: the adapter merged into it, or the fine-tuned model
        whole.save_pretrained(folder / MODEL_DIR)
        model.tokenizer.save_pretrained(folder / MODEL_DIR)  # the rebuilt model reads it there
        spec.update(weights=MERGED if merge else FULL, base_files=False)
    (folder / SPEC_FILE).write_text(json.dumps(spec, indent=1))
    (folder / CONFIG_FILE).write_text(json.dumps({"raw": raw, "params": params}, default=str))
    doc = {name: dataclasses.asdict(m) for name, m in meta.items()}
    (folder / META_FILE).write_text(json.dumps(doc, indent=1, default=str))
    return ServedLLM.load(folder)


class LLMRowModel(PythonModel):
    """The MLflow pyfunc face of :class:`ServedLLM`: ``predict(DataFrame of raw rows)`` ->
    DataFrame with ``<output>_response``. A missing column is an ``INVALID_PARAMETER_VALUE``
    error (HTTP 400 from the scoring server). Loads in the scoring process."""

    served: ServedLLM | None = None

    def load_context(self, context: Any) -> None:
        self.served = ServedLLM.load(Path(context.artifacts[LLM_ARTIFACT]))

    def predict(self, context: Any, model_input: pd.DataFrame, params: dict[str, Any] | None = None) -> pd.DataFrame:
        from mlflow.exceptions import MlflowException
        from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE

        assert self.served is not None, "load_context runs before predict"
        df = model_input if isinstance(model_input, pd.DataFrame) else pd.DataFrame(model_input)
        try:
            return self.served.predict(df).frame
        except DataError as e:
            raise MlflowException(e.one_line(), error_code=INVALID_PARAMETER_VALUE) from None


def llm_requirements() -> list[str]:
    """The pip requirements of an llm pyfunc model: :func:`~ludwig_hpo.tracking.models.requirements`
    and the Hugging Face libraries it loads with, at the versions installed here."""
    from importlib.metadata import PackageNotFoundError, version

    out = requirements()
    for name in ("transformers", "tokenizers", "peft", "safetensors"):
        try:
            out.append(f"{name}=={version(name)}")
        except PackageNotFoundError:
            continue
    return out


def save_llm_pyfunc(
    path: Path,
    model: Any,
    cfg: SweepConfig,
    meta: dict[str, FeatureMeta],
    example: pd.DataFrame,
    raw: dict[str, Any],
    params: dict[str, Any],
) -> None:
    """Save a trained :class:`~ludwig_hpo.model.llm.LLMModel` as an MLflow pyfunc model folder at ``path`` (new): its
    ``llm`` artifact (:func:`save_llm_folder`), the signature of the prompt's input columns
    (inferred from ``example``, real rows, also the input example) and of their generated
    answers. Driver only.

    Raises:
        DataError: ``example`` lacks a column the prompt reads.
        OSError: as :func:`save_llm_folder`.
    """
    import mlflow.pyfunc
    from mlflow.models import infer_signature

    with tempfile.TemporaryDirectory(prefix="hpo-llm-") as tmp:
        folder = Path(tmp) / LLM_ARTIFACT
        served = save_llm_folder(folder, model, cfg, meta, raw, params)
        example = example[served.input_columns()].reset_index(drop=True)
        signature = infer_signature(example, served.predict(example).frame)
        log = logging.getLogger("mlflow.pyfunc")
        level = log.level
        log.setLevel(logging.ERROR)
        try:
            with quiet_artifacts():
                mlflow.pyfunc.save_model(
                    str(path),
                    python_model=LLMRowModel(),
                    artifacts={LLM_ARTIFACT: str(folder)},
                    signature=signature,
                    input_example=example,
                    pip_requirements=llm_requirements(),
                )
        finally:
            log.setLevel(level)
