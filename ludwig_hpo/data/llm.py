"""Preparation of a ``model_type: llm`` config's rows: Ludwig's prompt, the base model's tokens,
and the labels of next-token training. Runs in the driver, once per sweep (and in a serving
process for new rows: :func:`render_prompts` and :func:`encode_rows` are pure but for the tokenizer).

The prompt follows Ludwig (``ludwig/data/prompt.py``): ``prompt.template`` is a Python format
string whose fields are dataset columns, ``{__sample__}`` (the input feature's cell, as Ludwig
writes it: ``json.dumps`` without its outer quotes) and ``{__task__}`` (``prompt.task``); a field
with a float format (``{price:.2f}``) reads its cell as a number. With ``task`` and no
template, Ludwig's default zero-shot template (:data:`DEFAULT_TEMPLATE`); with neither, the
input column's text as it is.

A row is ``prompt ids + target ids + EOS`` (the prompt tokenized with the tokenizer's special
tokens, e.g. Llama's ``<s>``; the target without), right-padded with the tokenizer's pad id
(its EOS id when it has none, as Ludwig sets it). Its labels are the same positions, unshifted:
``-100`` (:data:`IGNORE_INDEX`) at the prompt and the padding, the ids at the target and the
EOS. Cuts are Ludwig's: the prompt to the input feature's ``max_sequence_length``, the target
to the output's, then the whole row to ``preprocessing.global_max_sequence_length`` and to the
model's context length (the end of the row goes first, so a long prompt can leave no target:
such a row has no label and counts for nothing).
"""

from __future__ import annotations

import json
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ludwig_hpo.data.origin import DataOrigin
from ludwig_hpo.data.preprocess import FeatureMeta
from ludwig_hpo.data.text import length_percentiles
from ludwig_hpo.errors import DataError

#: The label of a position no loss is taken at (torch's ``cross_entropy`` default).
IGNORE_INDEX = -100
#: Ludwig's template fields of the input cell, the task and retrieved context.
SAMPLE, TASK, CONTEXT = "__sample__", "__task__", "__context__"
#: Ludwig's ``DEFAULT_ZERO_SHOT_PROMPT_TEMPLATE`` (a task without a template).
DEFAULT_TEMPLATE = "SAMPLE INPUT: {__sample__}\n\nUSER: Complete the following task: {__task__}\n\nASSISTANT:\n"
#: Where prompt errors point.
TEMPLATE_KEY, TASK_KEY = "prompt.template", "prompt.task"


@dataclass(frozen=True)
class Field:
    """One replacement field of a template: its name and whether its cell is read as a float."""

    name: str
    number: bool


def template_fields(template: str) -> list[Field]:
    """The replacement fields of ``template``, in order, each once (Ludwig's
    ``_get_template_fields``). Pure.

    Raises:
        ValueError: a format spec other than a float's (``.2f``), or a malformed template
            (an unmatched brace); the message says which.
    """
    out: dict[str, Field] = {}
    for _, name, spec, _ in string.Formatter().parse(template):
        if name is None:
            continue
        if spec and "f" not in spec:
            raise ValueError(f"field {{{name}:{spec}}} has format {spec!r}; only a float format such as .2f is read")
        out.setdefault(name, Field(name, bool(spec)))
    return list(out.values())


def _prompt_error(message: str, key: str, fix: str, origin: DataOrigin) -> DataError:
    return DataError(message, source=origin.source, key=key, fix=fix)


def resolve_template(template: str | None, task: str | None) -> str | None:
    """The template in force: ``template``, else Ludwig's default when ``task`` is set, else
    None (the input column's text is the prompt). Pure."""
    if template is not None:
        return template
    return DEFAULT_TEMPLATE if task is not None else None


