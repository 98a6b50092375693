"""Text input features against Ludwig's semantics: the preprocessing schema's defaults and
refusals, the vocabulary (special symbols at Ludwig's ids, ``most_common``, ``vocab_file``),
ids with ``<SOS>`` / ``<EOS>`` cut and padded as ``build_sequence_matrix``, fitting on the
training split only, a Hugging Face tokenizer's ids, and what ``hpo validate`` prints."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from ludwig_hpo.config.base import RuleError
from ludwig_hpo.config.describe import feature_stats_lines, text_stats_line
from ludwig_hpo.config.features import TextInputFeature
from ludwig_hpo.config.text import TextPreprocessing
from ludwig_hpo.data.origin import DataOrigin
from ludwig_hpo.data.text import encode_text, ludwig_vocabulary, text_preprocessing
from ludwig_hpo.errors import DataError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ludwig"
SWEEP = """\
name: text
dataset: {{source: data.csv}}
input_features:
  - name: t
    type: text
    preprocessing: {preprocessing}
output_features:
  - {{name: y, type: category}}
hyperopt:
  parameters:
    trainer.learning_rate: {{space: loguniform, lower: 1.0e-4, upper: 1.0e-2}}
"""


def _feature(**preprocessing) -> TextInputFeature:
    return TextInputFeature.model_validate({"name": "t", "type": "text", "preprocessing": preprocessing})


def _encode(cells, train=None, data_dir=None, load=None, **preprocessing):
    s = pd.Series(cells, name="t")
    train = np.arange(len(cells)) if train is None else np.asarray(train)
    origin = DataOrigin.of(pd.DataFrame({"t": s}))
    return encode_text(_feature(**preprocessing), s, "input_features[t]", train, origin, data_dir, load)


def test_ludwig_defaults_of_a_text_feature() -> None:
    f = TextInputFeature.model_validate({"name": "t", "type": "text"})
    assert f.encoder.type == "parallel_cnn"  # Ludwig's default text encoder
    p = f.preprocessing
    assert (p.tokenizer, p.lowercase, p.max_sequence_length, p.most_common) == ("space_punct", True, 256, 20000)
    assert (p.padding, p.padding_symbol, p.unknown_symbol, p.fill_value) == ("right", "<PAD>", "<UNK>", "<UNK>")
    assert p.missing_value_strategy == "fill_with_const" and p.vocab_file is None


@pytest.mark.parametrize(
    ("tokenizer", "says"),
    [
        ("english_tokenize", "spaCy"),
        ("german_lemmatize_remove_stopwords", "spaCy"),
        ("sentencepiece_tokenizer", "torchtext"),
        ("no_such_tokenizer", "unknown tokenizer"),
    ],
)
def test_tokenizers_this_platform_lacks_are_refused_naming_space_punct(
    tokenizer: str, says: str, tmp_path: Path
) -> None:
    from ludwig_hpo.config import load_sweep
    from ludwig_hpo.errors import UserError

    (tmp_path / "s.yaml").write_text(SWEEP.format(preprocessing=f"{{tokenizer: {tokenizer}}}"), encoding="utf-8")
    with pytest.raises(UserError) as e:
        load_sweep(tmp_path / "s.yaml")
    line = str(e.value)
    assert "\n" not in line and says in line and "space_punct" in line
    assert "s.yaml:6:" in line and "input_features[t].preprocessing.tokenizer" in line


def test_hf_tokenizer_needs_a_model_and_a_model_needs_hf_tokenizer() -> None:
    with pytest.raises(ValueError, match="needs pretrained_model_name_or_path"):
        _feature(tokenizer="hf_tokenizer")
    with pytest.raises(ValueError, match="read only with tokenizer hf_tokenizer"):
        _feature(pretrained_model_name_or_path="bert-base-uncased")
    with pytest.raises(ValueError, match="vocab_file is not read"):
        _feature(tokenizer="hf_tokenizer", pretrained_model_name_or_path="x", vocab_file="v.txt")


def test_unbuilt_text_encoders_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="text encoder type 'tf_idf' is not supported yet"):
        TextInputFeature.model_validate({"name": "t", "type": "text", "encoder": {"type": "tf_idf"}})


def test_special_symbols_take_ludwigs_ids_and_move_when_the_data_holds_them() -> None:
    assert ludwig_vocabulary(["a", "b"], "<PAD>", "<UNK>") == ["<EOS>", "<SOS>", "<PAD>", "<UNK>", "a", "b"]
    assert ludwig_vocabulary(["a", "<UNK>", "b", "<EOS>"], "<PAD>", "<UNK>") == [
        "<EOS>",
        "<SOS>",
        "<PAD>",
        "<UNK>",
        "a",
        "b",
    ]


def test_rows_are_sos_tokens_eos_padded_with_the_padding_id() -> None:
    x, m = _encode(["Hello, World!", "the cat"])
    assert m.vocab[:4] == ("<EOS>", "<SOS>", "<PAD>", "<UNK>")
    idx = {t: i for i, t in enumerate(m.vocab)}
    assert m.shape == (6,) and x.dtype == np.int64  # 4 tokens + <SOS> + <EOS>
    assert x[0].tolist() == [1, idx["hello"], idx[","], idx["world"], idx["!"], 0]
    assert x[1].tolist() == [1, idx["the"], idx["cat"], 0, 2, 2]
    assert m.stats["padding_id"] == 2 and m.stats["vocab_size"] == len(m.vocab)


def test_max_sequence_length_counts_the_symbols_and_cuts_from_the_end() -> None:
    x, m = _encode(["a b c d e f", "a"], max_sequence_length=4)
    idx = {t: i for i, t in enumerate(m.vocab)}
    assert m.shape == (4,)
    assert x[0].tolist() == [1, idx["a"], idx["b"], idx["c"]]  # <EOS> cut, as Ludwig's matrix
    assert m.stats["truncated"] == 1 and m.stats["length_max"] == 8


def test_left_padding_and_case_kept() -> None:
    x, m = _encode(["Aa aa", "aa"], padding="left", lowercase=False, tokenizer="space")
    assert "Aa" in m.vocab and "aa" in m.vocab
    assert x[1].tolist()[:1] == [2] and x[1].tolist()[-1] == 0


def test_the_vocabulary_is_fitted_on_the_training_rows_only() -> None:
    x, m = _encode(["red apple", "green pear"], train=[0])
    assert "pear" not in m.vocab and "green" not in m.vocab
    assert x[1].tolist() == [1, 3, 3, 0]  # unknown tokens: id 3


def test_most_common_keeps_the_most_frequent_tokens() -> None:
    _, m = _encode(["b a a c c c"], most_common=2)
    assert m.vocab[4:] == ("c", "a")


def test_vocab_file_words_are_the_vocabulary(tmp_path: Path) -> None:
    (tmp_path / "vocab.txt").write_text("cat 10\ndog\t3\n<UNK>\n\nbird\n", encoding="utf-8")
    x, m = _encode(["cat fish"], data_dir=tmp_path, vocab_file="vocab.txt")
    assert m.vocab == ("<EOS>", "<SOS>", "<PAD>", "<UNK>", "cat", "dog", "bird")
    assert x[0].tolist() == [1, 4, 3, 0]


def test_a_missing_vocab_file_is_one_line_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(DataError) as e:
        _encode(["cat"], data_dir=tmp_path, vocab_file="nope.txt")
    assert e.value.key == "input_features[t].preprocessing.vocab_file"


@pytest.mark.parametrize(
    ("content", "why"), [(b"", "holds no token"), (b"\n  \n", "holds no token"), (bytes(range(256)), "not UTF-8")]
)
def test_an_empty_or_binary_vocab_file_is_one_line_naming_the_key(tmp_path: Path, content: bytes, why: str) -> None:
    (tmp_path / "vocab.txt").write_bytes(content)
    with pytest.raises(DataError, match=why) as e:
        _encode(["cat"], data_dir=tmp_path, vocab_file="vocab.txt")
    assert e.value.key == "input_features[t].preprocessing.vocab_file" and "\n" not in str(e.value)


def test_missing_cells_take_the_fill_value() -> None:
    x, m = _encode(["a b", None], fill_value="zzz")
    assert x[1].tolist()[:3] == [1, m.vocab.index("zzz"), 0]


def test_the_default_fill_is_the_unknown_symbol_as_renamed() -> None:
    x, m = _encode(["a b", None], unknown_symbol="?", tokenizer="space")
    assert m.vocab[3] == "?" and x[1].tolist()[:3] == [1, 3, 0]


@pytest.mark.parametrize("cells", [["  ", "", None], [None, None, None]])
def test_a_column_empty_in_every_training_row_is_refused_before_the_fill(cells) -> None:
    with pytest.raises(DataError) as e:
        _encode(cells)
    assert "missing or blank in every one of the 3 training rows" in str(e.value)
    assert e.value.key == "input_features[t]"


def test_a_tokenizer_that_finds_no_token_in_any_training_row_is_refused() -> None:
    with pytest.raises(DataError, match="the tokenizer comma finds no token"):
        _encode([",", ", ,"], tokenizer="comma")


def test_a_pretrained_encoder_imposes_its_tokenizer() -> None:
    feat = SimpleNamespace(
        encoder=SimpleNamespace(pretrained_model_name_or_path="some/model"), preprocessing=TextPreprocessing()
    )
    prep = text_preprocessing(feat)
    assert (prep.tokenizer, prep.pretrained_model_name_or_path) == ("hf_tokenizer", "some/model")
    assert prep.lowercase is True


def test_hf_tokenizer_ids_vocabulary_and_padding_are_the_tokenizers(tiny_bert_dir: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_bert_dir))
    x, m = _encode(
        ["the cat sat on the mat", "a dog"],
        load=lambda name: AutoTokenizer.from_pretrained(name),
        tokenizer="hf_tokenizer",
        pretrained_model_name_or_path=str(tiny_bert_dir),
    )
    want = tok(["the cat sat on the mat", "a dog"])["input_ids"]
    assert m.shape == (len(want[0]),) and x[0].tolist() == want[0]
    assert x[1].tolist() == want[1] + [tok.pad_token_id] * (len(want[0]) - len(want[1]))
    assert m.stats["padding_id"] == tok.pad_token_id and len(m.vocab) == len(tok)
    assert m.vocab[tok.cls_token_id] == "[CLS]"


def test_hf_tokenizer_that_cannot_load_is_one_line() -> None:
    def load(name: str):
        raise OSError(f"{name} is not a folder\nmore")

    with pytest.raises(DataError) as e:
        _encode(["a"], load=load, tokenizer="hf_tokenizer", pretrained_model_name_or_path="missing/model")
    assert e.value.key == "input_features[t].preprocessing.pretrained_model_name_or_path"
    assert "\n" not in str(e.value)


def test_a_pretrained_encoders_tokenizer_that_cannot_load_points_at_the_encoder_key() -> None:
    def load(name: str):
        raise OSError(f"model folder {name!r} not found")

    feat = TextInputFeature.model_validate(
        {"name": "t", "type": "text", "encoder": {"type": "bert", "pretrained_model_name_or_path": "no/such"}}
    )
    s = pd.Series(["a"], name="t")
    with pytest.raises(DataError) as e:
        encode_text(feat, s, "input_features[t]", np.arange(1), DataOrigin.of(pd.DataFrame({"t": s})), None, load)
    assert e.value.key == "input_features[t].encoder.pretrained_model_name_or_path"


def test_rows_longer_than_the_model_do_not_log_transformers_overflow_warning(
    tiny_bert_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    long_row = " ".join(["the cat sat on the mat"] * 30)  # beyond the tiny model's 64 positions
    x, _ = _encode([long_row], tokenizer="hf_tokenizer", pretrained_model_name_or_path=str(tiny_bert_dir))
    assert x.shape == (1, 64)
    assert not [r for r in caplog.records if "sequence length is longer" in r.getMessage()]


def test_validate_line_names_vocabulary_percentiles_and_cut_rows() -> None:
    stats = {"vocab_size": 120.0, "length_p50": 7.0, "length_p90": 12.5, "length_p99": 20.0, "length_max": 31.0}
    line = text_stats_line("gloss", {**stats, "truncated": 3.0}, 24)
    assert line == (
        "text gloss: vocabulary 120 tokens; tokens per training row p50 7, p90 12.5, p99 20, max 31; "
        "rows padded or cut to 24 (3 training row(s) cut at max_sequence_length)"
    )
    meta = {
        "gloss": SimpleNamespace(type="text", shape=(24,), stats=stats),
        "photo": SimpleNamespace(type="image", shape=(3, 32, 48), stats={}),
        "n": SimpleNamespace(type="number", shape=(), stats={}),
    }
    lines = feature_stats_lines(meta, ["n", "photo", "gloss"])
    assert lines[0] == "image photo: 32x48 pixels, 3 channel(s)" and lines[1].endswith("(none cut)")


def test_hpo_validate_prints_the_text_stats_of_a_ludwig_config() -> None:
    from ludwig_hpo.driver.validate import validate_lines

    lines = validate_lines(FIXTURES / "features_text.yaml", FIXTURES / "features.csv")
    text = [line for line in lines if line.startswith("data: text review:")]
    assert len(text) == 1 and "vocabulary" in text[0] and "p99" in text[0], lines


def test_rule_errors_are_value_errors() -> None:
    assert issubclass(RuleError, ValueError)


def test_a_bert_encoder_reads_the_ids_of_its_models_tokenizer(tiny_bert_dir: Path) -> None:
    from transformers import AutoTokenizer

    feat = TextInputFeature.model_validate(
        {"name": "t", "type": "text", "encoder": {"type": "bert", "pretrained_model_name_or_path": str(tiny_bert_dir)}}
    )
    assert feat.preprocessing.tokenizer == "space_punct"  # as written; the encoder decides
    s = pd.Series(["The cat sat", "a dog chased the ball"], name="t")
    x, m = encode_text(feat, s, "input_features[t]", np.arange(2), DataOrigin.of(pd.DataFrame({"t": s})))
    tok = AutoTokenizer.from_pretrained(str(tiny_bert_dir))
    want = tok(["The cat sat", "a dog chased the ball"])["input_ids"]
    assert x[1].tolist() == want[1] and x[0].tolist()[: len(want[0])] == want[0]
    assert m.stats["padding_id"] == tok.pad_token_id and len(m.vocab) == len(tok)


def test_ludwigs_old_text_keys_are_upgraded_with_a_warning_each(tmp_path: Path) -> None:
    from ludwig_hpo.config import load_sweep

    text = SWEEP.format(preprocessing="{word_tokenizer: space, word_most_common: 50}") + (
        "preprocessing:\n  text: {lowercase: false}\n"
    )
    (tmp_path / "s.yaml").write_text(text, encoding="utf-8")
    loaded = load_sweep(tmp_path / "s.yaml")
    p = loaded.config.input_features[0].preprocessing
    assert (p.tokenizer, p.most_common, p.lowercase) == ("space", 50, False)
    warned = " ".join(loaded.warnings)
    assert "word_tokenizer" in warned and "word_most_common" in warned and "defaults.text" in warned


def test_a_config_with_text_defaults_pickles_for_the_workers(tmp_path: Path) -> None:
    import pickle

    from ludwig_hpo.config import load_sweep

    text = (
        SWEEP.format(preprocessing="{}")
        + "defaults:\n  text: {preprocessing: {tokenizer: space}, encoder: {type: rnn}}\n"
    )
    (tmp_path / "s.yaml").write_text(text, encoding="utf-8")
    cfg = load_sweep(tmp_path / "s.yaml").config
    again = pickle.loads(pickle.dumps(cfg))
    assert again == cfg and again.input_features[0].encoder.type == "rnn"


RETOKENIZE = """\
name: s
dataset: {{source: data.csv}}
input_features:
  - {{name: t, type: text, encoder: {encoder}}}
