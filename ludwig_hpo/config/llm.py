"""The sections of ``model_type: llm`` (Ludwig's ``ludwig/schema/llms/*``): ``prompt``,
``adapter``, ``quantization``, ``generation``, and the text output feature a fine-tuned LLM
generates. Typed, frozen (pydantic); no I/O, no torch / peft / transformers import: the peft
and generation keyword arguments are plain dicts built here and handed to those libraries by
the model code (:mod:`ludwig_hpo.model.llm`).

Defaults are Ludwig's. The checks that need the base model's own config (``target_modules``,
its context length) live in :mod:`ludwig_hpo.model.llm_checks`; the template's columns are
checked against the dataset where the data is read (:mod:`ludwig_hpo.data.llm`).
"""

from __future__ import annotations

import string
from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import ConfigDict, Field, field_validator, model_validator

from ludwig_hpo.config.base import RuleError, _Base
from ludwig_hpo.config.feature_base import _Feature

#: The template field Ludwig fills with the input feature's own cell.
SAMPLE = "__sample__"
#: The template field Ludwig fills with ``prompt.task``.
TASK = "__task__"
#: The template field of Ludwig's retrieved context (``prompt.retrieval``, not supported).
CONTEXT = "__context__"

#: Ludwig's zero-shot template, used when ``prompt.task`` is set without a ``template``.
DEFAULT_TEMPLATE = "SAMPLE INPUT: {__sample__}\n\nUSER: Complete the following task: {__task__}\n\nASSISTANT:\n"


# ---------------------------------------------------------------------------- prompt
class RetrievalConfig(_Base):
    """Ludwig's ``prompt.retrieval`` (few-shot context retrieved from an index of the training
    split). Only its disabled form (``type`` null, ``k`` 0) is accepted: retrieval is not
    supported yet."""

    type: str | None = None
    index_name: str | None = None
    model_name: str | None = None
    k: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _not_yet(self) -> RetrievalConfig:
        if self.type is not None or self.k or self.index_name or self.model_name:
            raise RuleError(
                "prompt.retrieval (few-shot context from an embedding index) is not supported yet",
                fix="remove prompt.retrieval and write the context into prompt.template",
            )
        return self


def template_fields(template: str) -> list[str]:
    """The ``{field}`` names of a template, in order of first appearance, as Python's
    ``str.format`` reads them (Ludwig's parsing). Pure.

    Raises:
        RuleError: a template ``str.format`` cannot parse (an unclosed ``{``), a positional
            ``{}`` field, a conversion other than ``!s`` / ``!r`` / ``!a``, or a format spec
            other than Ludwig's ``f`` float specs.
    """
    try:
        parsed = [t for t in string.Formatter().parse(template) if t[1] is not None]
    except ValueError as e:
        raise RuleError(
            f"prompt.template cannot be read as a template: {e}",
            fix="write {column} placeholders, and {{ or }} for a literal brace",
        ) from None
    out: list[str] = []
    for _, name, spec, conversion in parsed:
        if not name:
            raise RuleError(
                "prompt.template has an empty {} placeholder",
                fix="name a column inside the braces, e.g. {question}, or write {{}} for literal braces",
            )
        if conversion not in (None, "s", "r", "a"):  # str.format would raise only when rendering a row
            raise RuleError(
                f"prompt.template field {{{name}!{conversion}}} has a conversion str.format does not know",
                fix=f"write {{{name}}} (or {{{name}!r}} for the cell's repr)",
            )
        if spec and "f" not in spec:
            raise RuleError(
                f"prompt.template field {{{name}:{spec}}} has a format spec other than a float one (e.g. .2f)",
                fix=f"write {{{name}}} or a float spec such as {{{name}:.2f}}",
            )
        if name not in out:
            out.append(name)
    return out


