"""Input features of the sweep file, one model per feature type, and their tagged union.
Each type's ``encoder`` is a tagged union of Ludwig's encoders for it, with Ludwig's default
encoder when ``encoder`` or its ``type`` is left out. Typed and frozen (pydantic); no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from pydantic import ConfigDict, Field, field_validator, model_validator

from ludwig_hpo.config.augmentation import Augmentation
from ludwig_hpo.config.base import RuleError, _Base, default_type
from ludwig_hpo.config.encoders import (
    CategoryOneHotEncoder,
    CategoryPassthroughEncoder,
    CategorySparseEncoder,
    DenseEncoder,
    EmbedEncoder,
    PassthroughEncoder,
    StackedCNNEncoder,
    UnsupportedImageEncoder,
)
from ludwig_hpo.config.encoders_hf import (
    ALBERTEncoder,
    AutoTransformerEncoder,
    BERTEncoder,
    CamemBERTEncoder,
    DistilBERTEncoder,
    ELECTRAEncoder,
    RoBERTaEncoder,
    UnsupportedHFTextEncoder,
    XLMRoBERTaEncoder,
)
from ludwig_hpo.config.encoders_image import (
    AutoVisionEncoder,
    CLIPEncoder,
    DINOv2Encoder,
    MLPMixerEncoder,
    ResNetEncoder,
    SigLIPEncoder,
    ViTEncoder,
    ViTLegacyEncoder,
    legacy_image_encoder,
)
from ludwig_hpo.config.encoders_sequence import (
    CNNRNNEncoder,
    ParallelCNNEncoder,
    RNNEncoder,
    SequenceEmbedEncoder,
    SequencePassthroughEncoder,
    SequenceStackedCNNEncoder,
    SequenceTransformerEncoder,
    StackedParallelCNNEncoder,
)
from ludwig_hpo.config.encoders_structured import (
    DateEmbedEncoder,
    DateWaveEncoder,
    H3EmbedEncoder,
    H3RNNEncoder,
    H3WeightedSumEncoder,
    SetEmbedEncoder,
)
from ludwig_hpo.config.feature_base import _Feature
from ludwig_hpo.config.preprocessing import (
    BinaryPreprocessing,
    CategoryPreprocessing,
    ImagePreprocessing,
    NumberPreprocessing,
)
from ludwig_hpo.config.text import TextPreprocessing, UnsupportedTextEncoder
from ludwig_hpo.config.type_preprocessing import (
    BagPreprocessing,
    DatePreprocessing,
    H3Preprocessing,
    SequencePreprocessing,
    SetPreprocessing,
    TimeseriesPreprocessing,
    VectorPreprocessing,
)

#: Feature types of Ludwig this platform does not train yet.
UNSUPPORTED_TYPES = ("audio",)

ScalarEncoder = Annotated[Union[PassthroughEncoder, DenseEncoder], Field(discriminator="type")]
CategoryEncoder = Annotated[
    Union[EmbedEncoder, CategorySparseEncoder, CategoryOneHotEncoder, CategoryPassthroughEncoder],
    Field(discriminator="type"),
]
SequenceEncoder = Annotated[
    Union[
        SequenceEmbedEncoder,
        ParallelCNNEncoder,
        SequenceStackedCNNEncoder,
        RNNEncoder,
        SequencePassthroughEncoder,
        StackedParallelCNNEncoder,
        CNNRNNEncoder,
        SequenceTransformerEncoder,
    ],
    Field(discriminator="type"),
]
TextEncoder = Annotated[
    Union[
        ParallelCNNEncoder,
        SequenceEmbedEncoder,
        SequenceStackedCNNEncoder,
        StackedParallelCNNEncoder,
        RNNEncoder,
        CNNRNNEncoder,
        SequenceTransformerEncoder,
        AutoTransformerEncoder,
        BERTEncoder,
        DistilBERTEncoder,
        RoBERTaEncoder,
        XLMRoBERTaEncoder,
        ALBERTEncoder,
        ELECTRAEncoder,
        CamemBERTEncoder,
        UnsupportedHFTextEncoder,
        UnsupportedTextEncoder,
    ],
    Field(discriminator="type"),
]
TimeseriesEncoder = Annotated[
    Union[
        ParallelCNNEncoder,
        SequenceStackedCNNEncoder,
        RNNEncoder,
        SequencePassthroughEncoder,
        DenseEncoder,
        StackedParallelCNNEncoder,
        CNNRNNEncoder,
        SequenceTransformerEncoder,
    ],
    Field(discriminator="type"),
]
ImageEncoder = Annotated[
    Union[
        StackedCNNEncoder,
        ResNetEncoder,
        ViTEncoder,
        MLPMixerEncoder,
        ViTLegacyEncoder,
        DINOv2Encoder,
        CLIPEncoder,
        SigLIPEncoder,
        AutoVisionEncoder,
        UnsupportedImageEncoder,
    ],
    Field(discriminator="type"),
]
DateEncoder = Annotated[Union[DateEmbedEncoder, DateWaveEncoder], Field(discriminator="type")]
H3Encoder = Annotated[Union[H3EmbedEncoder, H3WeightedSumEncoder, H3RNNEncoder], Field(discriminator="type")]


class _Input(_Feature):
    """What every input feature has besides its name and column: Ludwig's ``tied`` (sharing
    another feature's encoder weights) is not supported yet."""

    tied: str | None = None

    @field_validator("tied")
    @classmethod
    def _not_tied(cls, v: str | None) -> str | None:
        if v is not None:
            raise RuleError(
                f"tied (sharing the encoder of {v!r}) is not supported yet",
                fix="remove tied: each feature gets its own encoder",
            )
        return v