def check_template(template: str, task: str | None, columns: Sequence[str], origin: DataOrigin) -> list[Field]:
    """The fields of ``template``, checked against the dataset's ``columns`` as Ludwig checks
    them (``_validate_prompt_template``). Pure.

    Raises:
        DataError: a malformed template or format; ``{__context__}`` (retrieval is not
            supported); a task without ``{__task__}``; a field that is not a column (the
            columns are listed); a template naming neither ``{__sample__}`` nor any column.
    """
    try:
        fields = template_fields(template)
    except ValueError as e:
        raise _prompt_error(f"the template cannot be read: {e}", TEMPLATE_KEY, "fix the braces", origin) from None
    names = [f.name for f in fields]
    if CONTEXT in names:
        raise _prompt_error(
            "{__context__} is the context of Ludwig's retrieval, which is not supported",
            TEMPLATE_KEY,
            "remove {__context__} from the template",
            origin,
        )
    if task is not None and TASK not in names:
        raise _prompt_error(
            "prompt.task is set but the template has no {__task__} field (Ludwig's rule)",
            TEMPLATE_KEY,
            "put {__task__} where the task goes, or remove prompt.task",
            origin,
        )
    cols = [str(c) for c in columns]
    unknown = [n for n in names if n not in (SAMPLE, TASK) and n not in cols]
    if unknown:
        raise _prompt_error(
            f"the template names {{{unknown[0]}}}, which is not a column of the dataset (it has: {', '.join(cols)})",
            TEMPLATE_KEY,
            "name a dataset column, {__sample__} (the input feature's cell) or {__task__}",
            origin,
        )
    if SAMPLE not in names and not any(n in cols for n in names):
        raise _prompt_error(
            "the template names neither {__sample__} nor any dataset column, so every prompt would be the same",
            TEMPLATE_KEY,
            "put {__sample__} or a {column} where each row's input goes",
            origin,
        )
    return fields


def _text(value: Any) -> str:
    return "" if value is None or (isinstance(value, float) and np.isnan(value)) else str(value)


def render_prompts(
    df: pd.DataFrame,
    input_column: str,
    template: str | None,
    task: str | None,
    origin: DataOrigin | None = None,
) -> list[str]:
    """Each row's prompt (see the module docstring). Runs in the driver or a serving process.

    Args:
        df: the rows (every column a template may name); input_column: the input feature's
            column (``{__sample__}``, or the prompt itself without a template or task).
        template, task: ``prompt.template`` and ``prompt.task`` as written (None: unset).
        origin: the dataset file, named by errors.

    Raises:
        DataError: see :func:`check_template`; a float field whose cell is not a number.
    """
    origin = origin or DataOrigin.of(df)
    resolved = resolve_template(template, task)
    if resolved is None:
        return [_text(v) for v in df[input_column].tolist()]
    fields = check_template(resolved, task, list(df.columns), origin)
    columns: dict[str, list[Any]] = {}
    for f in fields:
        if f.name == SAMPLE:
            columns[f.name] = [
                json.dumps(v if isinstance(v, str) else _text(v), indent=2).strip('"') for v in df[input_column]
            ]
        elif f.name == TASK:
            columns[f.name] = [task] * len(df)
        else:
            cells = df[f.name].tolist()
            if f.number:
                number = pd.to_numeric(pd.Series(cells), errors="coerce")
                bad = np.flatnonzero(number.isna().to_numpy() & pd.Series(cells).notna().to_numpy())
                if len(bad):
                    raise _prompt_error(
                        f"{{{f.name}}} has a float format but column {f.name!r} holds {cells[bad[0]]!r} "
                        f"({origin.rows(bad)})",
                        TEMPLATE_KEY,
                        "use a plain {column} field for a text column",
                        origin,
                    )
                columns[f.name] = number.tolist()
            else:
                columns[f.name] = [_text(v) for v in cells]
    return [resolved.format(**{name: col[i] for name, col in columns.items()}) for i in range(len(df))]


