"""Transformer models at scale, without a process group: FSDP's units (each transformer block
whole), gradient checkpointing (the same gradients, fewer saved activations), batch-size
probes at the longest padded length, and the batch-size cache key's sequence length."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data import prepare
from ludwig_hpo.errors import ConfigError
from ludwig_hpo.model import build_model
from ludwig_hpo.model.combiners.transformer import TransformerBlock
from ludwig_hpo.model.losses import OutputLosses
from ludwig_hpo.train.autobatch import tune_batch_sizes
from ludwig_hpo.train.batch_size import MemoryCache
from ludwig_hpo.train.data import DeviceData
from ludwig_hpo.train.lengths import longest_rows, padding_id
from ludwig_hpo.train.probe import probe_rows
from ludwig_hpo.train.recompute import enable_gradient_checkpointing
from ludwig_hpo.train.step import combined_loss
from ludwig_hpo.train.strategy import fsdp_units, transformer_blocks

from ..token_data import token_config, token_frame


def _frame(**kw) -> pd.DataFrame:
    return token_frame(**kw)


def _cfg(trainer: dict | None = None, encoder: dict | None = None, combiner: dict | None = None) -> SweepConfig:
    return token_config(trainer, encoder, combiner)


def _tiny_bert():
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    return BertModel(
        BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=3, num_attention_heads=2, intermediate_size=32)
    )


# ------------------------------------------------------------------ FSDP units
def _check_units_cover_every_parameter_once(model: torch.nn.Module, units: list[torch.nn.Module]) -> None:
    owners = {}
    for u in units:
        for p in u.parameters():
            assert id(p) not in owners, "a parameter in two units"
            owners[id(p)] = u
    assert set(owners) == {id(p) for p in model.parameters()}
    # children before the modules that hold them (fully_shard's order)
    for i, u in enumerate(units):
        for later in units[i + 1 :]:
            assert u not in list(later.modules()) or u is later


def test_fsdp_shards_each_of_our_transformer_blocks_as_one_unit():
    data = prepare(_frame(), _cfg())
    model = build_model(_cfg(), data.meta)
    units = fsdp_units(model)
    blocks = [m for m in model.modules() if isinstance(m, TransformerBlock)]
    assert len(blocks) == 2 and all(b in units for b in blocks)
    inside = {id(s) for b in blocks for s in b.modules() if s is not b}
    assert not any(id(u) in inside for u in units)  # nothing of a block is its own unit
    assert any(isinstance(u, torch.nn.Embedding) for u in units)  # outside a block: today's leaf rule
    _check_units_cover_every_parameter_once(model, units)


def test_fsdp_shards_each_layer_a_hugging_face_model_keeps_whole():
    bert = _tiny_bert()
    units = fsdp_units(bert)
    names = [type(u).__name__ for u in units]
    assert names.count("BertLayer") == 3 and names.count("BertEmbeddings") == 1  # its _no_split_modules
    assert [type(b).__name__ for b in transformer_blocks(bert)] == ["BertEmbeddings"] + ["BertLayer"] * 3
    _check_units_cover_every_parameter_once(bert, units)


def test_a_model_without_blocks_keeps_the_leaf_rule():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    assert fsdp_units(model) == [model[2], model[0]]


# ------------------------------------------------------------------ gradient checkpointing
def _saved_tensors(run) -> int:
    count = 0

    def pack(t):
        nonlocal count
        count += 1
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = run()
    return count, out


def test_gradient_checkpointing_gives_the_same_gradients_from_fewer_saved_activations():
    cfg = _cfg({"enable_gradient_checkpointing": True})
    data = prepare(_frame(), cfg)
    dd = DeviceData(data, torch.device("cpu"))
    x, y = dd.batch(torch.arange(16))
    losses = OutputLosses(cfg.output_features, data.meta)
    grads, saved = [], []
    for recompute in (False, True):
        torch.manual_seed(1)
        model = build_model(cfg, data.meta)
        model.train()  # dropout on: recomputation must replay the same masks
        if recompute:
            assert enable_gradient_checkpointing(model) == 2
        torch.manual_seed(2)
        n, loss = _saved_tensors(lambda m=model: combined_loss(cfg, m(x), y, losses))
        loss.backward()
        saved.append(n)
        grads.append({k: p.grad.clone() for k, p in model.named_parameters()})
    assert saved[1] < saved[0]
    for k in grads[0]:
        torch.testing.assert_close(grads[1][k], grads[0][k], msg=k)
    with torch.no_grad():  # evaluation runs through the hooks without recomputing anything
        model.eval()
        assert model(x)["label"].shape == (16, 2)


def test_gradient_checkpointing_of_a_hugging_face_encoder_uses_its_own_switch():
    ids = torch.randint(5, 50, (4, 12))
    grads = []
    for recompute in (False, True):
        bert = _tiny_bert()
        bert.train()
        if recompute:
            assert enable_gradient_checkpointing(bert) == 3  # its three layers
            assert all(layer.gradient_checkpointing for layer in bert.encoder.layer)
        torch.manual_seed(3)
        bert(input_ids=ids).last_hidden_state.sum().backward()
        grads.append({k: p.grad.clone() for k, p in bert.named_parameters() if p.grad is not None})
    for k in grads[0]:
        torch.testing.assert_close(grads[1][k], grads[0][k], msg=k)


def test_gradient_checkpointing_without_a_transformer_block_is_refused_in_one_line():
    cfg = _cfg({"enable_gradient_checkpointing": True}, encoder={"type": "parallel_cnn", "num_filters": 4})
    data = prepare(_frame(), cfg)
    with pytest.raises(ConfigError, match=r"trainer.enable_gradient_checkpointing: .* has none") as e:
        enable_gradient_checkpointing(build_model(cfg, data.meta))
    assert "\n" not in str(e.value)
    # a transformer combiner's blocks count
    cfg = _cfg(
        {"enable_gradient_checkpointing": True},
        encoder={"type": "parallel_cnn", "num_filters": 4},
        combiner={"type": "transformer", "hidden_size": 8, "num_heads": 2, "num_layers": 1},
    )
    assert enable_gradient_checkpointing(build_model(cfg, prepare(_frame(), cfg).meta)) == 1


# ------------------------------------------------------------------ probes at the longest length
def test_the_longest_row_of_each_token_input_is_found():
    frame = _frame()
    data = prepare(frame, _cfg())
    meta, ids = data.meta["tokens"], data.inputs["tokens"]
    assert padding_id(meta) == 0 and meta.vocab[0] == "<PAD>"
    lengths = (ids != 0).sum(axis=1)
    short = np.flatnonzero(lengths < lengths.max())
    # among rows that are all shorter than the prepared width: the first of the longest
    found = longest_rows(data.inputs, data.meta, short)
    assert found.tolist() == [int(short[np.argmax(lengths[short])])]
    assert lengths[found[0]] == lengths[short].max() < ids.shape[1]
    assert lengths[longest_rows(data.inputs, data.meta, np.arange(len(frame)))[0]] == ids.shape[1]
    assert longest_rows(data.inputs, data.meta, short[:0]).tolist() == []
    assert padding_id(type(meta)("t", "text", vocab=("[UNK]", "[PAD]"))) == 1
    assert padding_id(type(meta)("t", "text", stats={"padding_id": 5.0})) == 5


def test_every_probe_batch_starts_with_the_longest_rows():
    rng = np.random.default_rng(0)
    rows = np.arange(100, 200)
    for size in (1, 4, 64, 300):
        picked = probe_rows(rng, rows, size, np.array([150, 7]))
        assert len(picked) == size and picked[0] == 150
        assert size == 1 or picked[1] == 7


class _LengthSpy(torch.nn.Module):
    """Wraps the model: records, for each forward, the longest non-padding row in the batch."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.lengths: list[int] = []

    def forward(self, x):
        self.lengths.append(int((x["tokens"] != 0).sum(dim=1).max()))
        return self.inner(x)