class PromptConfig(_Base):
    """Ludwig's ``prompt``: how a row becomes the text the model continues.

    ``template``: ``{column}`` placeholders filled with the row's cells (``{__sample__}`` is
    the input feature's own cell, ``{__task__}`` is ``task``), rendered with Python's
    ``str.format``; a ``{column:.2f}`` spec formats the cell as a float. It must name the
    input column (``__sample__``) or at least one dataset column, and hold ``{__task__}``
    when ``task`` is set. Without a template, ``task`` is required and Ludwig's zero-shot
    template is used: ``SAMPLE INPUT: {__sample__}\\n\\nUSER: Complete the following task:
    {__task__}\\n\\nASSISTANT:\\n``. Without a ``prompt`` section the input feature's cell is
    the prompt as it is.
    """

    template: str | None = None
    task: str | None = None
    retrieval: RetrievalConfig = RetrievalConfig()

    @model_validator(mode="after")
    def _ludwig_rules(self) -> PromptConfig:
        if self.template is None:
            if self.task is None:
                raise RuleError(
                    "prompt needs a template or a task",
                    fix="set prompt.template (e.g. 'Q: {question} A:'), or prompt.task for Ludwig's default template",
                )
            return self
        fields = template_fields(self.template)
        if self.task is not None and TASK not in fields:
            raise RuleError(
                "prompt.task is set but prompt.template has no {__task__} field",
                fix="add {__task__} to the template where the task goes, or remove prompt.task",
            )
        if CONTEXT in fields:
            raise RuleError(
                "prompt.template names {__context__}, which only retrieval fills (not supported yet)",
                fix="remove {__context__} from the template",
            )
        if not [f for f in fields if f != TASK]:
            raise RuleError(
                "prompt.template names no column: it would be the same text for every row",
                fix="add {__sample__} (the input feature's cell) or a {column} of the dataset",
            )
        return self

    @property
    def effective_template(self) -> str:
        """The template rows are rendered with: ``template``, or Ludwig's default one."""
        return self.template if self.template is not None else DEFAULT_TEMPLATE

    @property
    def columns(self) -> list[str]:
        """The dataset columns the template reads (every field but ``__sample__`` and
        ``__task__``), in order of first appearance."""
        return [f for f in template_fields(self.effective_template) if f not in (SAMPLE, TASK)]


# ---------------------------------------------------------------------------- adapters
class AdapterPostprocessor(_Base):
    """Ludwig's ``adapter.postprocessor``: ``merge_adapter_into_base_model`` saves the best
    model with the adapter merged into the base weights (one model to load) instead of the
    adapter alone; ``progressbar`` shows the merge's progress bar."""

    merge_adapter_into_base_model: bool = False
    progressbar: bool = False