@dataclass(frozen=True)
class Limits:
    """Ludwig's cuts, in tokens (None: no cut): ``prompt`` (the input feature's
    ``max_sequence_length``), ``target`` (the output feature's), ``total`` (the smaller of
    ``preprocessing.global_max_sequence_length`` and the model's context length)."""

    prompt: int | None = None
    target: int | None = None
    total: int | None = None


@dataclass(frozen=True)
class Encoded:
    """Prepared rows: ``ids`` (N, L) int64 right-padded with ``pad_id``, ``labels`` (N, L)
    int64 (:data:`IGNORE_INDEX` at the prompt and padding), ``lengths`` (N,) each row's tokens
    before the cut, ``prompt_lengths`` and ``target_lengths`` (N,) after it (the EOS counts
    in the target)."""

    ids: np.ndarray
    labels: np.ndarray
    lengths: np.ndarray
    prompt_lengths: np.ndarray
    target_lengths: np.ndarray
    pad_id: int
    eos_id: int


def special_ids(tok: Any) -> tuple[int, int]:
    """(pad id, EOS id) of a Hugging Face tokenizer: its pad token, else its EOS (Ludwig's
    rule for a tokenizer without one).

    Raises:
        ValueError: the tokenizer has no EOS token (a row could not end).
    """
    eos = getattr(tok, "eos_token_id", None)
    if eos is None:
        raise ValueError("its tokenizer has no EOS token, so a generated answer could not end")
    pad = getattr(tok, "pad_token_id", None)
    return (int(eos) if pad is None else int(pad)), int(eos)


def _ids(tok: Any, texts: list[str], special: bool) -> list[list[int]]:
    if not texts:
        return []
    # truncation off: Ludwig's cuts come after; verbose off: transformers' warning that a row
    # exceeds the model's positions does not apply once they are made
    out = tok(texts, add_special_tokens=special, truncation=False, verbose=False)["input_ids"]
    return [list(map(int, row)) for row in out]


def encode_rows(prompts: list[str], targets: list[str] | None, tok: Any, limits: Limits) -> Encoded:
    """Rows of prompts (and targets) as model ids and labels (see the module docstring and
    :class:`Encoded`). Without ``targets`` (new rows to answer), a row is its prompt alone,
    unpadded but for the batch, every label :data:`IGNORE_INDEX`. Pure but for the tokenizer.

    Raises:
        ValueError: see :func:`special_ids`.
    """
    pad_id, eos_id = special_ids(tok)
    p_ids = _ids(tok, prompts, True)
    t_ids = _ids(tok, targets, False) if targets is not None else [[] for _ in prompts]
    rows: list[list[int]] = []
    labels: list[list[int]] = []
    full = np.zeros(len(prompts), dtype=np.int64)
    p_len = np.zeros(len(prompts), dtype=np.int64)
    t_len = np.zeros(len(prompts), dtype=np.int64)
    for i, (p, t) in enumerate(zip(p_ids, t_ids, strict=True)):
        tail = [*t, eos_id] if targets is not None else []
        full[i] = len(p) + len(tail)
        if limits.prompt is not None:
            p = p[: limits.prompt]
        if limits.target is not None and targets is not None:
            tail = tail[: limits.target]
        row, lab = [*p, *tail], [IGNORE_INDEX] * len(p) + tail
        if limits.total is not None:
            row, lab = row[: limits.total], lab[: limits.total]
        p_len[i] = min(len(p), len(row))
        t_len[i] = len(row) - p_len[i]
        rows.append(row)
        labels.append(lab)
    width = max((len(r) for r in rows), default=1) or 1
    ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    lab_arr = np.full((len(rows), width), IGNORE_INDEX, dtype=np.int64)
    for i, (r, lab) in enumerate(zip(rows, labels, strict=True)):
        ids[i, : len(r)] = r
        lab_arr[i, : len(lab)] = lab
    return Encoded(ids, lab_arr, full, p_len, t_len, pad_id, eos_id)


