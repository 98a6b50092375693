"""The pretrained Hugging Face text encoders: Ludwig's keys and defaults, the module's reductions
over real tokens, freezing, gradient checkpointing, architecture keys with and without
pretrained weights, and the checks run before any trial. Tiny models of tests/hf_models.py."""

from __future__ import annotations

import pytest
import torch
from pydantic import ValidationError

from ludwig_hpo.config import encoders_hf as cfgs
from ludwig_hpo.config.features import TextInputFeature
from ludwig_hpo.data import hf_loader
from ludwig_hpo.model import hf_checks
from ludwig_hpo.model.encoders_hf import HFTextEncoderModule, reduce_masked

VOCAB = 120  # the tiny tokenizer's ids
#: Two rows of the tiny tokenizer's ids: [CLS]=2 ... [SEP]=3, padded with 0.
IDS = torch.tensor([[2, 10, 11, 12, 3, 0, 0], [2, 13, 3, 0, 0, 0, 0]])


def _text(encoder):
    return TextInputFeature(name="t", type="text", encoder=encoder).encoder


def test_the_aliases_have_ludwigs_defaults():
    bert = _text({"type": "bert"})
    assert (bert.pretrained_model_name_or_path, bert.reduce_output, bert.trainable) == (
        "bert-base-uncased",
        "cls_pooled",
        False,
    )
    assert bert.use_pretrained and bert.hidden_size == 768 and bert.num_hidden_layers == 12
    assert _text({"type": "distilbert"}).reduce_output == "sum"
    assert _text({"type": "electra"}).pretrained_model_name_or_path == "google/electra-small-discriminator"
    auto = _text({"type": "auto_transformer", "pretrained_model_name_or_path": "x"})
    assert auto.reduce_output == "sum" and auto.architecture_keys() == ()


@pytest.mark.parametrize(
    ("encoder", "said"),
    [
        ({"type": "distilbert", "reduce_output": "cls_pooled"}, "needs a pooler and distilbert has none"),
        ({"type": "bert", "reduce_output": "attention"}, "reduce_output: attention is not supported yet"),
        ({"type": "bert", "adapter": {"type": "lora"}}, "adapter"),
        ({"type": "gpt2"}, "text encoder type 'gpt2' is not supported yet"),
        ({"type": "bert", "saved_weights_in_checkpoint": True}, "saved_weights_in_checkpoint"),
    ],
)
def test_what_is_not_built_is_refused(encoder, said):
    with pytest.raises(ValidationError, match=said):
        _text(encoder)


def _module(tiny_bert_dir, **keys):
    cfg = cfgs.BERTEncoder(pretrained_model_name_or_path=str(tiny_bert_dir), **keys)
    return HFTextEncoderModule(cfg, VOCAB, pad_id=0, length=IDS.shape[1])


@pytest.mark.parametrize(
    ("reduce", "shape"),
    [
        ("cls_pooled", (2, 32)),
        ("sum", (2, 32)),
        ("mean", (2, 32)),
        ("max", (2, 32)),
        ("last", (2, 32)),
        ("concat", (2, 5 * 32)),
        (None, (2, 5, 32)),
    ],
)
def test_each_reduction_gives_its_shape(tiny_bert_dir, reduce, shape):
    enc = _module(tiny_bert_dir, reduce_output=reduce)
    out = enc(IDS)
    assert tuple(out.shape) == shape and (
        enc.output_size == shape[-1] if reduce != "concat" else enc.output_size == shape[1]
    )
    assert enc.sequence == (reduce is None)


def test_cls_pooled_is_the_models_pooler_output(tiny_bert_dir):
    enc = _module(tiny_bert_dir, reduce_output="cls_pooled")
    model = hf_loader.load_model(str(tiny_bert_dir)).eval()
    want = model(input_ids=IDS, attention_mask=(IDS != 0).long(), token_type_ids=torch.zeros_like(IDS))["pooler_output"]
    assert torch.allclose(enc(IDS), want, atol=1e-6)