class NumberInputFeature(_Input):
    """A numeric column, fed as (batch, 1) floats after ``preprocessing``."""

    type: Literal["number"]
    encoder: ScalarEncoder = PassthroughEncoder()
    preprocessing: NumberPreprocessing = NumberPreprocessing()
    _fill = field_validator("encoder", mode="before")(default_type("passthrough"))


class BinaryInputFeature(_Input):
    """A column of two distinct values, fed as (batch, 1) floats of 0 and 1."""

    type: Literal["binary"]
    encoder: ScalarEncoder = PassthroughEncoder()
    preprocessing: BinaryPreprocessing = BinaryPreprocessing()
    _fill = field_validator("encoder", mode="before")(default_type("passthrough"))


class CategoryInputFeature(_Input):
    """A column of classes, fed as (batch,) ids (0 for a class unseen in the training split)."""

    type: Literal["category"]
    encoder: CategoryEncoder = EmbedEncoder()
    preprocessing: CategoryPreprocessing = CategoryPreprocessing()
    _fill = field_validator("encoder", mode="before")(default_type("dense"))


class ImageInputFeature(_Input):
    """A column of image files or arrays, fed as (batch, channels, height, width) floats after
    ``preprocessing``; ``augmentation`` (Ludwig's: false, true or a list of operations) changes
    the training batches only (see :mod:`ludwig_hpo.config.augmentation`)."""

    type: Literal["image"]
    encoder: ImageEncoder = StackedCNNEncoder()
    preprocessing: ImagePreprocessing = ImagePreprocessing()
    augmentation: Augmentation = ()
    _fill = field_validator("encoder", mode="before")(default_type("stacked_cnn"))
    _legacy = field_validator("encoder", mode="before")(legacy_image_encoder)


class SetInputFeature(_Input):
    """A column of token strings, fed as (batch, vocabulary) multi-hot floats (index 0: unknown tokens)."""

    type: Literal["set"]
    encoder: SetEmbedEncoder = SetEmbedEncoder()
    preprocessing: SetPreprocessing = SetPreprocessing()
    _fill = field_validator("encoder", mode="before")(default_type("embed"))


class BagInputFeature(_Input):
    """A column of token strings, fed as (batch, vocabulary) token counts (index 0: unknown tokens)."""

    type: Literal["bag"]
    encoder: SetEmbedEncoder = SetEmbedEncoder()
    preprocessing: BagPreprocessing = BagPreprocessing()
    _fill = field_validator("encoder", mode="before")(default_type("embed"))


class VectorInputFeature(_Input):
    """A column of equal-length number lists, fed as (batch, size) floats."""

    type: Literal["vector"]
    encoder: ScalarEncoder = DenseEncoder()
    preprocessing: VectorPreprocessing = VectorPreprocessing()
    _fill = field_validator("encoder", mode="before")(default_type("dense"))


class TimeseriesInputFeature(_Input):
    """A column of number series, fed as (batch, length) floats, padded with ``padding_value``."""

    type: Literal["timeseries"]
    encoder: TimeseriesEncoder = ParallelCNNEncoder()
    preprocessing: TimeseriesPreprocessing = TimeseriesPreprocessing()
    _fill = field_validator("encoder", mode="before")(default_type("parallel_cnn"))


class DateInputFeature(_Input):
    """A column of dates, fed as (batch, 9) ints: year, month, day, weekday, day of the year,
    hour, minute, second, second of the day (Ludwig's components)."""

    type: Literal["date"]
    encoder: DateEncoder = DateEmbedEncoder()
    preprocessing: DatePreprocessing = DatePreprocessing()
    _fill = field_validator("encoder", mode="before")(default_type("embed"))