def length_stats(enc: Encoded, train: np.ndarray) -> dict[str, float]:
    """The training rows' token counts (prompt + target + EOS, before the cut): ``length_p50``,
    ``length_p90``, ``length_p99``, ``length_max``, ``truncated`` (rows cut), and the longest
    prompt and target after the cut (``prompt_length_max``, ``target_length_max``). Pure."""
    rows = np.asarray(train, dtype=np.int64)
    if len(rows) == 0:
        rows = np.arange(len(enc.lengths))
    lengths = enc.lengths[rows]
    kept = enc.prompt_lengths[rows] + enc.target_lengths[rows]
    if len(lengths) == 0:
        return length_percentiles(lengths, 0)
    return {
        **length_percentiles(lengths, int((kept < lengths).sum())),
        "prompt_length_max": float(enc.prompt_lengths[rows].max()),
        "target_length_max": float(enc.target_lengths[rows].max()),
    }


def _smaller(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def fill_constant(s: pd.Series, prep: Any) -> pd.Series:
    """A text column (N rows) with its missing cells as the feature's ``fill_value`` (Ludwig's
    ``fill_with_const`` default; a target's missing rows were dropped before). ``prep`` is the
    feature's preprocessing config (no ``fill_value``: ""). Pure; driver or serving process."""
    fill = getattr(prep, "fill_value", "")
    return s.astype(object).where(s.notna(), fill)


def lowercase(texts: list[str], prep: Any) -> list[str]:
    """``texts`` lowercased when the feature's preprocessing ``lowercase`` is set (Ludwig's text
    preprocessing), else as given (the same list). Pure; driver or serving process."""
    return [t.lower() for t in texts] if getattr(prep, "lowercase", False) else texts


@dataclass(frozen=True)
class LLMPrepared:
    """An llm config's prepared rows: the input feature's ``ids`` and the output's ``labels``
    (see :class:`Encoded`), and their :class:`FeatureMeta` (input and output)."""

    input_name: str
    output_name: str
    ids: np.ndarray
    labels: np.ndarray
    input_meta: FeatureMeta
    output_meta: FeatureMeta


def prepare_llm(
    df: pd.DataFrame,
    cfg: Any,
    train: np.ndarray,
    origin: DataOrigin,
    load_tokenizer: Callable[[str], Any] | None = None,
) -> LLMPrepared:
    """The rows of ``df`` (already sampled, dropped and split) for an llm config. Driver.

    The output's :class:`FeatureMeta` is ``type="text"`` with ``stats`` ``pad_id``, ``eos_id``,
    ``vocab_size`` and :func:`length_stats`, and ``fitted`` ``{"base_model", "template",
    "task", "limits"}`` (what a served model needs to prepare new rows the same way); the
    input's is ``type="text"`` with ``stats`` ``padding_id`` (what batch-size probes count by:
    :mod:`ludwig_hpo.train.lengths`), ``vocab_size`` and the same lengths (what ``hpo validate``
    prints), and ``shape`` (L,).

    Args:
        load_tokenizer: hub id or folder -> tokenizer (None:
            :func:`ludwig_hpo.data.hf_loader.load_tokenizer`).

    Raises:
        DataError: more than one input feature, a bad template (:func:`check_template`),
            a tokenizer that cannot be loaded or has no EOS token, no training row with a
            target token left after the cut.
    """
    from ludwig_hpo.data.rows import column_of

    if len(cfg.input_features) != 1:
        raise DataError(
            f"an llm config reads one input feature (Ludwig's rule), this one has {len(cfg.input_features)}",
            source=origin.source,
            key="input_features",
            fix="keep one input feature and name the other columns in prompt.template as {column}",
        )
    feat, out = cfg.input_features[0], cfg.output_features[0]
    base = cfg.base_model
    if load_tokenizer is None:
        from ludwig_hpo.data import hf_loader

        load_tokenizer = hf_loader.load_tokenizer
    try:
        tok = load_tokenizer(base)
        pad_id, eos_id = special_ids(tok)
    except (OSError, ValueError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise DataError(
            f"the tokenizer of base_model {base!r} cannot be used: {reason}",
            source=origin.source,
            key="base_model",
            fix=getattr(e, "fix", None)
            or "save the tokenizer into the model's folder (tokenizer.save_pretrained), or give a hub id reachable from here",
        ) from e
    prompt_cfg = getattr(cfg, "prompt", None)
    template = getattr(prompt_cfg, "template", None)
    task = getattr(prompt_cfg, "task", None)
    in_col = column_of(df, feat, "input_features", origin)
    target_col = column_of(df, out, "output_features", origin)
    frame = df.copy()
    frame[in_col.name] = fill_constant(in_col, feat.preprocessing)
    prompts = lowercase(render_prompts(frame, str(in_col.name), template, task, origin), feat.preprocessing)
    targets = lowercase([_text(v) for v in fill_constant(target_col, out.preprocessing).tolist()], out.preprocessing)
    from ludwig_hpo.data.hf_loader import context_length, read_config_dict, resolve

    try:
        context = context_length(read_config_dict(resolve(base)))
    except ValueError:
        context = None
    if context is None:  # a hub model whose config.json is not here: its tokenizer's limit, when it has one
        limit = getattr(tok, "model_max_length", None)
        context = limit if isinstance(limit, int) and 0 < limit < 1_000_000 else None
    glob = getattr(cfg, "preprocessing", None)
    limits = Limits(
        prompt=getattr(feat.preprocessing, "max_sequence_length", None),
        target=getattr(out.preprocessing, "max_sequence_length", None),
        total=_smaller(getattr(glob, "global_max_sequence_length", None), context),
    )
    enc = encode_rows(prompts, targets, tok, limits)
    train = np.asarray(train, dtype=np.int64)
    if len(train) and not enc.target_lengths[train].any():
        raise DataError(
            f"no training row keeps a target token after the cut to {limits.total} tokens "
            "(the prompts fill the whole length)",
            source=origin.source,
            key="preprocessing.global_max_sequence_length",
            fix="raise it, or shorten the prompts (input_features[...].preprocessing.max_sequence_length)",
        )
    vocab_size = float(len(tok))
    lengths = length_stats(enc, train)
    stats = {"pad_id": float(pad_id), "eos_id": float(eos_id), "vocab_size": vocab_size, **lengths}
    fitted = {
        "base_model": base,
        "template": resolve_template(template, task),
        "task": task,
        "limits": {"prompt": limits.prompt, "target": limits.target, "total": limits.total},
    }
    width = (int(enc.ids.shape[1]),)
    return LLMPrepared(
        input_name=feat.name,
        output_name=out.name,
        ids=enc.ids,
        labels=enc.labels,
        input_meta=FeatureMeta(
            feat.name, "text", shape=width, stats={"padding_id": float(pad_id), "vocab_size": vocab_size, **lengths}
        ),
        output_meta=FeatureMeta(out.name, "text", shape=width, stats=stats, fitted=fitted),
    )


def prompt_ids(ids: np.ndarray, labels: np.ndarray, pad_id: int) -> list[list[int]]:
    """Each row's prompt: its ids where the label is :data:`IGNORE_INDEX` and the id is not
    padding (the contract other modules read prompts by). Pure."""
    keep = (labels == IGNORE_INDEX) & (ids != pad_id)
    return [row[mask].tolist() for row, mask in zip(ids, keep, strict=True)]


def reference_ids(labels: np.ndarray) -> list[list[int]]:
    """Each row's reference: its label ids other than :data:`IGNORE_INDEX` (the EOS included). Pure."""
    return [row[row != IGNORE_INDEX].tolist() for row in labels]