output_features:
  - {{name: y, type: category}}
hyperopt:
  parameters:
    {path}: {{space: choice, categories: {values}}}
"""


@pytest.mark.parametrize(
    ("encoder", "path", "values", "refused"),
    [
        ("{type: bert, pretrained_model_name_or_path: owner/a}", "t.encoder.pretrained_model_name_or_path",
         "[owner/a, owner/b]", "'owner/b'"),
        ("{type: parallel_cnn}", "t.encoder.type", "[parallel_cnn, bert]", "'bert'"),
        ("{type: parallel_cnn}", "t.encoder.type", "[parallel_cnn, rnn]", None),
        ("{type: bert, pretrained_model_name_or_path: owner/a}", "t.encoder.trainable", "[true, false]", None),
    ],
)  # fmt: skip
def test_a_search_that_would_change_a_text_features_tokenizer_is_refused(
    tmp_path: Path, encoder: str, path: str, values: str, refused: str | None
) -> None:
    from ludwig_hpo.config import load_sweep
    from ludwig_hpo.errors import ConfigError

    (tmp_path / "s.yaml").write_text(RETOKENIZE.format(encoder=encoder, path=path, values=values), encoding="utf-8")
    if refused is None:
        load_sweep(tmp_path / "s.yaml")
        return
    with pytest.raises(ConfigError) as e:
        load_sweep(tmp_path / "s.yaml")
    assert e.value.key == f'hyperopt.parameters."{path}"' and f"value {refused} changes the tokenizer" in str(e.value)


@pytest.mark.parametrize(
    "encoder",
    [
        {"type": "parallel_cnn", "embedding_size": 8, "num_filters": 4, "num_fc_layers": 1, "output_size": 6},
        {"type": "embed", "embedding_size": 6},
        {"type": "stacked_cnn", "embedding_size": 8, "num_filters": 4, "num_fc_layers": 1, "output_size": 6},
        {"type": "stacked_parallel_cnn", "embedding_size": 8, "num_filters": 4, "num_fc_layers": 1, "output_size": 6},
        {"type": "rnn", "embedding_size": 8, "state_size": 6, "cell_type": "lstm", "bidirectional": True},
        {"type": "cnnrnn", "embedding_size": 8, "num_filters": 4, "state_size": 6, "cell_type": "gru"},
        {"type": "transformer", "embedding_size": 8, "hidden_size": 8, "num_heads": 2, "transformer_output_size": 8},
    ],
    ids=lambda e: e["type"],
)
def test_every_text_encoder_reads_the_prepared_ids(encoder) -> None:
    import torch

    from ludwig_hpo.model.encoders import build_encoder

    feat = TextInputFeature.model_validate({"name": "t", "type": "text", "encoder": encoder})
    s = pd.Series(["a small red fox ran far away from the old barn", "the dog", "birds sing"], name="t")
    x, m = encode_text(feat, s, "input_features[t]", np.arange(3), DataOrigin.of(pd.DataFrame({"t": s})))
    out = build_encoder(feat, m)(torch.as_tensor(x))
    assert out.shape[0] == 3 and torch.isfinite(out).all()