class SequenceInputFeature(_Input):
    """A column of token strings, fed as (batch, length) token ids (0: padding, 1: unknown)."""

    type: Literal["sequence"]
    encoder: SequenceEncoder = SequenceEmbedEncoder()
    preprocessing: SequencePreprocessing = SequencePreprocessing()
    _fill = field_validator("encoder", mode="before")(default_type("embed"))


class TextInputFeature(_Input):
    """A column of text, fed as (batch, length) int64 token ids (:mod:`ludwig_hpo.data.text`:
    Ludwig's vocabulary, or a Hugging Face tokenizer's)."""

    type: Literal["text"]
    encoder: TextEncoder = ParallelCNNEncoder()
    preprocessing: TextPreprocessing = TextPreprocessing()
    _fill = field_validator("encoder", mode="before")(default_type("parallel_cnn"))

    @model_validator(mode="after")
    def _no_cached_embeddings(self) -> TextInputFeature:
        # Ludwig turns cache_encoder_embeddings off for an encoder it cannot cache (one trained
        # from scratch), so only a pretrained encoder would read it
        if self.preprocessing.cache_encoder_embeddings and getattr(self.encoder, "pretrained_model_name_or_path", None):
            raise RuleError(
                "preprocessing.cache_encoder_embeddings is not supported yet (the encoder runs on every batch)",
                fix="remove cache_encoder_embeddings",
            )
        # a pretrained encoder cuts each row to its max_sequence_length from the right, where
        # padding: left puts the text
        if self.preprocessing.padding == "left" and getattr(self.encoder, "pretrained_model_name_or_path", None):
            if getattr(self.encoder, "max_sequence_length", None) is not None:
                raise RuleError(
                    "encoder.max_sequence_length with preprocessing.padding: left would cut the text, not the padding",
                    fix="set preprocessing.max_sequence_length instead, or padding: right",
                )
        return self


class H3InputFeature(_Input):
    """A column of h3 cell indexes, fed as (batch, 19) ints: mode, edge, resolution, base cell
    and 15 child digits (7 past the cell's resolution), Ludwig's components."""

    type: Literal["h3"]
    encoder: H3Encoder = H3EmbedEncoder()
    preprocessing: H3Preprocessing = H3Preprocessing()
    _fill = field_validator("encoder", mode="before")(default_type("embed"))


class UnsupportedInputFeature(_Base):
    """A Ludwig feature type not trained yet (audio): refused with one line naming the
    feature, before any other error about it."""

    model_config = ConfigDict(extra="allow", frozen=True)
    type: Literal["audio"]

    @model_validator(mode="before")
    @classmethod
    def _refuse(cls, data: Any) -> Any:
        name = data.get("name") if isinstance(data, dict) else None
        kind = data.get("type") if isinstance(data, dict) else "?"
        raise RuleError(f"type {kind} is not supported yet (input feature {name!r})", fix="remove the feature")


if TYPE_CHECKING:  # a validated feature is never an UnsupportedInputFeature (it always raises)
    InputFeature = Annotated[
        Union[
            NumberInputFeature,
            BinaryInputFeature,
            CategoryInputFeature,
            ImageInputFeature,
            SetInputFeature,
            BagInputFeature,
            VectorInputFeature,
            TimeseriesInputFeature,
            DateInputFeature,
            SequenceInputFeature,
            TextInputFeature,
            H3InputFeature,
        ],
        Field(discriminator="type"),
    ]
else:
    InputFeature = Annotated[
        Union[
            NumberInputFeature,
            BinaryInputFeature,
            CategoryInputFeature,
            ImageInputFeature,
            SetInputFeature,
            BagInputFeature,
            VectorInputFeature,
            TimeseriesInputFeature,
            DateInputFeature,
            SequenceInputFeature,
            TextInputFeature,
            H3InputFeature,
            UnsupportedInputFeature,
        ],
        Field(discriminator="type"),
    ]

#: Each input feature model, by its ``type``.
INPUT_MODELS: dict[str, type[_Feature]] = {
    m.model_fields["type"].annotation.__args__[0]: m  # type: ignore[union-attr]  # a Literal's one value
    for m in (
        NumberInputFeature,
        BinaryInputFeature,
        CategoryInputFeature,
        ImageInputFeature,
        SetInputFeature,
        BagInputFeature,
        VectorInputFeature,
        TimeseriesInputFeature,
        DateInputFeature,
        SequenceInputFeature,
        TextInputFeature,
        H3InputFeature,
    )
}