class _Adapter(_Base):
    """What every adapter has: ``target_modules`` (module names or one regex; null: peft's
    defaults for the base model's architecture), ``postprocessor``, and Ludwig's
    ``pretrained_adapter_weights`` (not supported yet)."""

    #: the peft config class the adapter's keyword arguments are for
    peft_class_name: ClassVar[str]
    target_modules: Union[list[str], str, None] = None
    pretrained_adapter_weights: str | None = None
    postprocessor: AdapterPostprocessor = AdapterPostprocessor()

    @field_validator("pretrained_adapter_weights")
    @classmethod
    def _no_pretrained(cls, v: str | None) -> str | None:
        if v is not None:
            raise RuleError(
                "adapter.pretrained_adapter_weights (starting from a trained adapter) is not supported yet",
                fix="remove pretrained_adapter_weights: each trial trains its adapter from peft's initialization",
            )
        return v

    @field_validator("target_modules")
    @classmethod
    def _some_modules(cls, v: Any) -> Any:
        if isinstance(v, list) and not v:
            raise RuleError(
                "adapter.target_modules is an empty list", fix="name some modules, or null for peft's defaults"
            )
        return v

    def peft_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of :attr:`peft_class_name` (``peft.<name>(**kwargs)``) for a
        causal LM: ``task_type`` ``CAUSAL_LM`` and this adapter's keys in peft's spelling.
        Pure; any process."""
        return {"task_type": "CAUSAL_LM", "target_modules": self.target_modules, **self._own_kwargs()}

    def _own_kwargs(self) -> dict[str, Any]:
        raise NotImplementedError


def _ludwig_bias(data: Any) -> Any:
    # Ludwig spells the LoRA bias option bias_type; bias (peft's name) is accepted as well
    if isinstance(data, dict) and "bias_type" in data:
        if "bias" in data:
            raise RuleError("the adapter's bias is set twice: bias_type and bias", fix="keep only bias_type")
        data = {**{k: v for k, v in data.items() if k != "bias_type"}, "bias": data["bias_type"]}
    return data


#: ``init_lora_weights`` values that need data or a quantized base model to initialize from.
_DATA_INITS = ("eva", "corda", "loftq", "lora_ga")


class LoraAdapter(_Adapter):
    """LoRA (peft's ``LoraConfig``): rank ``r`` updates of the target modules scaled by
    ``alpha / r`` (``alpha / sqrt(r)`` with ``use_rslora``), ``dropout`` on their input;
    ``bias`` (Ludwig's ``bias_type``): which biases train (``none``, ``all``, ``lora_only``);
    ``use_dora``: weight-decomposed LoRA; ``init_lora_weights``: ``default`` (peft's), or
    ``gaussian``, ``pissa``, ``olora``, ``orthogonal``; ``rank_pattern`` / ``alpha_pattern``:
    per-module ranks and alphas."""

    peft_class_name: ClassVar[str] = "LoraConfig"
    type: Literal["lora"] = "lora"
    r: int = Field(default=8, ge=1)
    alpha: int = Field(default=16, ge=1)
    dropout: float = Field(default=0.05, ge=0, le=1)
    bias: Literal["none", "all", "lora_only"] = "none"
    use_rslora: bool = False
    use_dora: bool = False
    init_lora_weights: Literal["default", "gaussian", "pissa", "olora", "orthogonal"] = "default"
    rank_pattern: dict[str, int] | None = None
    alpha_pattern: dict[str, float] | None = None

    _bias = model_validator(mode="before")(_ludwig_bias)

    @field_validator("init_lora_weights", mode="before")
    @classmethod
    def _init_known(cls, v: Any) -> Any:
        if v in _DATA_INITS:
            raise RuleError(
                f"adapter.init_lora_weights: {v} is not supported yet (it initializes from data or a quantized model)",
                fix="use default, gaussian, pissa, olora or orthogonal",
            )
        return v

    def _own_kwargs(self) -> dict[str, Any]:
        return {
            "r": self.r,
            "lora_alpha": self.alpha,
            "lora_dropout": self.dropout,
            "bias": self.bias,
            "use_rslora": self.use_rslora,
            "use_dora": self.use_dora,
            "init_lora_weights": True if self.init_lora_weights == "default" else self.init_lora_weights,
            "rank_pattern": dict(self.rank_pattern or {}),
            "alpha_pattern": dict(self.alpha_pattern or {}),
        }


class AdaloraAdapter(LoraAdapter):
    """AdaLoRA (peft's ``AdaLoraConfig``): LoRA whose ranks are reallocated during training,
    from ``init_r`` towards an average ``target_r``, between ``tinit`` and ``total_step -
    tfinal`` steps, every ``delta_t`` steps (EMA ``beta1`` / ``beta2``, orthogonality
    regularization ``orth_reg_weight``)."""

    peft_class_name: ClassVar[str] = "AdaLoraConfig"
    type: Literal["adalora"] = "adalora"  # type: ignore[assignment]  # the tag of this subclass
    target_r: int = Field(default=8, ge=1)
    init_r: int = Field(default=12, ge=1)
    tinit: int = Field(default=0, ge=0)
    tfinal: int = Field(default=0, ge=0)
    delta_t: int = Field(default=1, ge=0)
    beta1: float = Field(default=0.85, ge=0, le=1)
    beta2: float = Field(default=0.85, ge=0, le=1)
    orth_reg_weight: float = Field(default=0.5, ge=0, le=1)
    total_step: int = Field(default=10000, ge=1)

    @model_validator(mode="after")
    def _schedule_fits(self) -> AdaloraAdapter:
        if self.tinit + self.tfinal >= self.total_step:
            raise RuleError(
                f"adalora's tinit + tfinal ({self.tinit + self.tfinal}) must be below total_step ({self.total_step})",
                fix="lower tinit / tfinal or raise total_step",
            )
        return self

    def _own_kwargs(self) -> dict[str, Any]:
        return {
            **super()._own_kwargs(),
            "target_r": self.target_r,
            "init_r": self.init_r,
            "tinit": self.tinit,
            "tfinal": self.tfinal,
            "deltaT": self.delta_t,
            "beta1": self.beta1,
            "beta2": self.beta2,
            "orth_reg_weight": self.orth_reg_weight,
            "total_step": self.total_step,
        }


class IA3Adapter(_Adapter):
    """(IA)^3 (peft's ``IA3Config``): learned vectors that rescale the target modules'
    activations (the input of ``feedforward_modules``, a subset of ``target_modules``)."""

    peft_class_name: ClassVar[str] = "IA3Config"
    type: Literal["ia3"] = "ia3"
    feedforward_modules: Union[list[str], str, None] = None
    fan_in_fan_out: bool = False
    modules_to_save: list[str] | None = None
    init_ia3_weights: bool = True

    def _own_kwargs(self) -> dict[str, Any]:
        return {
            "feedforward_modules": self.feedforward_modules,
            "fan_in_fan_out": self.fan_in_fan_out,
            "modules_to_save": self.modules_to_save,
            "init_ia3_weights": self.init_ia3_weights,
        }


class LoHaAdapter(_Adapter):
    """LoHa (peft's ``LoHaConfig``): a Hadamard product of two rank ``r`` updates scaled by
    ``alpha / r``."""

    peft_class_name: ClassVar[str] = "LoHaConfig"
    type: Literal["loha"] = "loha"
    r: int = Field(default=8, ge=1)
    alpha: float = Field(default=8, gt=0)

    def _own_kwargs(self) -> dict[str, Any]:
        return {"r": self.r, "alpha": self.alpha}


class LoKrAdapter(_Adapter):
    """LoKr (peft's ``LoKrConfig``): a Kronecker product update of rank ``r`` scaled by
    ``alpha / r``."""

    peft_class_name: ClassVar[str] = "LoKrConfig"
    type: Literal["lokr"] = "lokr"
    r: int = Field(default=8, ge=1)
    alpha: float = Field(default=8, gt=0)

    def _own_kwargs(self) -> dict[str, Any]:
        return {"r": self.r, "alpha": self.alpha}


class VeraAdapter(_Adapter):
    """VeRA (peft's ``VeraConfig``): frozen random rank ``r`` matrices shared by every target
    module (seeded by ``projection_prng_key``), with trained scaling vectors."""

    peft_class_name: ClassVar[str] = "VeraConfig"
    type: Literal["vera"] = "vera"
    r: int = Field(default=256, ge=1)
    projection_prng_key: int = Field(default=0, ge=0)

    def _own_kwargs(self) -> dict[str, Any]:
        return {"r": self.r, "projection_prng_key": self.projection_prng_key}


class OFTAdapter(_Adapter):
    """OFT (peft's ``OFTConfig``, Ludwig's ``oft``): a trained block-diagonal orthogonal
    transform of each target module's weight, in blocks of ``oft_block_size`` (or ``r``
    blocks: peft takes exactly one of the two non-zero), ``module_dropout`` the chance a
    block is left out in a training step; ``coft``: constrained OFT, ``||I - R^T R|| <= eps``.
    Ludwig's defaults."""

    peft_class_name: ClassVar[str] = "OFTConfig"
    type: Literal["oft"] = "oft"
    r: int = Field(default=0, ge=0)
    oft_block_size: int = Field(default=32, ge=0)
    module_dropout: float = Field(default=0.0, ge=0, le=1)
    coft: bool = False
    eps: float = Field(default=6e-5, ge=0)

    def _own_kwargs(self) -> dict[str, Any]:
        return {
            "r": self.r,
            "oft_block_size": self.oft_block_size,
            "module_dropout": self.module_dropout,
            "coft": self.coft,
            "eps": self.eps,
        }


#: Ludwig's prompt-learning adapters, refused (Ludwig disables them too).
_PROMPT_LEARNING = ("adaption_prompt", "prompt_tuning", "prefix_tuning", "p_tuning")


class UnsupportedAdapter(_Base):
    """Ludwig's prompt-learning adapters (Ludwig itself disables them): refused in one line."""

    model_config = ConfigDict(extra="allow", frozen=True)
    type: Literal["adaption_prompt", "prompt_tuning", "prefix_tuning", "p_tuning"]

    @model_validator(mode="before")
    @classmethod
    def _refuse(cls, data: Any) -> Any:
        kind = data.get("type") if isinstance(data, dict) else data
        raise RuleError(f"adapter type {kind!r} is not supported yet", fix=f"use one of {', '.join(ADAPTER_TYPES)}")


#: The adapter types trained here, Ludwig's names.
ADAPTER_TYPES = ("lora", "adalora", "ia3", "loha", "lokr", "vera", "oft")


#: Adapter types of Ludwig's newest releases (peft has them) not trained here yet.
_LATER_ADAPTERS = ("boft", "vblora", "ln_tuning", "tinylora", "fourierft", "hra", "waveft", "bone", "c3a", "road")


def adapter_default_type(value: Any) -> Any:
    """A before-validator of ``adapter``: Ludwig's short form ``adapter: lora`` is ``{type:
    lora}``, and a mapping without ``type`` is LoRA. Pure.

    Raises:
        RuleError: at ``adapter.type``, a type that is not one of :data:`ADAPTER_TYPES` nor of
            the prompt-learning ones (refused by :class:`UnsupportedAdapter`).
    """
    if isinstance(value, str):
        value = {"type": value}
    if isinstance(value, dict) and "type" not in value:
        return {"type": "lora", **value}
    kind = value.get("type") if isinstance(value, dict) else None
    if isinstance(kind, str) and kind not in ADAPTER_TYPES and kind not in _PROMPT_LEARNING:
        known = kind in _LATER_ADAPTERS
        raise RuleError(
            f"adapter type {kind!r} is " + ("not supported yet" if known else "not an adapter Ludwig or peft names"),
            path=("adapter", "type"),
            fix=f"use one of {', '.join(ADAPTER_TYPES)}",
        )
    return value


AdapterConfig = Annotated[
    Union[
        LoraAdapter, AdaloraAdapter, IA3Adapter, LoHaAdapter, LoKrAdapter, VeraAdapter, OFTAdapter, UnsupportedAdapter
    ],
    Field(discriminator="type"),
]
"""``adapter``: one of :data:`ADAPTER_TYPES`, tagged by ``type``."""

#: Any adapter's model (for annotations).
AnyAdapter = Union[LoraAdapter, AdaloraAdapter, IA3Adapter, LoHaAdapter, LoKrAdapter, VeraAdapter, OFTAdapter]


# ---------------------------------------------------------------------------- quantization
class QuantizationConfig(_Base):
    """Ludwig's ``quantization``: the base model's weights loaded in ``bits`` 4 or 8 by
    bitsandbytes (CUDA only). ``llm_int8_threshold``: the outlier threshold of 8-bit
    matmuls; ``llm_int8_has_fp16_weight``: keep 16-bit main weights; ``bnb_4bit_compute_dtype``,
    ``bnb_4bit_use_double_quant``, ``bnb_4bit_quant_type``: the 4-bit layers' compute type,
    nested quantization and data type."""

    bits: Literal[4, 8] = 4
    llm_int8_threshold: float = Field(default=6.0, ge=0)
    llm_int8_has_fp16_weight: bool = False
    bnb_4bit_compute_dtype: Literal["float32", "float16", "bfloat16"] = "float16"
    bnb_4bit_use_double_quant: bool = True
    bnb_4bit_quant_type: Literal["fp4", "nf4"] = "nf4"

    def bnb_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of transformers' ``BitsAndBytesConfig`` (the compute dtype
        as its name: ``torch_dtype = getattr(torch, name)`` where it is built). Pure."""
        return {
            "load_in_4bit": self.bits == 4,
            "load_in_8bit": self.bits == 8,
            "llm_int8_threshold": self.llm_int8_threshold,
            "llm_int8_has_fp16_weight": self.llm_int8_has_fp16_weight,
            "bnb_4bit_compute_dtype": self.bnb_4bit_compute_dtype,
            "bnb_4bit_use_double_quant": self.bnb_4bit_use_double_quant,
            "bnb_4bit_quant_type": self.bnb_4bit_quant_type,
        }


# ---------------------------------------------------------------------------- generation
#: Generation options only sampling reads.
_SAMPLING_KEYS = ("temperature", "top_k", "top_p", "typical_p", "epsilon_cutoff", "eta_cutoff")


class GenerationConfig(_Base):
    """Ludwig's ``generation``: how outputs are generated (transformers' ``GenerationConfig``
    fields, Ludwig's defaults: ``max_new_tokens`` 32, sampling with ``temperature`` 0.1,
    ``top_k`` 50, ``top_p`` 1.0, one beam). Null fields are left to transformers; special token
    ids left null are the tokenizer's."""

    max_new_tokens: int | None = Field(default=32, ge=1)
    min_new_tokens: int | None = Field(default=None, ge=0)
    max_length: int | None = Field(default=32, ge=1)
    min_length: int | None = Field(default=0, ge=0)
    early_stopping: Union[bool, Literal["never"], None] = False
    max_time: float | None = Field(default=None, gt=0)
    do_sample: bool | None = True
    num_beams: int | None = Field(default=1, ge=1)
    num_beam_groups: int | None = Field(default=1, ge=1)
    penalty_alpha: float | None = Field(default=None, ge=0)
    use_cache: bool | None = True
    prompt_lookup_num_tokens: int | None = Field(default=None, ge=0)
    temperature: float | None = Field(default=0.1, ge=0)
    top_k: int | None = Field(default=50, ge=1)
    top_p: float | None = Field(default=1.0, ge=0, le=1)
    typical_p: float | None = Field(default=1.0, ge=0, le=1)
    epsilon_cutoff: float | None = Field(default=0.0, ge=0, le=1)
    eta_cutoff: float | None = Field(default=0.0, ge=0, le=1)
    diversity_penalty: float | None = Field(default=0.0, ge=0)
    repetition_penalty: float | None = Field(default=1.0, ge=0)
    encoder_repetition_penalty: float | None = Field(default=1.0, ge=0)
    length_penalty: float | None = 1.0
    no_repeat_ngram_size: int | None = Field(default=0, ge=0)
    bad_words_ids: list[list[int]] | None = None
    force_words_ids: list[list[int]] | None = None
    renormalize_logits: bool | None = False
    forced_bos_token_id: int | None = None
    forced_eos_token_id: Union[int, list[int], None] = None
    remove_invalid_values: bool | None = False
    exponential_decay_length_penalty: tuple[int, float] | None = None
    suppress_tokens: list[int] | None = None
    begin_suppress_tokens: list[int] | None = None
    guidance_scale: float | None = Field(default=None, ge=0)
    pad_token_id: int | None = None
    bos_token_id: int | None = None
    eos_token_id: Union[int, list[int], None] = None

    @model_validator(mode="before")
    @classmethod
    def _not_here(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key, why in (
                ("forced_decoder_ids", "transformers 5 removed it"),
                ("sequence_bias", "its keys are token-id tuples, which YAML cannot write"),
            ):
                if data.get(key) is not None:
                    raise RuleError(
                        f"generation.{key} is not supported ({why})",
                        fix=f"remove generation.{key} (bad_words_ids or suppress_tokens block tokens)",
                    )
        return data

    @model_validator(mode="after")
    def _consistent(self) -> GenerationConfig:
        if self.do_sample and self.temperature == 0:
            raise RuleError(
                "generation.temperature 0 with do_sample: true divides the logits by zero",
                fix="set do_sample: false for greedy decoding, or a temperature above 0",
            )
        beams, groups = self.num_beams or 1, self.num_beam_groups or 1
        if beams % groups:
            raise RuleError(
                f"generation.num_beams ({beams}) must be a multiple of num_beam_groups ({groups})",
                fix="set num_beams to a multiple of num_beam_groups",
            )
        return self

    def hf_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of ``model.generate`` (transformers' ``GenerationConfig``
        fields): every field that is not null, ``max_length`` / ``min_length`` left out when
        ``max_new_tokens`` / ``min_new_tokens`` are set (which override them), and the sampling
        options (``temperature``, ``top_k``, ``top_p``, ...) left out without ``do_sample``
        (greedy and beam search ignore them; transformers warns on every call that gets them).
        Pure; any process."""
        out = {k: v for k, v in self.model_dump().items() if v is not None}
        if not self.do_sample:
            for key in _SAMPLING_KEYS:
                out.pop(key, None)
        # Ludwig: max_new_tokens overrides max_length, min_new_tokens min_length
        for new, old in (("max_new_tokens", "max_length"), ("min_new_tokens", "min_length")):
            if new in out:
                out.pop(old, None)
        if "exponential_decay_length_penalty" in out:
            out["exponential_decay_length_penalty"] = tuple(out["exponential_decay_length_penalty"])
        return out


# ---------------------------------------------------------------------------- text output
class LLMTextOutputPreprocessing(_Base):
    """The ``preprocessing`` of an llm's text output (Ludwig's ``text_llm_output``): the
    target is lower-cased (``lowercase``, Ludwig's default true, as its input's), tokenized by
    the base model's tokenizer, cut to ``max_sequence_length`` tokens (null: the longest
    training target), an EOS appended; ``missing_value_strategy``: a row whose target is
    missing is dropped (``drop_row``, Ludwig's default) or filled with ``fill_value``."""

    max_sequence_length: int | None = Field(default=None, ge=1)
    lowercase: bool = True
    missing_value_strategy: Literal["drop_row", "fill_with_const"] = "drop_row"
    fill_value: str = ""


class LLMTextDecoder(_Base):
    """Ludwig's ``text_extractor`` decoder of an llm: the base model's language-model head
    (nothing to configure); written for Ludwig's sake only."""

    type: Literal["text_extractor"] = "text_extractor"
    max_new_tokens: int | None = None

    @model_validator(mode="before")
    @classmethod
    def _only_extractor(cls, data: Any) -> Any:
        kind = data.get("type") if isinstance(data, dict) else None
        if kind is not None and kind != "text_extractor":
            raise RuleError(
                f"decoder type {kind!r} of an llm's text output is not supported yet (the base model's "
                "language-model head generates the text as it is)",
                fix="remove the decoder, or write decoder: {type: text_extractor}",
            )
        return data

    @field_validator("max_new_tokens")
    @classmethod
    def _generation_decides(cls, v: int | None) -> int | None:
        if v is not None:
            raise RuleError(
                "decoder.max_new_tokens is Ludwig's internal copy of generation.max_new_tokens",
                fix="set generation.max_new_tokens instead",
            )
        return v


class LLMTextLoss(_Base):
    """Ludwig's ``next_token_softmax_cross_entropy``: the mean cross entropy of the target
    tokens (the prompt masked), each position predicting the next token."""

    type: Literal["next_token_softmax_cross_entropy"] = "next_token_softmax_cross_entropy"
    weight: float = Field(default=1.0, ge=0)


class LLMTextOutputFeature(_Feature):
    """The one output of ``model_type: llm``: a text column the model learns to generate
    after the prompt. It reports ``loss``, ``perplexity``, ``token_accuracy`` and
    ``sequence_accuracy`` (teacher-forced, every validation row) and ``exact_match`` and
    ``rouge_l`` (on outputs generated for ``trainer.eval_generation_samples`` validation rows)."""

    type: Literal["text"]
    preprocessing: LLMTextOutputPreprocessing = LLMTextOutputPreprocessing()
    decoder: LLMTextDecoder = LLMTextDecoder()
    loss: LLMTextLoss = LLMTextLoss()

    @property
    def loss_weight(self) -> float:
        """The output's weight in the combined loss (the only loss of an llm)."""
        return float(self.loss.weight)

    @property
    def dependencies(self) -> list[str]:
        """An llm's one output depends on no other output."""
        return []


# ---------------------------------------------------------------------------- whole-file rules
#: The trainer types of Ludwig's llm: ``finetune`` trains; ``none`` (in-context learning) does not.
LLM_TRAINERS = ("finetune", "none")
#: Top-level keys a parameter path reads as an llm section: a feature may not take these names.
LLM_SECTIONS = ("adapter", "generation", "quantization")
#: Text preprocessing keys of Ludwig's own tokenizers, which an llm does not use: the base
#: model's tokenizer reads its text.
_TOKENIZER_KEYS = (
    "tokenizer",
    "pretrained_model_name_or_path",
    "vocab_file",
    "most_common",
    "padding_symbol",
    "unknown_symbol",
    "padding",
    "ngram_size",
    "cache_encoder_embeddings",
)


def _features(data: dict[str, Any], section: str) -> list[Any]:
    feats = data.get(section)
    return feats if isinstance(feats, list) else []


def check_llm_sections(data: dict[str, Any]) -> None:
    """The top-level rules of a raw ``model_type: llm`` mapping, checked before the rest of
    it is validated: a ``base_model``, a ``trainer.type`` that fine-tunes, no ECD
    ``combiner``, no ``model_parameters``. Pure.

    Raises:
        RuleError: at the key, with the fix.
    """
    base = data.get("base_model")
    if not isinstance(base, str) or not base.strip():
        raise RuleError(
            "model_type llm needs base_model: the pretrained causal language model to fine-tune",
            path=("base_model",),
            fix="set base_model to a local model folder or a Hugging Face hub id, e.g. base_model: ./models/tiny",
        )
    if "model_parameters" in data:
        raise RuleError(
            "model_parameters (rope_scaling, neftune) is not supported yet",
            path=("model_parameters",),
            fix="remove model_parameters: the base model runs with its own config",
        )
    if "combiner" in data:
        raise RuleError(
            "an llm has no combiner: the base model reads the prompt's tokens",
            path=("combiner",),
            fix="remove the combiner section (it belongs to model_type ecd)",
        )
    trainer = data.get("trainer")
    kind = trainer.get("type") if isinstance(trainer, dict) else None
    if kind == "zeroshot":
        raise RuleError(
            "trainer.type zeroshot (Ludwig's old name of type none: in-context learning, no training) is not "
            "supported yet",
            path=("trainer", "type"),
            fix="use trainer.type: finetune",
        )
    if kind == "none":
        raise RuleError(
            "trainer.type none (Ludwig's in-context learning, no training) is not supported yet",
            path=("trainer", "type"),
            fix="use trainer.type: finetune",
        )
    if kind is not None and kind not in LLM_TRAINERS:
        raise RuleError(
            f"trainer.type {kind!r} is not a trainer of model_type llm",
            path=("trainer", "type"),
            fix="use trainer.type: finetune (the default of an llm)",
        )


def check_llm_features(data: dict[str, Any]) -> None:
    """Ludwig's feature rules of ``model_type: llm``: one text input feature (no encoder, no
    tokenizer keys: the base model's tokenizer reads it) and one text output feature. Pure.

    Raises:
        RuleError: at the feature or key, with the fix.
    """
    for section in ("input_features", "output_features"):
        feats = _features(data, section)
        side = section[:-9]
        for i, f in enumerate(feats):
            kind = f.get("type") if isinstance(f, dict) else None
            if kind != "text":
                raise RuleError(
                    f"an llm's {side} feature is type text, not {kind} (Ludwig's finetune trainer)",
                    path=(section, i, "type"),
                    fix=f"set type: text, or train this {side} with model_type: ecd",
                )
            if f.get("name") in LLM_SECTIONS:
                raise RuleError(
                    f"feature name {f['name']!r} is an llm section's name, which parameter paths read",
                    path=(section, i, "name"),
                    fix=f"rename the feature and keep its column, e.g. {{name: {f['name']}_text, column: {f['name']}}}",
                )
        if len(feats) > 1:
            fix = (
                "keep one input feature and put the other columns into prompt.template"
                if section == "input_features"
                else "keep one output feature (one sweep per target)"
            )
            raise RuleError(
                f"model_type llm reads exactly one {side} feature, but {len(feats)} are listed",
                path=(section, 1),
                fix=fix,
            )
    for i, f in enumerate(_features(data, "input_features")):
        enc = f.get("encoder")
        if enc is not None and not (isinstance(enc, dict) and enc.get("type") == "passthrough" and len(enc) == 1):
            raise RuleError(
                "an llm's input feature has no encoder: the base model reads the prompt's tokens",
                path=("input_features", i, "encoder"),
                fix="remove encoder (or write encoder: {type: passthrough}, Ludwig's llm default)",
            )
        prep = f.get("preprocessing")
        for key in _TOKENIZER_KEYS:
            if isinstance(prep, dict) and key in prep:
                raise RuleError(
                    f"preprocessing.{key} is read by Ludwig's own tokenizers; an llm's text is tokenized by its "
                    "base model's tokenizer, as written",
                    path=("input_features", i, "preprocessing", key),
                    fix=f"remove preprocessing.{key}",
                )


def llm_defaults(data: dict[str, Any]) -> dict[str, Any]:
    """A raw ``model_type: llm`` mapping with Ludwig's llm defaults filled: ``trainer.type:
    finetune``, the input's ``preprocessing.max_sequence_length`` null (no cut but the
    model's context) unless written, and Ludwig's ``encoder: {type: passthrough}`` of the input
    dropped (an llm's input has no encoder). Other mappings pass unchanged. Pure.
    """
    if data.get("model_type") != "llm":
        return data
    out = dict(data)
    trainer = out.get("trainer")
    trainer = dict(trainer) if isinstance(trainer, dict) else {}
    trainer.setdefault("type", "finetune")
    out["trainer"] = trainer
    feats = []
    for f in _features(out, "input_features"):
        if isinstance(f, dict):
            prep = f.get("preprocessing")
            prep = dict(prep) if isinstance(prep, dict) else {}
            prep.setdefault("max_sequence_length", None)  # Ludwig's text_llm_input: no cut
            f = {**{k: v for k, v in f.items() if k != "encoder"}, "preprocessing": prep}
        feats.append(f)
    out["input_features"] = feats
    return out


def check_quantization_backend(quantization: QuantizationConfig | None, use_gpu: bool | str) -> None:
    """``quantization`` needs a GPU (bitsandbytes is CUDA only): refused with ``backend.use_gpu:
    false``; ``auto`` is checked at preflight, where the devices are known. Pure.

    Raises:
        RuleError: at ``quantization``.
    """
    if quantization is not None and use_gpu is False:
        raise RuleError(
            f"quantization (bits {quantization.bits}) loads the base model with bitsandbytes, which needs a GPU, "
            "but backend.use_gpu is false",
            path=("quantization",),
            fix="set backend.use_gpu: true (or auto on a GPU machine), or remove quantization",
        )


def describe_llm(cfg: Any) -> list[str]:
    """What ``hpo validate`` says of an llm config: the base model, the adapter and its main
    keys, the prompt, quantization and the generation length. Pure."""
    adapter = cfg.adapter
    if adapter is None:
        tuned = "no adapter: every weight trains"
    else:
        keys = [f"{k} {getattr(adapter, k)}" for k in ("r", "alpha", "dropout") if hasattr(adapter, k)]
        targets = adapter.target_modules
        keys.append(f"target_modules {targets if targets is not None else 'peft defaults'}")
        tuned = f"adapter {adapter.type} ({', '.join(keys)})"
    prompt = cfg.prompt
    if prompt is None:
        shown = f"the {cfg.input_features[0].name} cell as it is"
    else:
        text = prompt.effective_template
        shown = repr(text if len(text) <= 60 else text[:57] + "...")
    quant = f"; quantized to {cfg.quantization.bits} bits" if cfg.quantization is not None else ""
    return [
        f"llm: base_model {cfg.base_model}; {tuned}{quant}",
        f"llm: prompt {shown}; generation max_new_tokens {cfg.generation.max_new_tokens}, "
        f"do_sample {str(cfg.generation.do_sample).lower()}",
    ]
