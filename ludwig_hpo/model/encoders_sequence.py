"""Ludwig's sequence encoders (``ludwig/encoders/sequence_encoders.py``) for sequence inputs
((batch, length) int64 token ids) and timeseries inputs ((batch, length) float32 values, fed
as one channel, Ludwig's ``should_embed: false``).

Each returns (batch, ``output_size``); with ``reduce_output: null`` it returns (batch,
``length``, ``output_size``) and has ``sequence = True``. Runs on every rank.
"""

from __future__ import annotations

from typing import Any, cast

import torch
from torch import nn

from ludwig_hpo.config import encoders_sequence as cfgs
from ludwig_hpo.model.combiners.fc import FCStack, layer_specs
from ludwig_hpo.model.combiners.transformer import TransformerStack
from ludwig_hpo.model.encoder_parts import (
    Conv1DLayer,
    Embedding,
    RecurrentStack,
    fc_stack,
    reduce_sequence,
    reduced_width,
)


class _SequenceEncoder(nn.Module):
    """The embedding (or the values as one channel) and the reduction every encoder here shares."""

    ludwig_initialized = True  # initializes its own layers with the section's initializers

    def __init__(self, cfg: Any, vocab_size: int | None, length: int, initializer: Any) -> None:
        super().__init__()
        self.reduce = cfg.reduce_output
        self.sequence = cfg.reduce_output is None
        self.length = length
        embed = getattr(cfg, "should_embed", True) and vocab_size is not None
        self.embed: Embedding | None = None
        self.in_size = 1
        if embed:
            assert vocab_size is not None
            self.embed = Embedding(
                vocab_size,
                cfg.embedding_size,
                representation=cfg.representation,
                trainable=cfg.embeddings_trainable,
                initializer=initializer,
                dropout=cfg.dropout,
            )
            self.in_size = self.embed.size

    def embedded(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, length) -> (batch, length, in_size)."""
        return self.embed(x) if self.embed is not None else x.float().unsqueeze(-1)


class SequencePassthroughEncoder(_SequenceEncoder):
    """(batch, length) -> (batch, length, 1) floats, reduced by ``reduce_output`` (none by default)."""

    def __init__(self, cfg: cfgs.SequencePassthroughEncoder, length: int) -> None:
        super().__init__(cfg, None, length, None)
        self.output_size = reduced_width(self.reduce, length, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return reduce_sequence(x.float().unsqueeze(-1), self.reduce)


class SequenceEmbedEncoder(_SequenceEncoder):
    """Ludwig's ``embed``: (batch, length) ids -> embeddings (padding included, as Ludwig) ->
    ``reduce_output`` (sum by default): (batch, embedding size)."""

    def __init__(self, cfg: cfgs.SequenceEmbedEncoder, vocab_size: int, length: int) -> None:
        super().__init__(cfg, vocab_size, length, cfg.weights_initializer)
        self.output_size = reduced_width(self.reduce, length, self.in_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return reduce_sequence(self.embedded(x), self.reduce)


def _conv_specs(cfg: Any, layers: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Each convolution's settings (``layers``, else the section's ``conv_spec()``): the layer's
    own keys, else the section's."""
    cnnrnn = isinstance(cfg, cfgs.CNNRNNEncoder)
    base: dict[str, Any] = {
        "num_filters": cfg.num_filters,
        "filter_size": cfg.filter_size,
        "pool_function": cfg.pool_function,
        "pool_size": cfg.pool_size,
        "activation": cfg.conv_activation if cnnrnn else cfg.activation,
        "dropout": cfg.conv_dropout if cnnrnn else cfg.dropout,
        "norm": cfg.norm,
        "norm_params": cfg.norm_params,
        "use_bias": cfg.use_bias,
        "pool_padding": "valid",
    }
    if isinstance(cfg, cfgs.SequenceStackedCNNEncoder | cfgs.CNNRNNEncoder):
        base.update(
            strides=cfg.strides,
            padding=cfg.padding,
            dilation_rate=cfg.dilation_rate,
            pool_strides=cfg.pool_strides,
            pool_padding=cfg.pool_padding,
        )
    spec = cfg.conv_spec() if layers is None else layers
    return [{**base, **{k: v for k, v in layer.items() if v is not None or k == "pool_size"}} for layer in spec]