def test_a_masked_mean_does_not_depend_on_the_padded_length(tiny_bert_dir):
    enc = _module(tiny_bert_dir, reduce_output="mean").eval()
    longer = torch.cat([IDS, torch.zeros(2, 5, dtype=torch.long)], dim=1)
    assert torch.allclose(enc(IDS), enc(longer), atol=1e-5)


def test_reductions_read_only_kept_positions():
    hidden = torch.arange(12.0).reshape(1, 4, 3)
    keep = torch.tensor([[True, True, False, False]])
    assert reduce_masked(hidden, keep, "sum").tolist() == [[3.0, 5.0, 7.0]]
    assert reduce_masked(hidden, keep, "mean").tolist() == [[1.5, 2.5, 3.5]]
    assert reduce_masked(hidden, keep, "max").tolist() == [[3.0, 4.0, 5.0]]
    assert reduce_masked(hidden, keep, "last").tolist() == [[3.0, 4.0, 5.0]]
    assert reduce_masked(hidden, torch.zeros_like(keep), "max").tolist() == [[0.0, 0.0, 0.0]]


def test_sum_skips_the_aliases_first_and_last_token_with_left_padding_too(tiny_bert_dir):
    enc = _module(tiny_bert_dir, reduce_output="sum")
    left = torch.tensor([[0, 0, 2, 10, 11, 12, 3], [0, 0, 0, 0, 2, 13, 3]])  # padding: left
    hidden = enc.transformer.module(input_ids=left, attention_mask=(left != 0).long())["last_hidden_state"]
    want = torch.stack([hidden[0, 3:6].sum(dim=0), hidden[1, 5]])  # the tokens between [CLS] and [SEP]
    assert torch.allclose(enc(left), want, atol=1e-5)


def test_an_encoder_cut_of_left_padded_rows_is_refused():
    from pydantic import ValidationError

    enc = {"type": "bert", "pretrained_model_name_or_path": "owner/m", "max_sequence_length": 16}
    with pytest.raises(ValidationError, match="would cut the text, not the padding"):
        TextInputFeature(name="t", type="text", encoder=enc, preprocessing={"padding": "left"})
    TextInputFeature(name="t", type="text", encoder=enc, preprocessing={"padding": "right"})


def test_trainable_false_freezes_the_transformer_and_keeps_it_in_eval_mode(tiny_bert_dir):
    enc = _module(tiny_bert_dir)
    enc.train()
    assert not any(p.requires_grad for p in enc.parameters())
    assert not enc.transformer.module.training
    assert not enc.enable_gradient_checkpointing()


def test_trainable_true_trains_the_transformer_with_gradient_checkpointing(tiny_bert_dir):
    enc = _module(tiny_bert_dir, trainable=True, gradient_checkpointing=True, reduce_output="mean")
    enc.train()
    assert enc.transformer.module.training and enc.transformer.module.is_activation_checkpointing
    enc(IDS).pow(2).sum().backward()  # a plain sum over a LayerNorm's output has no gradient
    layers = [(n, p.grad) for n, p in enc.named_parameters() if ".encoder.layer." in n]
    assert layers and all(g is not None and g.abs().sum() > 0 for _, g in layers)
    # DDP needs a gradient for every trainable parameter: the unused pooler is gone
    assert all(p.grad is not None for p in enc.parameters()) and enc.transformer.module.pooler is None


def test_use_pretrained_false_builds_the_aliases_architecture_for_the_tokenizer(tiny_bert_dir):
    enc = _module(
        tiny_bert_dir,
        use_pretrained=False,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=24,
    )
    model = enc.transformer.module
    assert model.config.hidden_size == 16 and model.config.num_hidden_layers == 1
    assert model.get_input_embeddings().num_embeddings == VOCAB and tuple(enc(IDS).shape) == (2, 16)


def test_with_pretrained_weights_a_float_key_overrides_and_a_shape_key_must_match(tiny_bert_dir):
    enc = _module(tiny_bert_dir, hidden_dropout_prob=0.25)
    assert enc.transformer.module.config.hidden_dropout_prob == 0.25
    with pytest.raises(ValueError, match="hidden_size is 64 but the pretrained model"):
        _module(tiny_bert_dir, hidden_size=64)


