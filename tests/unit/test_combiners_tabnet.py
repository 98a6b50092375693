"""TabNet's pieces: the sparse maps that select features (sparsemax, 1.5-entmax, bisection
entmax) and their gradients, ghost batch norm, the mask entropy loss, and Ludwig's defaults."""

from __future__ import annotations

import pytest
import torch
from pydantic import TypeAdapter

from ludwig_hpo.config.combiners import CombinerConfig
from ludwig_hpo.model.combiners import EncodedInput, build_combiner
from ludwig_hpo.model.combiners.entmax import entmax15, entmax_bisect, sparsemax
from ludwig_hpo.model.combiners.tabnet import GhostBatchNorm

COMBINER = TypeAdapter(CombinerConfig)


def test_sparsemax_of_known_values():
    x = torch.tensor([[-1.0, 0.0, 1.0], [-5.0, 1.0, 2.0], [0.1, 0.2, 0.3]])
    expect = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.2333333, 0.3333333, 0.4333333]])
    assert torch.allclose(sparsemax(x), expect, atol=1e-6)


@pytest.mark.parametrize("fn", [sparsemax, entmax15, lambda x: entmax_bisect(x, 1.3)], ids=["sparse", "15", "1.3"])
def test_maps_are_distributions_with_exact_gradients(fn):
    torch.manual_seed(0)
    x = torch.randn(5, 7, dtype=torch.float64) * 3
    y = fn(x)
    assert torch.allclose(y.sum(-1), torch.ones(5, dtype=torch.float64), atol=1e-6) and (y >= 0).all()
    assert torch.autograd.gradcheck(fn, (x.clone().requires_grad_(),), eps=1e-6, atol=1e-4)


def test_entmax15_is_bisection_entmax_at_alpha_1_5_and_sparser_than_softmax():
    torch.manual_seed(1)
    x = torch.randn(20, 9)
    assert torch.allclose(entmax15(x), entmax_bisect(x, 1.5, n_iter=60), atol=1e-5)
    assert torch.allclose(entmax_bisect(x, 2.0, n_iter=60), sparsemax(x), atol=1e-5)
    assert (entmax15(x) == 0).any() and (sparsemax(x) == 0).sum() >= (entmax15(x) == 0).sum()


def test_ghost_batch_norm_normalizes_each_virtual_batch_in_training():
    bn = GhostBatchNorm(3, momentum=0.05, eps=1e-3, virtual_batch_size=4).train()
    x = torch.randn(8, 3) * 5 + 2
    out = bn(x)
    for chunk in out.split(4):  # each chunk of 4 has its own mean 0 (affine at its initial identity)
        assert torch.allclose(chunk.mean(0), torch.zeros(3), atol=1e-5)
    one = torch.randn(1, 3)
    assert torch.equal(bn(one), one)  # one row: nothing to normalize over, passed unchanged


def test_ludwig_defaults_and_the_sparsity_loss():
    cfg = COMBINER.validate_python({"type": "tabnet"})
    assert (cfg.size, cfg.output_size, cfg.num_steps, cfg.num_total_blocks, cfg.num_shared_blocks) == (32, 128, 3, 4, 2)
    assert (cfg.relaxation_factor, cfg.bn_epsilon, cfg.bn_momentum, cfg.bn_virtual_bs) == (1.5, 1e-3, 0.05, 1024)
    assert (cfg.sparsity, cfg.entmax_mode, cfg.entmax_alpha, cfg.dropout) == (1e-4, "sparsemax", 1.5, 0.05)
    torch.manual_seed(0)
    tabnet = build_combiner(cfg, [EncodedInput("x", "number", 6)]).train()
    hidden, loss = tabnet.forward_with_loss({"x": torch.randn(16, 6)})
    assert hidden.shape == (16, 128) and loss.dim() == 0 and loss > 0
    loss.backward()  # the entropy of the masks reaches the attentive transformers
    att = tabnet.tabnet.attentive_transforms[0].feature_block.fc_layer.weight
    assert att.grad is not None and att.grad.abs().sum() > 0
    off = build_combiner(
        COMBINER.validate_python({"type": "tabnet", "sparsity": 0.0}), [EncodedInput("x", "number", 6)]
    )
    assert off.forward_with_loss({"x": torch.randn(16, 6)})[1].item() == 0.0


@pytest.mark.parametrize("mode", ["sparsemax", "entmax15", "constant", "adaptive"])
def test_masks_are_sparse_distributions_over_features(mode):
    torch.manual_seed(0)
    raw = {"type": "tabnet", "size": 4, "output_size": 4, "num_steps": 2, "entmax_mode": mode, "entmax_alpha": 1.2}
    tabnet = build_combiner(COMBINER.validate_python(raw), [EncodedInput("x", "number", 5)]).train()
    net = tabnet.tabnet
    x = net.batch_norm(torch.randn(32, 5))
    h = net.feature_transforms[0](x)
    mask = net.attentive_transforms[0](h[:, 4:], torch.ones_like(x))
    assert torch.allclose(mask.sum(-1), torch.ones(32), atol=1e-4) and (mask >= 0).all()
