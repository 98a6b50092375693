"""The model of a ``model_type: llm`` config: a Hugging Face causal LM (``base_model``) with a
peft adapter (``adapter``; none: every weight trains), and the base model's weights kept per
process between the trials that share them.

Weights are read once per process (:func:`base_weights`): the CPU state dict of the last base
model read, float32 whatever the checkpoint's dtype (the trainer's ``precision`` decides the
rest); a different base model frees it before the next is read. Each trial builds a NEW module
on the meta device and assigns it those tensors: with an adapter the frozen base weights share
the cached storage (no copy: a warm pool's successive trials cost one base model's memory, plus
each trial's adapter), without one the module gets its own copy (full fine-tuning writes them).
The shared weights must therefore never be written in place: :meth:`LLMModel.merged` merges an
adapter into a copy. A quantized base (``quantization``, CUDA and bitsandbytes only) is loaded by
transformers on the device for each trial instead.

Runs on every rank; the adapter's initialization draws from torch's global RNG (seeded by the
loop with the trial seed), so every rank builds the same weights.
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass
from typing import Any, cast

import torch
from torch import nn

from ludwig_hpo.data.preprocess import FeatureMeta
from ludwig_hpo.errors import ConfigError
from ludwig_hpo.model.combiners import AUX_LOSS
from ludwig_hpo.model.llm_metrics import LLMLoss, LLMMetrics


@dataclass
class _Base:
    key: tuple[str, str]
    config: Any
    #: the persistent state (parameters and saved buffers), CPU float32
    state: dict[str, torch.Tensor]
    #: the buffers a state dict leaves out (rotary frequencies), by their module path
    buffers: dict[str, torch.Tensor]


#: The base model this process holds: at most one (another base model replaces it).
_CACHE: list[_Base] = []
#: Every base model read from disk or the hub by this process, in order (tests read it).
READS: list[str] = []


def _read(source: str, local_only: bool) -> _Base:
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a bar per rank and trial on the sweep's console says nothing
    kwargs: dict[str, Any] = {"dtype": torch.float32}
    if local_only:
        kwargs["local_files_only"] = True
    model = AutoModelForCausalLM.from_pretrained(source, **kwargs)
    READS.append(source)
    state = {k: v.detach().to("cpu") for k, v in model.state_dict().items()}
    saved = set(state)
    buffers = {k: v.detach().to("cpu") for k, v in model.named_buffers() if k not in saved}
    return _Base((source, "float32"), copy.deepcopy(model.config), state, buffers)


def base_weights(name: str) -> _Base:
    """The base model ``name``'s weights, read once per process (see the module docstring).
    Any process (every rank).

    Raises:
        HFModelError: a folder without ``config.json``, a hub id neither cached nor reachable.
        OSError / ValueError: as transformers raises them for a folder that holds no causal LM.
    """
    from ludwig_hpo.data import hf_loader

    resolved = hf_loader.resolve(name)
    hf_loader._downloadable(resolved)
    key = (resolved.source, "float32")
    for hit in _CACHE:
        if hit.key == key:
            return hit
    _CACHE.clear()  # free the previous base model before reading the next one
    weights = _read(resolved.source, resolved.local)
    _CACHE.append(weights)
    return weights


def clear_cache() -> None:
    """Forget the base model this process holds (tests; a pool freeing memory)."""
    _CACHE.clear()


def _set_buffer(model: nn.Module, path: str, value: torch.Tensor) -> None:
    owner, _, leaf = path.rpartition(".")
    module = model.get_submodule(owner) if owner else model
    module._buffers[leaf] = value.clone()


def fresh_base(name: str, *, share: bool) -> nn.Module:
    """A new causal LM module of ``name`` with the cached weights: sharing their storage when
    ``share`` (weights that stay frozen), else copies. Every rank.

    Raises:
        as :func:`base_weights`.
    """
    from transformers import AutoModelForCausalLM

    weights = base_weights(name)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(copy.deepcopy(weights.config), dtype=torch.float32)
    state = weights.state if share else {k: v.clone() for k, v in weights.state.items()}
    model.load_state_dict(state, assign=True, strict=True)
    for path, value in weights.buffers.items():
        _set_buffer(model, path, value)
    model.tie_weights()  # assign=True left tied weights as two parameters
    return model


def _quantized_base(cfg: Any) -> nn.Module:
    """The base model loaded in 4 or 8 bits by bitsandbytes on this rank's CUDA device.

    Raises:
        ConfigError: no CUDA device, or bitsandbytes is not installed.
    """
    if not torch.cuda.is_available():
        raise ConfigError(
            "quantization loads the base model with bitsandbytes, which needs a CUDA GPU, and there is none here",
            key="quantization",
            fix="remove quantization, or run on a machine with a GPU",
        )
    try:
        import bitsandbytes  # noqa: F401
    except ImportError:
        raise ConfigError(
            "quantization needs the bitsandbytes package, which is not installed",
            key="quantization",
            fix="pip install bitsandbytes, or remove quantization",
        ) from None
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    from ludwig_hpo.data import hf_loader

    kwargs = cfg.quantization.bnb_kwargs()
    kwargs["bnb_4bit_compute_dtype"] = getattr(torch, kwargs["bnb_4bit_compute_dtype"])
    resolved = hf_loader.resolve(cfg.base_model)
    device = torch.cuda.current_device()
    model = AutoModelForCausalLM.from_pretrained(
        resolved.source,
        quantization_config=BitsAndBytesConfig(**kwargs),
        device_map={"": device},
        **({"local_files_only": True} if resolved.local else {}),
    )
    from peft import prepare_model_for_kbit_training

    return prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)


def _linear_names(model: nn.Module) -> list[str]:
    """The last names of the Linear modules of ``model`` (what ``target_modules`` may name)."""
    return sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules() if isinstance(m, nn.Linear) and n})


def with_adapter(model: nn.Module, adapter: Any) -> nn.Module:
    """``model`` with ``adapter``'s peft modules injected (its base weights frozen); ``model``
    itself without an adapter. Every rank.

    Raises:
        ConfigError: ``target_modules`` not in the model (listing the Linear modules it has),
            an adapter peft does not offer.
    """
    if adapter is None:
        return model
    import peft

    cls = getattr(peft, adapter.peft_class_name, None)
    if cls is None:
        raise ConfigError(
            f"adapter type {adapter.type!r} needs peft's {adapter.peft_class_name}, which peft {peft.__version__} lacks",
            key="adapter.type",
            fix="use adapter type lora",
        )
    kwargs = dict(adapter.peft_kwargs())
    kwargs.setdefault("task_type", "CAUSAL_LM")
    try:
        with warnings.catch_warnings():
            # peft asks the model under transformers' old name: a warning per rank and trial
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
            return peft.get_peft_model(model, cls(**kwargs))
    except ValueError as e:
        if "target" not in str(e).lower():
            raise
        raise ConfigError(
            f"adapter.target_modules {adapter.target_modules!r} are not modules of the base model "
            f"({str(e).splitlines()[0]})",
            key="adapter.target_modules",
            fix=f"name some of its Linear modules: {', '.join(_linear_names(model))}",
        ) from None


#: ``adapter.init_lora_weights`` values whose initialization rewrites the base weights: such a
#: model gets its own copy of the cached weights (the same on every rank: computed from them).
_REWRITING_INITS = ("pissa", "olora", "orthogonal")


class LLMModel(nn.Module):
    """A causal LM with its adapter, built from an llm config and its prepared metadata.

    ``forward(inputs)`` takes ``{input name: (B, L) int64 ids}`` (prompt + target + EOS,
    right-padded: :mod:`ludwig_hpo.data.llm`) and returns ``{output name: (B, L', V) logits}``
    (position t predicts token t + 1), L' <= L the batch's longest row (plus one when the pad
    id is the EOS): trailing padding columns are not computed (right padding under a causal mask changes nothing before
    it); the loss and metrics cut the labels to L'. ``generate(prompt_ids, attention_mask)``:
    (B, P) left-padded prompts -> (B, P + new) ids with ``generation``'s settings.

    Attributes:
        model: the peft model (or the causal LM itself without an adapter).
        tokenizer: the base model's tokenizer.
        input_name, output_name: the features' names; pad_id, eos_id: the tokenizer's.
        output_metrics: ``{output name: LLMMetrics}`` (what :mod:`ludwig_hpo.train.evaluate` scores with).
        output_losses: ``{output name: LLMLoss}``.

    Runs on every rank.
    """

    def __init__(self, cfg: Any, meta: dict[str, FeatureMeta]) -> None:
        super().__init__()
        inp, out = cfg.input_features[0], cfg.output_features[0]
        self.input_name, self.output_name = inp.name, out.name
        self.input_names, self.output_names = [inp.name], [out.name]
        stats = meta[out.name].stats
        self.pad_id, self.eos_id = int(stats["pad_id"]), int(stats["eos_id"])
        self.base_model = cfg.base_model
        self.generation_kwargs: dict[str, Any] = dict(cfg.generation.hf_kwargs())
        adapter = getattr(cfg, "adapter", None)
        # these LoRA initializations rewrite the base weights to W - B A (olora in place): on the
        # cached storage they would change the base of every later trial in this process
        rewrites = getattr(adapter, "init_lora_weights", "default") in _REWRITING_INITS
        if getattr(cfg, "quantization", None) is not None:
            base = _quantized_base(cfg)
        else:
            base = fresh_base(cfg.base_model, share=adapter is not None and not rewrites)
        #: whether the frozen base weights are the process cache's storage (see :meth:`shared_names`)
        self.quantized = getattr(cfg, "quantization", None) is not None
        self.shares_base = adapter is not None and not self.quantized and not rewrites
        #: whether the base weights are frozen (an adapter trains), the same file's on every rank
        self.frozen_base = adapter is not None
        #: AdaLoRA reallocates its ranks after each optimizer step from the gradients, which
        #: FSDP shards (the ranks would mask different ranks)
        self.adalora = adapter is not None and adapter.peft_class_name == "AdaLoraConfig"
        if self.adalora and cfg.backend.strategy == "fsdp" and cfg.backend.num_workers > 1:
            raise ConfigError(
                "adapter type adalora allocates its ranks from each step's whole gradients, which FSDP shards",
                key="adapter.type",
                fix="use backend.strategy: ddp with adalora, or adapter type lora",
            )
        self.model = with_adapter(base, adapter)
        from ludwig_hpo.data import hf_loader

        self.tokenizer = hf_loader.load_tokenizer(cfg.base_model)
        loss = LLMLoss(out)
        self.output_losses = {out.name: loss}
        self.output_metrics = {out.name: LLMMetrics(out, loss)}

    def width(self, ids: torch.Tensor) -> int:
        """The columns of ``ids`` (B, L) a forward computes: up to the last one holding a
        non-padding id in any row, and one more when the pad id is the EOS (the final EOS reads
        as padding: the extra column keeps the logit that predicts it), at most L."""
        real = (ids != self.pad_id).any(0)
        if not bool(real.any()):
            return int(ids.shape[1])
        last = int(real.nonzero().max())
        return min(int(ids.shape[1]), last + (2 if self.pad_id == self.eos_id else 1))

    def forward(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        ids = inputs[self.input_name]
        ids = ids[:, : self.width(ids)]
        logits = self.model(input_ids=ids, use_cache=False).logits
        out = {self.output_name: logits}
        if self.adalora and self.training:  # the combined loss adds it, as peft adds it to its own
            out[AUX_LOSS] = self.orthogonal_penalty()
        return out

    def orthogonal_penalty(self) -> torch.Tensor:
        """AdaLoRA's regularization (peft's ``AdaLoraModel.forward``): ``orth_reg_weight`` x the
        mean over its ``lora_A`` / ``lora_B`` matrices of ``||P P^T - I||_F`` (``P^T P`` for B),
        0-dim, differentiable."""
        weight = float(cast(Any, self.model).peft_config["default"].orth_reg_weight)
        terms = []
        for name, p in self.model.named_parameters():
            if ("lora_A" in name or "lora_B" in name) and "default" in name and p.numel():
                cov = p @ p.T if "lora_A" in name else p.T @ p
                eye = torch.eye(cov.shape[0], device=cov.device, dtype=cov.dtype)
                terms.append(torch.linalg.matrix_norm(cov - eye))
        if not terms:
            return torch.zeros((), device=self.device_of())
        return weight * torch.stack(terms).mean()

    def device_of(self) -> torch.device:
        """The device of the model's first parameter."""
        return next(self.parameters()).device

    def after_optimizer_step(self, step: int) -> None:
        """What the adapter does after optimizer step ``step`` (1-based) while the step's
        gradients are still there: AdaLoRA's importance scores and rank budget
        (``update_and_allocate``); nothing for other adapters. Every rank, the same gradients
        (DDP has all-reduced them), so the same ranks are masked everywhere."""
        if self.adalora:
            cast(Any, self.model).base_model.update_and_allocate(step)

    @torch.no_grad()
    def generate(self, prompt_ids: torch.Tensor, attention_mask: torch.Tensor, **overrides: Any) -> torch.Tensor:
        """(B, P) left-padded prompt ids and their (B, P) mask -> (B, P + new) ids, generated
        with ``generation``'s settings (``overrides`` replace them). Every rank alone (no
        collective); the caller puts the model in eval mode."""
        kwargs = {**self.generation_kwargs, **overrides}
        kwargs.setdefault("pad_token_id", self.pad_id)
        kwargs.setdefault("eos_token_id", self.eos_id)
        generate = cast(Any, self.model).generate
        return generate(input_ids=prompt_ids, attention_mask=attention_mask, **kwargs)

    def trainable_names(self) -> list[str]:
        """The state-dict keys of the weights that train (the adapter's; every weight without one)."""
        return [n for n, p in self.named_parameters() if p.requires_grad]

    def shared_names(self) -> list[str]:
        """The frozen base weights under an adapter (none without one): read from the same
        files on every rank, never trained, and (unless quantized, or rewritten by a pissa / olora /
        orthogonal initialization) the process cache's storage, which nothing may write in place. DDP leaves them out of its broadcast."""
        if not self.frozen_base:
            return []
        return [n for n, p in self.named_parameters() if not p.requires_grad]

    def to(self, *args: Any, **kwargs: Any) -> LLMModel:
        """``nn.Module.to``, except for a quantized base, which bitsandbytes placed on this
        rank's device already (moving its packed weights again is not supported)."""
        if self.quantized:
            return self
        return super().to(*args, **kwargs)

    def trainable_state_dict(self) -> dict[str, torch.Tensor]:
        """The trained weights only (the adapter's), detached on the CPU, by state-dict key."""
        state = self.state_dict()
        return {k: state[k].detach().cpu() for k in self.trainable_names()}

    def load_trainable_state_dict(self, sd: dict[str, torch.Tensor]) -> None:
        """Load :meth:`trainable_state_dict` output into this model's trained weights.

        Raises:
            KeyError: ``sd`` misses a trained weight or names one this model does not train.
        """
        names = set(self.trainable_names())
        missing, unknown = sorted(names - set(sd)), sorted(set(sd) - names)
        if missing or unknown:
            raise KeyError(f"the adapter weights do not fit this model: missing {missing[:3]}, unknown {unknown[:3]}")
        self.load_state_dict(sd, strict=False)

    def merged(self) -> nn.Module:
        """A copy of the causal LM with the adapter merged into its weights (the cached base
        weights are left as they are); the causal LM itself (a copy) without an adapter."""
        clone: Any = copy.deepcopy(self.model)
        return clone.merge_and_unload() if hasattr(clone, "merge_and_unload") else clone


def build_llm(cfg: Any, meta: dict[str, FeatureMeta]) -> LLMModel:
    """The :class:`LLMModel` of one trial's llm config. Every rank (see the module docstring)."""
    return LLMModel(cfg, meta)