def _tune(cfg: SweepConfig, frame: pd.DataFrame, cache: MemoryCache):
    data = prepare(frame, cfg)
    spy = _LengthSpy(build_model(cfg, data.meta))
    losses = OutputLosses(cfg.output_features, data.meta)
    optimizer = torch.optim.SGD(spy.parameters(), lr=0.0)
    dd = DeviceData(data, torch.device("cpu"))
    train, evaluation = tune_batch_sizes(
        cfg,
        spy,
        optimizer,
        lambda x, y: combined_loss(cfg, spy(x), y, losses),
        dd,
        data.splits["train"],
        data.splits["validation"],
        world_size=1,
        local_world_size=1,
        cache=cache,
        longest=lambda rows: longest_rows(data.inputs, data.meta, rows),
    )
    return data, spy, train, evaluation


def test_auto_batch_size_probes_at_the_longest_length_and_caches_per_length():
    # 8 rows of 16 tokens among 400 of 4 to 8: a batch drawn at random would rarely hold one
    frame = _frame(rows=400, long_rows=8)
    cfg = _cfg({"batch_size": "auto", "max_batch_size": 8})
    cache = MemoryCache()
    data, spy, train, _ = _tune(cfg, frame, cache)
    width = data.inputs["tokens"].shape[1]
    assert width == 16 and train.source == "probe" and spy.lengths
    # every training probe batch holds a row of the prepared width
    assert set(spy.lengths) == {width}
    assert _tune(cfg, frame, cache)[2].source == "sweep cache"  # the same width: a hit
    # a shorter max_sequence_length prepares a narrower width: another key, probed again
    short = frame.copy()
    cfg_short = SweepConfig.model_validate(
        {
            **cfg.model_dump(exclude_unset=True),
            "input_features": [
                {**cfg.input_features[0].model_dump(exclude_unset=True), "preprocessing": {"max_sequence_length": 6}}
            ],
        }
    )
    data_short, _, again, _ = _tune(cfg_short, short, cache)
    assert data_short.inputs["tokens"].shape[1] == 6 < width
    assert again.source == "probe"