class ParallelCNNEncoder(_SequenceEncoder):
    """Ludwig's ``parallel_cnn``: the embedded sequence through each convolution side by side,
    their filters concatenated (batch, length, filters x convolutions), reduced (``sum``), then
    the fully connected stack (Ludwig's 512 and 256 units by default): (batch, 256)."""

    def __init__(self, cfg: cfgs.ParallelCNNEncoder, vocab_size: int | None, length: int) -> None:
        super().__init__(cfg, vocab_size, length, cfg.weights_initializer)
        convs = [Conv1DLayer(self.in_size, length, s) for s in _conv_specs(cfg)]
        self.convs = nn.ModuleList(convs)
        lengths = {c.length for c in convs}
        if len(lengths) != 1:
            raise ValueError("parallel convolutions must keep one length: give them the same pool_size")
        self.length = lengths.pop()
        width = sum(c.output_size for c in convs)
        self.fc = None if self.sequence else _fc_after(cfg, reduced_width(self.reduce, self.length, width))
        self.output_size = width if self.fc is None else int(self.fc.output_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = self.embedded(x)
        h = torch.cat([c(e) for c in self.convs], dim=-1)
        if self.fc is None:
            return h
        return self.fc(reduce_sequence(h, self.reduce))


def _fc_after(
    cfg: cfgs.ParallelCNNEncoder | cfgs.SequenceStackedCNNEncoder | cfgs.StackedParallelCNNEncoder, in_size: int
) -> FCStack:
    """The CNN encoders' fully connected stack after the reduction (:meth:`fc_spec`)."""
    defaults = {
        "output_size": cfg.output_size,
        "use_bias": cfg.use_bias,
        "weights_initializer": cfg.weights_initializer,
        "bias_initializer": cfg.bias_initializer,
        "norm": cfg.norm,
        "norm_params": cfg.norm_params,
        "activation": cfg.activation,
        "dropout": cfg.dropout,
    }
    return FCStack(in_size, layer_specs(cfg.fc_spec(), 0, defaults))


class StackedCNNEncoder(_SequenceEncoder):
    """Ludwig's ``stacked_cnn`` over a sequence: the embedded sequence through each convolution
    in turn (each pooling shortens it), reduced (``max``), then the fully connected stack
    (512 and 256 units by default): (batch, 256)."""

    def __init__(self, cfg: cfgs.SequenceStackedCNNEncoder, vocab_size: int | None, length: int) -> None:
        super().__init__(cfg, vocab_size, length, cfg.weights_initializer)
        layers, width, steps = [], self.in_size, length
        for spec in _conv_specs(cfg):
            layer = Conv1DLayer(width, steps, spec)
            layers.append(layer)
            width, steps = layer.output_size, layer.length
        self.convs = nn.Sequential(*layers)
        self.length = steps
        self.fc = None if self.sequence else _fc_after(cfg, reduced_width(self.reduce, steps, width))
        self.output_size = width if self.fc is None else int(self.fc.output_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.convs(self.embedded(x))
        if self.fc is None:
            return h
        return self.fc(reduce_sequence(h, self.reduce))


class RNNEncoder(_SequenceEncoder):
    """Ludwig's ``rnn``: the embedded sequence through the recurrent stack (batch, length,
    state_size x directions), reduced (``last``), then ``num_fc_layers`` (``fc_activation``,
    ``fc_dropout``): (batch, state_size) by default."""

    def __init__(self, cfg: cfgs.RNNEncoder, vocab_size: int | None, length: int) -> None:
        super().__init__(cfg, vocab_size, length, cfg.weights_initializer)
        self.rnn = RecurrentStack(
            self.in_size,
            cfg.state_size,
            cfg.cell_type,
            cfg.num_layers,
            cfg.bidirectional,
            cfg.use_bias,
            cfg.recurrent_dropout,
            str(cfg.activation),
        )
        width = self.rnn.output_size
        self.fc = (
            None
            if self.sequence
            else fc_stack(
                cfg,
                reduced_width(self.reduce, length, width),
                cfg.num_fc_layers,
                act=cfg.fc_activation,
                drop=cfg.fc_dropout,
            )
        )
        self.output_size = width if self.fc is None else int(self.fc.output_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.rnn(self.embedded(x))
        if self.fc is None:
            return h
        return self.fc(reduce_sequence(h, self.reduce))


class StackedParallelCNNEncoder(_SequenceEncoder):
    """Ludwig's ``stacked_parallel_cnn``: each stacked layer's parallel convolutions read the
    previous layer's concatenated filters; reduced (``sum``), then the fully connected stack
    (512 and 256 units by default): (batch, 256)."""

    def __init__(self, cfg: cfgs.StackedParallelCNNEncoder, vocab_size: int | None, length: int) -> None:
        super().__init__(cfg, vocab_size, length, cfg.weights_initializer)
        width, steps = self.in_size, length
        stack = []
        for layer in cfg.stacked_spec():
            convs = [Conv1DLayer(width, steps, s) for s in _conv_specs(cfg, layer)]
            lengths = {c.length for c in convs}
            if len(lengths) != 1:
                raise ValueError("parallel convolutions must keep one length: give them the same pool_size")
            stack.append(nn.ModuleList(convs))
            width, steps = sum(c.output_size for c in convs), lengths.pop()
        self.stack = nn.ModuleList(stack)
        self.length = steps
        self.fc = None if self.sequence else _fc_after(cfg, reduced_width(self.reduce, steps, width))
        self.output_size = width if self.fc is None else int(self.fc.output_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embedded(x)
        for parallel in self.stack:
            h = torch.cat([c(h) for c in cast(nn.ModuleList, parallel)], dim=-1)
        if self.fc is None:
            return h
        return self.fc(reduce_sequence(h, self.reduce))


class CNNRNNEncoder(_SequenceEncoder):
    """Ludwig's ``cnnrnn``: the embedded sequence through its convolutions, then the recurrent
    stack (``num_rec_layers`` of ``state_size``), reduced (``last``), then ``num_fc_layers``."""

    def __init__(self, cfg: cfgs.CNNRNNEncoder, vocab_size: int | None, length: int) -> None:
        super().__init__(cfg, vocab_size, length, cfg.weights_initializer)
        layers, width, steps = [], self.in_size, length
        for spec in _conv_specs(cfg):
            layer = Conv1DLayer(width, steps, spec)
            layers.append(layer)
            width, steps = layer.output_size, layer.length
        self.convs = nn.Sequential(*layers)
        self.rnn = RecurrentStack(
            width,
            cfg.state_size,
            cfg.cell_type,
            cfg.num_rec_layers,
            cfg.bidirectional,
            cfg.use_bias,
            cfg.recurrent_dropout,
            str(cfg.activation),
        )
        self.length = steps
        out = self.rnn.output_size
        self.fc = (
            None
            if self.sequence
            else fc_stack(
                cfg,
                reduced_width(self.reduce, steps, out),
                cfg.num_fc_layers,
                act=cfg.fc_activation,
                drop=cfg.fc_dropout,
            )
        )
        self.output_size = out if self.fc is None else int(self.fc.output_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.rnn(self.convs(self.embedded(x)))
        if self.fc is None:
            return h
        return self.fc(reduce_sequence(h, self.reduce))


class TransformerEncoder(_SequenceEncoder):
    """Ludwig's sequence ``transformer``: token embeddings plus learned position embeddings
    (Ludwig's ``TokenAndPositionEmbedding``; the values as one channel without embedding),
    projected to ``hidden_size`` when their width differs, Ludwig's ``TransformerStack``,
    reduced (``last``), then ``num_fc_layers`` (``fc_activation``, ``fc_dropout``, ``fc_residual``)."""

    def __init__(self, cfg: cfgs.SequenceTransformerEncoder, vocab_size: int | None, length: int) -> None:
        super().__init__(cfg, vocab_size, length, cfg.weights_initializer)
        # torch's default (normal) initialization, as Ludwig's plain nn.Embedding of positions
        self.positions = nn.Embedding(length, self.in_size) if self.embed is not None else None
        self.project = nn.Linear(self.in_size, cfg.hidden_size) if self.in_size != cfg.hidden_size else None
        self.transformer = TransformerStack(cfg)
        self.fc = (
            None
            if self.sequence
            else FCStack(
                reduced_width(self.reduce, length, cfg.hidden_size),
                layer_specs(
                    cfg.fc_layers,
                    cfg.num_fc_layers,
                    {
                        "output_size": cfg.output_size,
                        "use_bias": cfg.use_bias,
                        "weights_initializer": cfg.weights_initializer,
                        "bias_initializer": cfg.bias_initializer,
                        "norm": cfg.norm,
                        "norm_params": cfg.norm_params,
                        "activation": cfg.fc_activation,
                        "dropout": cfg.fc_dropout,
                    },
                ),
                residual=cfg.fc_residual,
            )
        )
        self.output_size = cfg.hidden_size if self.fc is None else int(self.fc.output_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embedded(x)
        if self.positions is not None:
            # through the module's call, not its weight: FSDP gathers a sharded unit only there
            h = h + self.positions(torch.arange(h.shape[1], device=h.device))
        if self.project is not None:
            h = self.project(h)
        h = self.transformer(h)
        if self.fc is None:
            return h
        return self.fc(reduce_sequence(h, self.reduce))


def build_sequence_encoder(cfg: Any, vocab_size: int | None, length: int) -> nn.Module:
    """The encoder of a sequence (``vocab_size``: its vocabulary) or timeseries (None: the values
    as one channel) input of ``length`` steps.

    Raises:
        ValueError: a config of another encoder (the schema prevents it).
    """
    if isinstance(cfg, cfgs.SequencePassthroughEncoder):
        return SequencePassthroughEncoder(cfg, length)
    if isinstance(cfg, cfgs.SequenceEmbedEncoder):
        assert vocab_size is not None
        return SequenceEmbedEncoder(cfg, vocab_size, length)
    if isinstance(cfg, cfgs.ParallelCNNEncoder):
        return ParallelCNNEncoder(cfg, vocab_size, length)
    if isinstance(cfg, cfgs.SequenceStackedCNNEncoder):
        return StackedCNNEncoder(cfg, vocab_size, length)
    if isinstance(cfg, cfgs.RNNEncoder):
        return RNNEncoder(cfg, vocab_size, length)
    if isinstance(cfg, cfgs.StackedParallelCNNEncoder):
        return StackedParallelCNNEncoder(cfg, vocab_size, length)
    if isinstance(cfg, cfgs.CNNRNNEncoder):
        return CNNRNNEncoder(cfg, vocab_size, length)
    if isinstance(cfg, cfgs.SequenceTransformerEncoder):
        return TransformerEncoder(cfg, vocab_size, length)
    raise ValueError(f"no sequence encoder for {type(cfg).__name__}")
