"""Ludwig's set, bag, date and h3 encoders (``ludwig/encoders/{set,bag,date,h3}_encoders.py``).
Each maps its prepared batch to (batch, ``output_size``) floats. Runs on every rank."""

from __future__ import annotations

import math

import torch
from torch import nn

from ludwig_hpo.config import encoders_structured as cfgs
from ludwig_hpo.data.components import MAX_H3_RESOLUTION
from ludwig_hpo.model.encoder_parts import Embedding, RecurrentStack, fc_stack, reduce_sequence, reduced_width
from ludwig_hpo.model.init import init_linear, initialize


class SetEmbedEncoder(nn.Module):
    """Ludwig's ``embed`` of a set (multi-hot) or bag (counts): (batch, vocabulary) floats ->
    their weighted sum of token embeddings (``EmbedWeighted``) -> dropout -> ``num_fc_layers``."""

    ludwig_initialized = True

    def __init__(self, cfg: cfgs.SetEmbedEncoder, vocab_size: int) -> None:
        super().__init__()
        self.embed = Embedding(
            vocab_size,
            cfg.embedding_size,
            representation=cfg.representation,
            trainable=cfg.embeddings_trainable,
            force=cfg.force_embedding_size,
            initializer=cfg.weights_initializer,
        )
        self.drop = nn.Dropout(cfg.dropout) if cfg.dropout > 0 else nn.Identity()
        self.fc = fc_stack(cfg, self.embed.size, cfg.num_fc_layers)
        self.output_size = int(self.fc.output_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.drop(x.float() @ self.embed.weight))


class _YearFC(nn.Module):
    """Ludwig's year layer of a date: one linear unit over the year, no activation."""

    def __init__(self, cfg: cfgs.DateEmbedEncoder | cfgs.DateWaveEncoder) -> None:
        super().__init__()
        self.linear = nn.Linear(1, 1, bias=cfg.use_bias)
        init_linear(self.linear, cfg.weights_initializer, cfg.bias_initializer)
        self.drop = nn.Dropout(cfg.dropout) if cfg.dropout > 0 else nn.Identity()

    def forward(self, year: torch.Tensor) -> torch.Tensor:
        return self.drop(self.linear(year.float()))


def _periodic(x: torch.Tensor, period: float) -> torch.Tensor:
    return torch.sin(x.float() * (2 * math.pi / period))


#: Vocabulary size of each embedded date component and the offset that makes it 0-based
#: (month, day and day of the year count from 1).
_DATE_EMBEDS = ((1, 12, 1), (2, 31, 1), (3, 7, 0), (4, 366, 1), (5, 24, 0), (6, 60, 0), (7, 60, 0))
#: The period of each date component the ``wave`` encoder reads (month to second of the day).
_DATE_PERIODS = (12, 31, 7, 366, 24, 60, 60, 86400)


