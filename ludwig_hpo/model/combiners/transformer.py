"""Ludwig's attention combiners: ``transformer``, ``tabtransformer`` and ``ft_transformer``, over
Ludwig's ``TransformerStack`` (``ludwig/modules/attention_modules.py``): post-norm blocks of
multi-head self-attention and a ReLU feed-forward layer, layer norms with eps 1e-6. The linear
layers of the blocks and the per-input projectors keep torch's initialization, as in Ludwig.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from ludwig_hpo.model.combiners.base import EncodedInput, SequenceReducer, flatten, refuse_sequences
from ludwig_hpo.model.combiners.fc import fc_stack
from ludwig_hpo.model.init import init_embedding


class MultiHeadSelfAttention(nn.Module):
    """(batch, tokens, in_size) -> (batch, tokens, hidden_size): scaled dot-product attention
    of ``num_heads`` heads, the heads joined by a Linear."""

    def __init__(self, in_size: int, hidden_size: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.hidden_size = hidden_size
        self.query_dense = nn.Linear(in_size, hidden_size)
        self.key_dense = nn.Linear(in_size, hidden_size)
        self.value_dense = nn.Linear(in_size, hidden_size)
        self.combine_heads = nn.Linear(hidden_size, hidden_size)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        b = x.shape[0]
        return x.reshape(b, -1, self.num_heads, self.hidden_size // self.num_heads).permute(0, 2, 1, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self._heads(self.query_dense(x)), self._heads(self.key_dense(x)), self._heads(self.value_dense(x))
        weights = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(k.shape[-1]), dim=-1)
        out = (weights @ v).permute(0, 2, 1, 3).reshape(x.shape[0], -1, self.hidden_size)
        return self.combine_heads(out)


class TransformerBlock(nn.Module):
    """LayerNorm(x + Dropout(attention(x))), then LayerNorm(h + Dropout(Linear(ReLU(Linear(h)))))
    with a feed-forward width of ``output_size``: (batch, tokens, hidden_size) in and out."""

    def __init__(self, hidden_size: int, num_heads: int, output_size: int, dropout: float) -> None:
        super().__init__()
        self.self_attention = MultiHeadSelfAttention(hidden_size, hidden_size, num_heads)
        self.dropout1 = nn.Dropout(dropout)
        self.layernorm1 = nn.LayerNorm(hidden_size, eps=1e-6)
        self.fully_connected = nn.Sequential(
            nn.Linear(hidden_size, output_size), nn.ReLU(), nn.Linear(output_size, hidden_size)
        )
        self.dropout2 = nn.Dropout(dropout)
        self.layernorm2 = nn.LayerNorm(hidden_size, eps=1e-6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.layernorm1(x + self.dropout1(self.self_attention(x)))
        return self.layernorm2(h + self.dropout2(self.fully_connected(h)))


class TransformerStack(nn.Module):
    """``num_layers`` :class:`TransformerBlock` in a row."""

    def __init__(self, cfg: Any) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            TransformerBlock(cfg.hidden_size, cfg.num_heads, cfg.transformer_output_size, cfg.dropout)
            for _ in range(cfg.num_layers)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def _fc(cfg: Any, width: int) -> nn.Module:
    return fc_stack(cfg, width, activation_key="fc_activation", dropout_key="fc_dropout", residual=cfg.fc_residual)


def _tokens(projectors: nn.ModuleList, parts: list[torch.Tensor]) -> torch.Tensor:
    """(batch, len(parts), width): each flattened encoding through its projector."""
    return torch.stack([p(flatten(x)) for p, x in zip(projectors, parts, strict=True)], dim=1)


class TransformerCombiner(nn.Module):
    """Each encoding (flattened) projected to ``hidden_size`` is one token; the tokens pass the
    transformer stack; then ``reduce_output`` and the fully connected stack: (batch,
    ``output_size``). ``reduce_output: null`` returns the tokens, (batch, inputs, hidden_size)."""

    ludwig_initialized = True

    def __init__(self, cfg: Any, inputs: list[EncodedInput]) -> None:
        super().__init__()
        self.names = [i.name for i in inputs]
        self.projectors = nn.ModuleList(nn.Linear(i.flat_size, cfg.hidden_size) for i in inputs)
        self.transformer_stack = TransformerStack(cfg)
        self.reduce = SequenceReducer(cfg.reduce_output, len(inputs), cfg.hidden_size)
        self.sequence = self.reduce.keeps_sequence
        self.fc = None if self.sequence else _fc(cfg, self.reduce.output_size)
        self.output_size = cfg.hidden_size if self.fc is None else self.fc.output_size

    def forward(self, encodings: dict[str, torch.Tensor]) -> torch.Tensor:
        h = self.transformer_stack(_tokens(self.projectors, [encodings[n] for n in self.names]))
        return h if self.fc is None else self.fc(self.reduce(h))


class TabTransformerCombiner(nn.Module):
    """Inputs other than number and binary are tokens (projected to ``hidden_size``, or to
    ``hidden_size - embed_input_feature_name`` with a name embedding of that size concatenated;
    ``add`` adds a ``hidden_size`` name embedding) through the transformer stack and
    ``reduce_output``; number and binary encodings are concatenated and layer-normed; both
    together enter the fully connected stack: (batch, ``output_size``)."""

    ludwig_initialized = True
    sequence = False

    def __init__(self, cfg: Any, inputs: list[EncodedInput]) -> None:
        super().__init__()
        self.embeddable = [i.name for i in inputs if i.type not in ("number", "binary")]
        self.skipped = [i.name for i in inputs if i.type in ("number", "binary")]
        refuse_sequences("tabtransformer", [i for i in inputs if i.name in self.skipped])
        e = cfg.embed_input_feature_name
        self.add_names = e == "add"
        projector_size = cfg.hidden_size - e if isinstance(e, int) else cfg.hidden_size
        self.name_embedding: nn.Embedding | None = None
        if e is not None:
            # Ludwig's vocabulary of names holds every input feature; the tokens use the first rows.
            self.name_embedding = nn.Embedding(len(inputs), cfg.hidden_size if self.add_names else e)
            init_embedding(self.name_embedding)
        by_name = {i.name: i for i in inputs}
        self.projectors = nn.ModuleList(nn.Linear(by_name[n].flat_size, projector_size) for n in self.embeddable)
        skipped_width = sum(by_name[n].width for n in self.skipped)
        self.layer_norm = nn.LayerNorm(skipped_width) if skipped_width else None
        self.transformer_stack = TransformerStack(cfg)
        self.reduce = SequenceReducer(cfg.reduce_output, len(self.embeddable), cfg.hidden_size)
        token_width = self.reduce.output_size if self.embeddable else 0
        self.fc = _fc(cfg, token_width + skipped_width)
        self.output_size = self.fc.output_size

    def forward(self, encodings: dict[str, torch.Tensor]) -> torch.Tensor:
        parts: list[torch.Tensor] = []
        if self.embeddable:
            h = _tokens(self.projectors, [encodings[n] for n in self.embeddable])
            if self.name_embedding is not None:
                # through the module's call, not its weight: FSDP gathers a sharded unit only there
                ids = torch.arange(len(self.embeddable), device=h.device)
                names = self.name_embedding(ids).unsqueeze(0).expand(h.shape[0], -1, -1)
                h = h + names if self.add_names else torch.cat([h, names], dim=-1)
            parts.append(self.reduce(self.transformer_stack(h)))
        if self.layer_norm is not None:
            skipped = [flatten(encodings[n]) for n in self.skipped]
            parts.append(self.layer_norm(skipped[0] if len(skipped) == 1 else torch.cat(skipped, dim=-1)))
        return self.fc(parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1))


class FTTransformerCombiner(nn.Module):
    """Each encoding (flattened) projected to a ``hidden_size`` token, a learned [CLS] token put
    first, the transformer stack, and the [CLS] token's output through the fully connected
    stack: (batch, ``output_size``). The [CLS] token starts uniform in +-1/sqrt(hidden_size), as
    in Gorishniy et al."""

    ludwig_initialized = True
    sequence = False

    def __init__(self, cfg: Any, inputs: list[EncodedInput]) -> None:
        super().__init__()
        self.names = [i.name for i in inputs]
        self.projectors = nn.ModuleList(nn.Linear(i.flat_size, cfg.hidden_size) for i in inputs)
        bound = 1 / math.sqrt(cfg.hidden_size)
        self.cls_token = nn.Parameter(torch.empty(1, 1, cfg.hidden_size).uniform_(-bound, bound))
        self.transformer_stack = TransformerStack(cfg)
        self.fc = _fc(cfg, cfg.hidden_size)
        self.output_size = self.fc.output_size

    def forward(self, encodings: dict[str, torch.Tensor]) -> torch.Tensor:
        tokens = _tokens(self.projectors, [encodings[n] for n in self.names])
        h = torch.cat([self.cls_token.expand(tokens.shape[0], -1, -1), tokens], dim=1)
        return self.fc(self.transformer_stack(h)[:, 0])
