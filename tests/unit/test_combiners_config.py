"""The ``combiner`` section: Ludwig's keys and defaults for every type, and the one-line error of
each bad combination (with the key it points at), through the sweep-file loader."""

from __future__ import annotations

import pytest
import yaml

from ludwig_hpo.config import load_sweep
from ludwig_hpo.config.combiners import ConcatCombiner
from ludwig_hpo.errors import ConfigError

INPUTS = [{"name": "a", "type": "number"}, {"name": "b", "type": "number"}, {"name": "c", "type": "category"}]


def _load(tmp_path, sweep_dict, combiner):
    raw = sweep_dict(INPUTS, [{"name": "y", "type": "number"}])
    if combiner is not None:
        raw["combiner"] = combiner
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return load_sweep(path).config.combiner


def _error(tmp_path, sweep_dict, combiner) -> str:
    with pytest.raises(ConfigError) as e:
        _load(tmp_path, sweep_dict, combiner)
    line = e.value.one_line()
    assert "\n" not in line and "Traceback" not in line
    return line.split(": ", 1)[1]  # without the file:line:column


@pytest.mark.parametrize("written", [None, {}, {"type": "concat"}])
def test_ludwig_concat_defaults(tmp_path, sweep_dict, written):
    c = _load(tmp_path, sweep_dict, written)
    assert isinstance(c, ConcatCombiner)
    assert (c.num_fc_layers, c.output_size, c.fc_layers, c.dropout, c.activation) == (0, 256, None, 0.0, "relu")
    assert (c.norm, c.norm_params, c.flatten_inputs, c.residual, c.use_bias) == (None, None, False, False, True)
    assert (c.weights_initializer, c.bias_initializer) == ("xavier_uniform", "zeros")


def test_ludwig_defaults_of_the_other_types(tmp_path, sweep_dict):
    t = _load(tmp_path, sweep_dict, {"type": "transformer"})
    assert (t.hidden_size, t.num_heads, t.num_layers, t.transformer_output_size, t.dropout) == (256, 8, 1, 256, 0.1)
    assert (t.reduce_output, t.num_fc_layers, t.output_size, t.fc_dropout, t.fc_activation) == (
        "mean",
        0,
        256,
        0.0,
        "relu",
    )
    tt = _load(tmp_path, sweep_dict, {"type": "tabtransformer"})
    assert (tt.reduce_output, tt.embed_input_feature_name) == ("concat", None)
    ft = _load(tmp_path, sweep_dict, {"type": "ft_transformer"})
    assert (ft.hidden_size, ft.num_fc_layers) == (256, 0)
    sc = _load(tmp_path, sweep_dict, {"type": "sequence_concat"})
    assert (sc.main_sequence_feature, sc.reduce_output) == (None, None)
    cmp = _load(tmp_path, sweep_dict, {"type": "comparator", "entity_1": ["a"], "entity_2": ["b", "c"]})
    assert (cmp.num_fc_layers, cmp.output_size, cmp.activation, cmp.dropout) == (1, 256, "relu", 0.0)


@pytest.mark.parametrize(
    ("combiner", "expect"),
    [
        (
            {"type": "comparator", "entity_1": ["a"], "entity_2": ["b", "zz"]},
            "combiner.entity_2[1]: 'zz' is not an input feature; fix: use one of ['a', 'b', 'c']",
        ),
        (
            {"type": "comparator", "entity_1": ["a", "c"], "entity_2": ["b", "a"]},
            "combiner.entity_2: ['a'] are in both entity_1 and entity_2",
        ),
        (
            {"type": "comparator", "entity_1": ["a"], "entity_2": ["b"]},
            "combiner.entity_2: input features ['c'] are in neither entity_1 nor entity_2",
        ),
        ({"type": "comparator", "entity_1": ["a", "b", "c"]}, "combiner.entity_2: required key is missing"),
        (
            {"type": "comparator", "entity_1": ["a", "c"], "entity_2": ["b"], "num_fc_layers": 0},
            "combiner.num_fc_layers: the comparator needs at least one fully connected layer per entity",
        ),
        (
            {"type": "sequence_concat", "main_sequence_feature": "zz"},
            "combiner.main_sequence_feature: main_sequence_feature 'zz' is not an input feature",
        ),
        ({"type": "sequence"}, "combiner.type: combiner type 'sequence' is not supported yet; fix: use one of"),
        ({"type": "nope"}, "combiner.type: unknown type 'nope'; fix: use one of concat, tabnet"),
        (
            {"type": "transformer", "hidden_size": 12, "num_heads": 8},
            "hidden_size (12) is not divisible by num_heads (8)",
        ),
        ({"type": "tabnet", "num_shared_blocks": 3, "num_total_blocks": 2}, "num_shared_blocks (3) exceeds"),
        (
            {"type": "tabtransformer", "hidden_size": 16, "num_heads": 2, "embed_input_feature_name": 16},
            "embed_input_feature_name (16) must be smaller than hidden_size (16)",
        ),
        ({"type": "tabtransformer", "reduce_output": None}, "joins its reduced tokens with the number and binary"),
        ({"norm": "batch", "norm_params": {"bogus": 1}}, "norm_params ['bogus'] are not arguments of the batch norm"),
        ({"norm_params": {"eps": 0.1}}, "norm_params is set but norm is null"),
        ({"fc_layers": [{"output_size": 4, "bogus": 1}]}, "combiner.fc_layers[0].bogus: unknown key 'bogus'"),
        ({"weights_initializer": {"type": "normal", "sd": 1}}, "['sd'] are not arguments of the normal initializer"),
        ({"weights_initializer": {"type": "constant"}}, "the constant initializer needs ['val']"),
        ({"bias_initializer": "xavier_uniform"}, "combiner.bias_initializer: xavier_uniform initializes matrices"),
        ({"activation": "gelu"}, "combiner.activation: Input should be 'elu', 'leakyRelu'"),
    ],
)
def test_bad_combinations_are_one_line_at_their_key(tmp_path, sweep_dict, combiner, expect):
    assert expect in _error(tmp_path, sweep_dict, combiner)


def test_an_initializer_with_arguments_and_per_layer_settings_are_accepted(tmp_path, sweep_dict):
    c = _load(
        tmp_path,
        sweep_dict,
        {
            "fc_layers": [{"output_size": 8, "weights_initializer": {"type": "normal", "std": 0.1}}, {"norm": "layer"}],
            "bias_initializer": {"type": "constant", "val": 0.1},
            "norm_params": {"eps": 1e-4},
            "norm": "batch",
        },
    )
    assert c.fc_layers[0].weights_initializer.model_dump() == {"type": "normal", "std": 0.1}
    assert c.fc_layers[1].model_fields_set == {"norm"}