def test_auto_transformer_resizes_the_embeddings_to_the_tokenizer(tiny_distilbert_dir):
    cfg = cfgs.AutoTransformerEncoder(pretrained_model_name_or_path=str(tiny_distilbert_dir))
    enc = HFTextEncoderModule(cfg, VOCAB + 8, pad_id=0, length=7)
    assert enc.transformer.module.get_input_embeddings().num_embeddings == VOCAB + 8
    pooled = cfgs.AutoTransformerEncoder(
        pretrained_model_name_or_path=str(tiny_distilbert_dir), reduce_output="cls_pooled"
    )
    with pytest.raises(ValueError, match="needs a pooler"):
        HFTextEncoderModule(pooled, VOCAB, pad_id=0, length=7)


def test_local_models_are_checked_against_the_prepared_text(tiny_bert_dir):
    config = hf_loader.read_config_dict(hf_loader.resolve(str(tiny_bert_dir)))
    enc = cfgs.BERTEncoder(pretrained_model_name_or_path=str(tiny_bert_dir))
    assert hf_checks.encoder_problems(enc, config, VOCAB, 64) == []
    assert "embedding table holds 120" in hf_checks.encoder_problems(enc, config, VOCAB + 1, 64)[0]
    assert "longer than the model's 64 positions" in hf_checks.encoder_problems(enc, config, VOCAB, 65)[0]
    capped = cfgs.BERTEncoder(pretrained_model_name_or_path=str(tiny_bert_dir), max_sequence_length=64)
    assert hf_checks.encoder_problems(capped, config, VOCAB, 200) == []


class _Cfg:
    """The parts of a sweep config the availability check reads."""

    def __init__(self, feature, parameters=None):
        self.input_features = [feature]
        self.hyperopt = type("H", (), {"parameters": parameters or {}})()


def test_models_named_by_features_and_search_spaces_are_found(monkeypatch, tmp_path, tiny_bert_dir):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path))
    feature = TextInputFeature(
        name="t", type="text", encoder={"type": "bert", "pretrained_model_name_or_path": str(tiny_bert_dir)}
    )
    space = {"categories": [str(tiny_bert_dir), "owner/other-model"]}
    cfg = _Cfg(feature, {"t.encoder.pretrained_model_name_or_path": space})
    assert hf_checks.named_models(cfg) == [
        ("input_features[t].encoder.pretrained_model_name_or_path", str(tiny_bert_dir)),
        ("hyperopt.parameters.t.encoder.pretrained_model_name_or_path", str(tiny_bert_dir)),
        ("hyperopt.parameters.t.encoder.pretrained_model_name_or_path", "owner/other-model"),
    ]
    notes = hf_checks.check_models_available(cfg, "s.yaml", network=False)
    assert len(notes) == 1 and "'owner/other-model' is a hub id" in notes[0] and "not checked offline" in notes[0]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from ludwig_hpo.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        hf_checks.check_models_available(cfg, "s.yaml", network=True)
    assert err.value.key == "hyperopt.parameters.t.encoder.pretrained_model_name_or_path"
    assert "needs a network" in str(err.value)


def test_a_grid_of_model_names_is_checked_too():
    from ludwig_hpo.config.spaces import GridSearchSpace

    feature = TextInputFeature(name="t", type="text", encoder={"type": "bert"})
    grid = GridSearchSpace(space="grid_search", values=["owner/a", "owner/b"])
    names = [
        name for _, name in hf_checks.named_models(_Cfg(feature, {"t.encoder.pretrained_model_name_or_path": grid}))
    ]
    assert names == ["bert-base-uncased", "owner/a", "owner/b"]


def test_a_badly_named_model_is_one_line_at_its_key():
    from ludwig_hpo.errors import ConfigError

    feature = TextInputFeature(
        name="t", type="text", encoder={"type": "bert", "pretrained_model_name_or_path": "not a model!"}
    )
    with pytest.raises(ConfigError) as err:
        hf_checks.check_models_available(_Cfg(feature), "s.yaml", network=False)
    assert err.value.key == "input_features[t].encoder.pretrained_model_name_or_path"
    assert "neither a local folder nor a Hugging Face hub id" in str(err.value)
