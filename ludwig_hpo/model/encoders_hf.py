"""Pretrained Hugging Face text encoders (Ludwig's ``HFTextEncoder`` family,
``ludwig/encoders/text_encoders.py``): a transformers ``AutoModel`` over a text feature's ids.

Input: (batch, L) int64 ids of the model's own tokenizer, padded with its padding id (the
attention mask is every other position). Output: ``reduce_output`` of the last hidden states,
(batch, hidden); ``concat`` (batch, L' * hidden); null (batch, L', hidden) with ``sequence``
True. L' is L less the first and the last position for Ludwig's aliases (their ``[CLS]`` and
``[SEP]``, as Ludwig's ``[:, 1:-1]``) and L for ``auto_transformer``. ``cls_pooled`` is the
model's pooler output. ``sum``, ``mean``, ``max`` and ``last`` read only real tokens (neither
padding nor the aliases' first and last token): Ludwig reduces every position, padding
included; masking makes a row's encoding independent of the batch's padded length.

``trainable: false`` (Ludwig's default) freezes the transformer and keeps it in eval mode
(no dropout), as Ludwig's ``FreezeModule``. Runs on every rank.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ludwig_hpo.config import encoders_hf as cfgs
from ludwig_hpo.data import hf_loader
from ludwig_hpo.model.hf_checks import pretrained_mismatches


class Frozen(nn.Module):
    """Ludwig's ``FreezeModule``: ``module`` with ``requires_grad`` off and kept in eval mode
    (``train()`` leaves it there) when ``frozen``; unchanged otherwise."""

    def __init__(self, module: nn.Module, frozen: bool) -> None:
        super().__init__()
        self.module = module
        self.frozen = frozen
        if frozen:
            module.requires_grad_(False)
            module.eval()

    def train(self, mode: bool = True) -> Frozen:
        self.training = mode
        self.module.train(mode and not self.frozen)
        return self


def _model_kwargs(cfg: cfgs.HFTextEncoder) -> dict[str, Any]:
    return {"add_pooling_layer": cfg.add_pooling_layer} if isinstance(cfg, cfgs.XLMRoBERTaEncoder) else {}


def build_transformer(cfg: cfgs.HFTextEncoder, vocab_size: int) -> Any:
    """The transformers model of ``cfg`` for a tokenizer of ``vocab_size`` ids: pretrained
    (its config, with the float architecture keys written in the file set on it), or new
    (``use_pretrained: false``: the alias's architecture keys, Ludwig's defaults, and
    ``vocab_size``; ``auto_transformer``: the folder's config). ``auto_transformer`` resizes
    the token embeddings to the tokenizer's ids when they differ (Ludwig's rule). Runs on every rank.

    Raises:
        ValueError: ``vocab_size`` set and not the tokenizer's; a non-float architecture key that
            differs from the pretrained model's (:func:`pretrained_mismatches`); as
            :func:`~ludwig_hpo.data.hf_loader.load_model` raises.
    """
    name = cfg.pretrained_model_name_or_path
    if "vocab_size" in cfg.model_fields_set and cfg.vocab_size != vocab_size:
        raise ValueError(
            f"encoder vocab_size {cfg.vocab_size} is not the tokenizer's {vocab_size} ids of {name!r}: remove vocab_size"
        )
    kwargs = _model_kwargs(cfg)
    if not cfg.use_pretrained and cfg.model_type is not None:
        config = hf_loader.new_config(cfg.model_type, **cfg.architecture(), vocab_size=vocab_size)
        return hf_loader.load_model(name, use_pretrained=False, config=config, model_kwargs=kwargs)
    overrides = cfg.architecture_overrides()
    if cfg.use_pretrained:
        config = hf_loader.load_config(name)
        bad = pretrained_mismatches(cfg, config.to_dict())
        if bad:
            raise ValueError(bad[0])
        overrides = {k: v for k, v in overrides.items() if isinstance(v, float)}
    model = hf_loader.load_model(
        name,
        use_pretrained=cfg.use_pretrained,
        overrides=overrides,
        pretrained_kwargs=cfg.pretrained_kwargs,
        model_kwargs=kwargs,
    )
    if isinstance(cfg, cfgs.AutoTransformerEncoder) and model.get_input_embeddings().num_embeddings != vocab_size:
        model.resize_token_embeddings(vocab_size)  # Ludwig's rule for auto_transformer: the tokenizer's size
    return model


class HFTextEncoderModule(nn.Module):
    """(batch, L) int64 ids -> the reduced hidden states of a transformers model (module
    docstring). ``output_size`` is the width it returns; ``sequence`` is True for
    ``reduce_output: null`` (then (batch, L', hidden)).

    Args:
        cfg: the encoder section; vocab_size: the tokenizer's ids; pad_id: the id rows are
            padded with; length: L, the padded length of the feature.
        gradient_checkpointing: recompute activations in the backward pass (transformers'
            ``activation_checkpointing_enable``), on when the section asks for it too; only a
            trainable transformer has activations to recompute.
    """

    ludwig_initialized = True  # the transformer's weights are its own, never re-initialised

    def __init__(
        self,
        cfg: cfgs.HFTextEncoder,
        vocab_size: int,
        pad_id: int,
        length: int,
        gradient_checkpointing: bool = False,
    ) -> None:
        super().__init__()
        transformer: Any = build_transformer(cfg, vocab_size)
        self.reduce = cfg.reduce_output
        self.sequence = cfg.reduce_output is None
        self.strip = cfg.strip_special
        self.pad_id = int(pad_id)
        self.cap = cfg.max_sequence_length
        if self.reduce == "cls_pooled" and getattr(transformer, "pooler", None) is None:
            raise ValueError(
                f"reduce_output cls_pooled needs a pooler and {cfg.pretrained_model_name_or_path!r} has none: "
                "use reduce_output sum, mean, max or last"
            )
        if self.reduce != "cls_pooled" and getattr(transformer, "pooler", None) is not None:
            # an unused pooler's parameters get no gradient, which DDP refuses in a trainable encoder
            transformer.pooler = None
        hidden = int(transformer.config.hidden_size)
        steps = min(length, self.cap or length) - (2 if self.strip else 0)
        if steps < 1 and self.reduce != "cls_pooled":
            raise ValueError(f"rows of {length} tokens leave none once the first and last are dropped")
        self.output_size = hidden * steps if self.reduce == "concat" else hidden
        self.steps = steps
        self._forward_keys = _forward_keys(transformer)
        self.transformer = Frozen(transformer, frozen=not cfg.trainable)
        if cfg.trainable and (gradient_checkpointing or getattr(cfg, "gradient_checkpointing", False)):
            self.enable_gradient_checkpointing()

    def enable_gradient_checkpointing(self) -> bool:
        """Turn on transformers' activation (gradient) checkpointing (non-reentrant); False when the transformer
        is frozen or its class does not support it. Call before the optimizer is built."""
        model: Any = self.transformer.module
        if self.transformer.frozen or not getattr(model, "supports_gradient_checkpointing", False):
            return False
        kwargs = {"use_reentrant": False}  # a frozen embedding feeds inputs that require no grad
        if hasattr(model, "activation_checkpointing_enable"):  # transformers 5's name
            model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
        return True

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if self.cap is not None and ids.shape[1] > self.cap:
            ids = ids[:, : self.cap]
        ids = ids.long()
        mask = (ids != self.pad_id).long()
        kwargs: dict[str, Any] = {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}
        kwargs["use_cache"] = False  # an encoder keeps no key/value cache between batches
        out = self.transformer.module(**{k: v for k, v in kwargs.items() if k in self._forward_keys})
        if self.reduce == "cls_pooled":
            return out["pooler_output"]
        hidden = out["last_hidden_state"]
        keep = mask.bool()
        if self.strip and self.reduce in (None, "concat"):
            hidden, keep = hidden[:, 1:-1], keep[:, 1:-1]  # Ludwig's positions
        elif self.strip:  # the first and last real token, wherever padding (right or left) puts them
            keep = _drop_first_and_last_real(keep)
        return reduce_masked(hidden, keep, self.reduce)


def _forward_keys(model: nn.Module) -> set[str]:
    import inspect

    return set(inspect.signature(model.forward).parameters)


def _drop_first_and_last_real(keep: torch.Tensor) -> torch.Tensor:
    """(batch, L) bool ``keep`` without each row's first and last kept position (an alias's
    ``[CLS]`` and ``[SEP]``), wherever padding puts them. Pure."""
    idx = torch.arange(keep.shape[1], device=keep.device).expand_as(keep)
    last = torch.where(keep, idx, torch.full_like(idx, -1)).amax(dim=1, keepdim=True)
    first = torch.where(keep, idx, torch.full_like(idx, keep.shape[1])).amin(dim=1, keepdim=True)
    return keep & (idx != last) & (idx != first)


def reduce_masked(hidden: torch.Tensor, keep: torch.Tensor, mode: str | None) -> torch.Tensor:
    """(batch, L, H) hidden states and (batch, L) bool ``keep`` -> ``sum`` / ``mean`` / ``max`` /
    ``last`` over the kept positions (batch, H) (a row with none kept gives zeros), ``concat``
    (batch, L * H) and None (batch, L, H) of every position. Pure."""
    if mode is None:
        return hidden
    if mode == "concat":
        return hidden.reshape(hidden.shape[0], -1)
    w = keep.unsqueeze(-1).to(hidden.dtype)
    if mode == "sum":
        return (hidden * w).sum(dim=1)
    if mode in ("mean", "avg"):
        return (hidden * w).sum(dim=1) / w.sum(dim=1).clamp(min=1)
    if mode == "max":
        filled = hidden.masked_fill(~keep.unsqueeze(-1), float("-inf")).amax(dim=1)
        return torch.where(keep.any(dim=1, keepdim=True), filled, torch.zeros_like(filled))
    if mode == "last":
        idx = torch.arange(keep.shape[1], device=keep.device).expand_as(keep)
        last = torch.where(keep, idx, torch.zeros_like(idx)).amax(dim=1)
        picked = hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
        return picked * keep.any(dim=1, keepdim=True).to(hidden.dtype)
    raise ValueError(f"no reduction {mode!r}")
