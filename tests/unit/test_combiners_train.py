"""Every combiner learns: with a linear head on top, a few hundred Adam steps on a tiny
learnable task (a fixed function of the inputs) take the training loss well below where it
started. Deterministic (seeded), a few seconds on CPU."""

from __future__ import annotations

import pytest
import torch
from pydantic import TypeAdapter

from ludwig_hpo.config.combiners import CombinerConfig
from ludwig_hpo.model.combiners import EncodedInput, build_combiner

COMBINER = TypeAdapter(CombinerConfig)
INPUTS = [
    EncodedInput("c1", "category", 3),
    EncodedInput("c2", "category", 4),
    EncodedInput("n", "number", 1),
    EncodedInput("b", "binary", 1),
]
SMALL = {"hidden_size": 8, "num_heads": 2, "transformer_output_size": 16, "dropout": 0.0}
CONFIGS = {
    "concat": {"num_fc_layers": 1, "output_size": 16},
    "tabnet": {"type": "tabnet", "size": 8, "output_size": 8, "num_steps": 2, "bn_virtual_bs": 32, "dropout": 0.0},
    "transformer": {"type": "transformer", **SMALL},
    "tabtransformer": {"type": "tabtransformer", **SMALL, "embed_input_feature_name": "add"},
    "ft_transformer": {"type": "ft_transformer", **SMALL},
    "comparator": {"type": "comparator", "entity_1": ["c1", "n"], "entity_2": ["c2", "b"], "output_size": 8},
}


@pytest.fixture(autouse=True)
def _one_thread():
    """One intra-op thread: on a shared, loaded machine two threads per tiny op contend and
    each step costs a hundred times more."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _task(n: int = 128) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x = {i.name: torch.randn(n, i.width, generator=g) for i in INPUTS}
    y = x["c1"][:, 0] * 1.5 - x["c2"][:, 1] + 0.8 * x["n"][:, 0] * x["b"][:, 0]
    return x, y


@pytest.mark.parametrize("kind", list(CONFIGS))
def test_the_training_loss_falls(kind):
    torch.manual_seed(0)
    combiner = build_combiner(COMBINER.validate_python(CONFIGS[kind]), INPUTS).train()
    head = torch.nn.Linear(combiner.output_size, 1)
    params = [*combiner.parameters(), *head.parameters()]
    opt = torch.optim.Adam(params, lr=1e-2)
    x, y = _task()

    def loss() -> torch.Tensor:
        if hasattr(combiner, "forward_with_loss"):
            hidden, aux = combiner.forward_with_loss(x)
            return torch.nn.functional.mse_loss(head(hidden).squeeze(-1), y) + aux
        return torch.nn.functional.mse_loss(head(combiner(x)).squeeze(-1), y)

    first = loss().item()
    for _ in range(300):
        opt.zero_grad()
        value = loss()
        value.backward()
        opt.step()
    assert value.item() < 0.3 * first, f"{kind}: loss {first:.3f} -> {value.item():.3f}"