def test_a_pretrained_text_encoder_is_recomputed_only_when_trainable(tiny_bert_dir):
    from ludwig_hpo.config import encoders_hf as cfgs
    from ludwig_hpo.model.encoders_hf import HFTextEncoderModule

    def model(trainable: bool) -> torch.nn.Module:
        cfg = cfgs.BERTEncoder(pretrained_model_name_or_path=str(tiny_bert_dir), trainable=trainable)
        return torch.nn.ModuleDict({"text": HFTextEncoderModule(cfg, 120, pad_id=0, length=8)})

    assert enable_gradient_checkpointing(model(True)) == 2  # the tiny BERT's two layers
    with pytest.raises(ConfigError, match="no trainable pretrained encoder"):
        enable_gradient_checkpointing(model(False))  # frozen: nothing to recompute


def test_the_batch_size_cache_key_holds_the_image_size():
    from ..gpu.test_cuda_transformers import HYPEROPT, rgb_frame

    cache = MemoryCache()
    for size in (8, 12):
        cfg = SweepConfig.model_validate(
            {
                "name": "images",
                "dataset": {"source": "rows.csv"},
                "input_features": [
                    {
                        "name": "image",
                        "type": "image",
                        "preprocessing": {"num_channels": 3, "height": size, "width": size},
                        "encoder": {"type": "stacked_cnn", "num_conv_layers": 1, "out_channels": 4},
                    }
                ],
                "output_features": [{"name": "label", "type": "category"}],
                "trainer": {"epochs": 1, "batch_size": "auto", "max_batch_size": 8},
                "hyperopt": HYPEROPT,
            }
        )
        data = prepare(rgb_frame(rows=200, size=12), cfg)
        model = build_model(cfg, data.meta)
        losses = OutputLosses(cfg.output_features, data.meta)
        train, _ = tune_batch_sizes(
            cfg,
            model,
            torch.optim.SGD(model.parameters(), lr=0.0),
            lambda x, y, m=model, c=cfg, lo=losses: combined_loss(c, m(x), y, lo),
            DeviceData(data, torch.device("cpu")),
            data.splits["train"],
            data.splits["validation"],
            world_size=1,
            local_world_size=1,
            cache=cache,
        )
        assert train.source == "probe"  # the 12x12 images are not the 8x8 ones' entry
    assert len(cache.entries) == 2


def test_a_recomputed_model_still_pickles_and_copies():
    import copy
    import io
    import pickle

    cfg = _cfg({"enable_gradient_checkpointing": True})
    data = prepare(_frame(), cfg)
    model = build_model(cfg, data.meta)
    enable_gradient_checkpointing(model)
    x = DeviceData(data, torch.device("cpu")).batch(torch.arange(4))[0]
    model.eval()
    with torch.no_grad():
        expected = model(x)["label"]
    buf = io.BytesIO()
    torch.save(model, buf)  # what MLflow's pickle flavour does with a whole module
    for again in (pickle.loads(pickle.dumps(model)), copy.deepcopy(model)):
        blocks = [m for m in again.modules() if isinstance(m, TransformerBlock)]
        assert all(b.forward.args[0] is b for b in blocks)  # each recomputes itself, not the original
        with torch.no_grad():
            torch.testing.assert_close(again(x)["label"], expected)