class DateEmbedEncoder(nn.Module):
    """Ludwig's ``DateEmbed``: (batch, 9) ints -> [year linear (1), 7 embeddings of
    ``embedding_size``, sin of the second of the day (1)] -> ``num_fc_layers``."""

    ludwig_initialized = True

    def __init__(self, cfg: cfgs.DateEmbedEncoder) -> None:
        super().__init__()
        self.year = _YearFC(cfg)
        self.embeds = nn.ModuleList(
            Embedding(n, cfg.embedding_size, force=True, initializer=cfg.weights_initializer, dropout=cfg.dropout)
            for _, n, _ in _DATE_EMBEDS
        )
        self.fc = fc_stack(cfg, 1 + len(_DATE_EMBEDS) * cfg.embedding_size + 1, cfg.num_fc_layers)
        self.output_size = int(self.fc.output_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        parts = [self.year(x[:, 0:1])]
        for (col, n, offset), emb in zip(_DATE_EMBEDS, self.embeds, strict=True):
            parts.append(emb((x[:, col] - offset).clamp(0, n - 1)))
        parts.append(_periodic(x[:, 8:9], 86400))
        return self.fc(torch.cat(parts, dim=-1))


class DateWaveEncoder(nn.Module):
    """Ludwig's ``DateWave``: (batch, 9) ints -> [year linear (1), sin(2 pi c / period) of the
    other 8 components] -> ``num_fc_layers``."""

    ludwig_initialized = True

    def __init__(self, cfg: cfgs.DateWaveEncoder) -> None:
        super().__init__()
        self.year = _YearFC(cfg)
        self.fc = fc_stack(cfg, 1 + len(_DATE_PERIODS), cfg.num_fc_layers)
        self.output_size = int(self.fc.output_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        parts = [self.year(x[:, 0:1])] + [_periodic(x[:, i + 1 : i + 2], p) for i, p in enumerate(_DATE_PERIODS)]
        return self.fc(torch.cat(parts, dim=-1))


class _H3Components(nn.Module):
    """Ludwig's h3 component embeddings: (batch, 19) ints -> (batch, 19, embedding_size), the
    child digits past each cell's resolution zeroed."""

    def __init__(self, embedding_size: int, initializer: object, dropout: float) -> None:
        super().__init__()

        def table(n: int) -> Embedding:
            return Embedding(n, embedding_size, force=True, initializer=initializer, dropout=dropout)

        self.mode, self.edge, self.resolution, self.base_cell, self.cells = (
            table(3),
            table(7),
            table(16),
            table(122),
            table(8),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.long()
        head = [emb(x[:, i : i + 1]) for i, emb in enumerate((self.mode, self.edge, self.resolution, self.base_cell))]
        cells = self.cells(x[:, 4:])
        steps = torch.arange(MAX_H3_RESOLUTION, device=x.device)
        mask = (steps.unsqueeze(0) < x[:, 2:3]).unsqueeze(-1).to(cells.dtype)
        return torch.cat([*head, cells * mask], dim=1)


class H3EmbedEncoder(nn.Module):
    """Ludwig's ``H3Embed``: the component embeddings reduced (``sum``) -> ``num_fc_layers``."""

    ludwig_initialized = True

    def __init__(self, cfg: cfgs.H3EmbedEncoder) -> None:
        super().__init__()
        self.components = _H3Components(cfg.embedding_size, cfg.weights_initializer, cfg.dropout)
        self.reduce = cfg.reduce_output
        self.fc = fc_stack(cfg, reduced_width(self.reduce, 19, cfg.embedding_size), cfg.num_fc_layers)
        self.output_size = int(self.fc.output_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(reduce_sequence(self.components(x), self.reduce))


class H3WeightedSumEncoder(nn.Module):
    """Ludwig's ``H3WeightedSum``: the component embeddings summed with one weight each
    (softmaxed over the 19 when ``should_softmax``) -> ``num_fc_layers``. As in Ludwig, the
    weights are drawn once by ``weights_initializer`` and kept fixed (a buffer)."""

    ludwig_initialized = True

    def __init__(self, cfg: cfgs.H3WeightedSumEncoder) -> None:
        super().__init__()
        self.components = _H3Components(cfg.embedding_size, cfg.weights_initializer, cfg.dropout)
        weights = torch.empty(19, 1)
        initialize(weights, cfg.weights_initializer)
        self.weights: torch.Tensor
        self.register_buffer("weights", weights)
        self.should_softmax = cfg.should_softmax
        self.fc = fc_stack(cfg, cfg.embedding_size, cfg.num_fc_layers)
        self.output_size = int(self.fc.output_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = torch.softmax(self.weights, dim=0) if self.should_softmax else self.weights
        return self.fc((self.components(x) * w).sum(dim=1))


class H3RNNEncoder(nn.Module):
    """Ludwig's ``H3RNN``: the 19 component embeddings as a sequence through the recurrent
    stack of ``hidden_size``, reduced (``last``)."""

    ludwig_initialized = True

    def __init__(self, cfg: cfgs.H3RNNEncoder) -> None:
        super().__init__()
        self.components = _H3Components(cfg.embedding_size, cfg.weights_initializer, cfg.dropout)
        self.rnn = RecurrentStack(
            cfg.embedding_size,
            cfg.hidden_size,
            cfg.cell_type,
            cfg.num_layers,
            cfg.bidirectional,
            cfg.use_bias,
            cfg.recurrent_dropout,
            cfg.activation,
        )
        self.reduce = cfg.reduce_output
        self.output_size = reduced_width(self.reduce, 19, self.rnn.output_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return reduce_sequence(self.rnn(self.components(x)), self.reduce)
