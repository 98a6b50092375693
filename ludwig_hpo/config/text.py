"""The ``preprocessing`` section of text input features, with Ludwig's keys and defaults
(``ludwig/schema/features/preprocessing/text.py``), and the text tokenizers' names. Typed,
frozen; no I/O.

Text differs from ``sequence`` in Ludwig's defaults only: the ``space_punct`` tokenizer,
``lowercase: true``, and the Hugging Face tokenizer (``tokenizer: hf_tokenizer`` with
``pretrained_model_name_or_path``), which a pretrained Hugging Face encoder imposes (Ludwig's
rule: such an encoder reads the ids of its own tokenizer).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from ludwig_hpo.config.base import RuleError, _Base
from ludwig_hpo.config.type_preprocessing import PADDING_SYMBOL, TOKENIZERS, UNKNOWN_SYMBOL, _Missing

#: The Hugging Face tokenizer's name in Ludwig.
HF_TOKENIZER = "hf_tokenizer"

#: Every tokenizer a text feature may name here.
TEXT_TOKENIZERS = (*TOKENIZERS, HF_TOKENIZER)

#: Ludwig's spaCy tokenizers: ``<language>_tokenize``, ``<language>_lemmatize`` and their
#: ``_filter`` / ``_remove_stopwords`` forms (spaCy is not a dependency here).
_SPACY = re.compile(
    r"(english|italian|spanish|german|french|portuguese|dutch|greek|norwegian|lithuanian|danish|polish|"
    r"romanian|japanese|chinese|multi)_(tokenize|lemmatize)(_filter|_remove_stopwords)?"
)
#: Ludwig's torchtext tokenizers (torchtext is not a dependency here).
_TORCHTEXT = ("sentencepiece_tokenizer", "clip_tokenizer", "gpt2bpe_tokenizer", "sentencepiece", "clip", "gpt2bpe")


def _text_tokenizer(value: Any) -> Any:
    if not isinstance(value, str) or value in TEXT_TOKENIZERS:
        return value
    if _SPACY.fullmatch(value):
        raise RuleError(
            f"tokenizer {value!r} is not supported (Ludwig's spaCy tokenizers need spaCy and its language models)",
            fix="use space_punct (Ludwig's default for text) or hf_tokenizer with pretrained_model_name_or_path",
        )
    if value in _TORCHTEXT:
        raise RuleError(
            f"tokenizer {value!r} is not supported (Ludwig's torchtext tokenizers need torchtext)",
            fix="use hf_tokenizer with pretrained_model_name_or_path, or space_punct",
        )
    raise RuleError(f"unknown tokenizer {value!r}", fix=f"use one of: {', '.join(TEXT_TOKENIZERS)}")


class TextPreprocessing(_Missing):
    """A cell is a string, lower-cased (``lowercase``), split by ``tokenizer`` and read in order as
    ids: the ``most_common`` training tokens (or the words of ``vocab_file``) after Ludwig's four
    special symbols, ``<EOS>`` 0, ``<SOS>`` 1, ``padding_symbol`` 2, ``unknown_symbol`` 3; each row
    is ``<SOS>`` + its tokens + ``<EOS>``, cut (from the end) or padded (``padding``: right or left)
    to the longest training row with both symbols, at most ``max_sequence_length`` (null: no cap
    but the longest training row, Ludwig's meaning).

    ``tokenizer: hf_tokenizer`` uses the Hugging Face tokenizer of ``pretrained_model_name_or_path``
    (a hub id or a local folder): its vocabulary, its own special tokens (no ``<SOS>`` /
    ``<EOS>`` added) and its padding id; ``most_common``, ``vocab_file``, ``padding_symbol`` and
    ``unknown_symbol`` are then the tokenizer's (Ludwig's rule).
    """

    tokenizer: str = "space_punct"
    pretrained_model_name_or_path: str | None = None
    vocab_file: str | None = None
    max_sequence_length: int | None = Field(default=256, ge=1)
    most_common: int = Field(default=20000, ge=1)
    padding_symbol: str = PADDING_SYMBOL
    unknown_symbol: str = UNKNOWN_SYMBOL
    padding: Literal["right", "left"] = "right"
    lowercase: bool = True
    fill_value: str = UNKNOWN_SYMBOL
    #: Ludwig computes this itself from the data; a value written here has no effect, as in Ludwig.
    computed_fill_value: str = UNKNOWN_SYMBOL
    ngram_size: int = Field(default=2, ge=1)
    cache_encoder_embeddings: bool = False
    _t = field_validator("tokenizer", mode="before")(_text_tokenizer)

    @model_validator(mode="after")
    def _hf_needs_a_model(self) -> TextPreprocessing:
        if self.tokenizer == HF_TOKENIZER and not self.pretrained_model_name_or_path:
            raise RuleError(
                "tokenizer hf_tokenizer needs pretrained_model_name_or_path (the tokenizer's hub id or folder)",
                fix="set preprocessing.pretrained_model_name_or_path, or use tokenizer space_punct",
            )
        if self.tokenizer == HF_TOKENIZER and self.vocab_file is not None:
            raise RuleError(
                "vocab_file is not read with tokenizer hf_tokenizer (the vocabulary is the pretrained tokenizer's)",
                fix="remove vocab_file, or use a built-in tokenizer such as space_punct",
            )
        if self.pretrained_model_name_or_path and self.tokenizer != HF_TOKENIZER:
            raise RuleError(
                f"pretrained_model_name_or_path is read only with tokenizer hf_tokenizer (tokenizer is {self.tokenizer!r})",
                fix="set preprocessing.tokenizer: hf_tokenizer, or remove pretrained_model_name_or_path",
            )
        if self.padding_symbol == self.unknown_symbol:
            raise RuleError(
                f"padding_symbol and unknown_symbol are both {self.padding_symbol!r}",
                fix="give them different strings",
            )
        return self

    def with_hf_tokenizer(self, pretrained: str) -> TextPreprocessing:
        """This section with the Hugging Face tokenizer of ``pretrained`` (what a pretrained Hugging
        Face encoder imposes, as Ludwig's ``set_fixed_preprocessing_params``). Pure."""
        fields = {**self.model_dump(exclude={"tokenizer", "pretrained_model_name_or_path", "vocab_file"})}
        return TextPreprocessing(**fields, tokenizer=HF_TOKENIZER, pretrained_model_name_or_path=pretrained)


def text_preprocessing(feat: Any) -> TextPreprocessing:
    """A text feature's preprocessing as its text is read: a pretrained Hugging Face encoder
    (an encoder with ``pretrained_model_name_or_path``) imposes its own tokenizer (Ludwig's
    rule). Pure."""
    pretrained = getattr(feat.encoder, "pretrained_model_name_or_path", None)
    prep: TextPreprocessing = feat.preprocessing
    return prep.with_hf_tokenizer(pretrained) if isinstance(pretrained, str) and pretrained else prep


def retokenized_feature(base: Any, trial: Any) -> str | None:
    """The first text input feature that a trial's config (``trial``, a validated sweep config)
    would tokenise otherwise than ``base`` does (an encoder searched between models with
    different tokenizers, or between a pretrained encoder and a built-in one), or None. The text
    is prepared once per sweep, from ``base``, so such a trial would read another tokenizer's
    ids. Pure; runs in the driver."""
    mine = {f.name: f for f in trial.input_features}
    for feat in base.input_features:
        other = mine.get(feat.name)
        if feat.type == "text" and other is not None and text_preprocessing(feat) != text_preprocessing(other):
            return str(feat.name)
    return None


class UnsupportedTextEncoder(_Base):
    """Ludwig's text encoders this platform does not build yet: refused in one line (the
    Hugging Face ones are in :mod:`ludwig_hpo.config.encoders_hf`)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    _supported: ClassVar[str] = (
        "parallel_cnn (Ludwig's default), embed, stacked_cnn, stacked_parallel_cnn, rnn, cnnrnn, transformer, "
        "or a pretrained one (auto_transformer, bert, distilbert, roberta, ...)"
    )
    type: Literal["tf_idf", "passthrough", "deberta"]

    @model_validator(mode="before")
    @classmethod
    def _refuse(cls, data: Any) -> Any:
        kind = data.get("type") if isinstance(data, dict) else data
        raise RuleError(f"text encoder type {kind!r} is not supported yet", fix=f"use {cls._supported}")
