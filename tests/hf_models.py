"""Tiny random-initialised Hugging Face models for tests, saved the way a downloaded model is.

There is no hub here: each builder writes a complete model folder (``config.json``, the weights,
the tokenizer or image processor) with ``save_pretrained`` and returns its path, which a test puts
in ``pretrained_model_name_or_path`` so the same loading code a user's hub id or folder takes runs.

Functions (import from ``tests.hf_models``; session fixtures of the same names in tests/conftest.py):

- ``train_wordpiece_tokenizer(sentences)`` -> ``PreTrainedTokenizerFast``: a lower-casing WordPiece
  tokenizer trained on the fly with BERT's special tokens ([PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3, [MASK] 4).
- ``save_tiny_bert(folder, sentences=SENTENCES, **config)`` -> Path: a BertModel (2 layers, hidden 32,
  2 heads, intermediate 64, 64 positions) with that tokenizer; ``config`` overrides BertConfig fields.
- ``save_tiny_distilbert(folder, sentences=SENTENCES)`` -> Path: a DistilBertModel (no pooler) alike.
- ``save_tiny_vit(folder, **config)`` -> Path: a ViTModel (image_size 32, patch 8, 3 channels,
  2 layers, hidden 32, 2 heads) with its image processor (resize to 32x32, ImageNet-style normalisation).
- ``train_byte_bpe_tokenizer(sentences)`` -> ``PreTrainedTokenizerFast``: a Llama-style byte-level BPE
  tokenizer (<pad> 0, <unk> 1, <s> 2, </s> 3; prepends <s>) trained on the sentences and the glosses data.
- ``save_tiny_llama(folder, sentences=SENTENCES, **config)`` -> Path: a LlamaForCausalLM (2 decoder
  layers, hidden 32, 4 heads, intermediate 64, 256 positions, vocabulary 512) with that tokenizer.

Fixtures: ``tiny_bert_dir``, ``tiny_distilbert_dir``, ``tiny_vit_dir``, ``tiny_llama_dir`` (session-scoped
folders).
Building one takes well under a second; transformers is imported on the first call only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: Enough words for a vocabulary of a few dozen tokens; tests tokenise sentences like these.
SENTENCES: tuple[str, ...] = (
    "the cat sat on the mat",
    "a dog chased the ball across the garden",
    "birds sing in the morning light",
    "the quick brown fox jumps over the lazy dog",
    "rain falls softly on the roof at night",
    "children play games in the park after school",
    "a tree grows tall beside the quiet river",
    "she reads a book while the kettle boils",
)

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def train_wordpiece_tokenizer(sentences: tuple[str, ...] | list[str] = SENTENCES, vocab_size: int = 120) -> Any:
    """A BERT-style fast tokenizer (lower-casing, WordPiece, ``[CLS] ... [SEP]`` template) trained on
    ``sentences``; returns a ``transformers.PreTrainedTokenizerFast`` with pad id 0."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS))
    tok.train_from_iterator(list(sentences), trainer=trainer)
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=64,
    )


def save_tiny_bert(folder: str | Path, sentences: tuple[str, ...] | list[str] = SENTENCES, **config: Any) -> Path:
    """Write a tiny random BertModel + its tokenizer to ``folder`` (created); returns the folder.
    The model's vocabulary is the tokenizer's; ``config`` overrides BertConfig fields."""
    import torch
    from transformers import BertConfig, BertModel

    folder = Path(folder)
    tokenizer = train_wordpiece_tokenizer(sentences)
    fields: dict[str, Any] = {
        "vocab_size": len(tokenizer),
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 64,
        "max_position_embeddings": 64,
        "pad_token_id": tokenizer.pad_token_id,
    }
    fields.update(config)
    torch.manual_seed(0)
    BertModel(BertConfig(**fields)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def save_tiny_distilbert(folder: str | Path, sentences: tuple[str, ...] | list[str] = SENTENCES) -> Path:
    """Write a tiny random DistilBertModel (no pooler) + a WordPiece tokenizer to ``folder``."""
    import torch
    from transformers import DistilBertConfig, DistilBertModel

    folder = Path(folder)
    tokenizer = train_wordpiece_tokenizer(sentences)
    cfg = DistilBertConfig(
        vocab_size=len(tokenizer), dim=32, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=64
    )
    torch.manual_seed(0)
    DistilBertModel(cfg).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def save_tiny_vit(folder: str | Path, **config: Any) -> Path:
    """Write a tiny random ViTModel (32x32 RGB images, 8x8 patches) + its image processor to
    ``folder``; returns the folder. ``config`` overrides ViTConfig fields."""
    import torch
    from transformers import ViTConfig, ViTModel
    from transformers.models.vit.image_processing_pil_vit import ViTImageProcessorPil

    folder = Path(folder)
    fields: dict[str, Any] = {
        "image_size": 32,
        "patch_size": 8,
        "num_channels": 3,
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 64,
    }
    fields.update(config)
    torch.manual_seed(0)
    ViTModel(ViTConfig(**fields)).save_pretrained(folder)
    size = int(fields["image_size"])
    ViTImageProcessorPil(size={"height": size, "width": size}).save_pretrained(folder)
    return folder


#: Special tokens of the tiny causal LM's tokenizer, in id order (pad 0, unk 1, bos 2, eos 3).
LLAMA_SPECIAL_TOKENS = ("<pad>", "<unk>", "<s>", "</s>")
_GLOSSES_CSV = Path(__file__).resolve().parents[1] / "sweeps" / "data" / "wordnet_glosses.csv"


def _llm_corpus(sentences: tuple[str, ...] | list[str]) -> list[str]:
    """``sentences`` plus every cell of the shipped WordNet glosses sweep data (when present), so
    the shipped LLM sweep's text tokenises into whole-ish words instead of single bytes."""
    import csv

    corpus = list(sentences)
    if _GLOSSES_CSV.is_file():
        with _GLOSSES_CSV.open(newline="", encoding="utf-8") as f:
            for row in csv.reader(f):
                corpus.extend(row)
    return corpus


def train_byte_bpe_tokenizer(sentences: tuple[str, ...] | list[str] = SENTENCES, vocab_size: int = 512) -> Any:
    """A Llama-style byte-level BPE fast tokenizer trained on ``sentences`` and the glosses data;
    returns a ``transformers.PreTrainedTokenizerFast`` (pad 0, unk 1, bos 2, eos 3) that prepends
    ``<s>`` to a single sequence (as Llama's does) and appends nothing."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(LLAMA_SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(_llm_corpus(sentences), trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A $B:1", special_tokens=[("<s>", tok.token_to_id("<s>"))]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        model_max_length=256,
    )


def save_tiny_llama(folder: str | Path, sentences: tuple[str, ...] | list[str] = SENTENCES, **config: Any) -> Path:
    """Write a tiny random LlamaForCausalLM (2 decoder layers, hidden 32, 4 heads, intermediate 64,
    256 positions) + a byte-level BPE tokenizer to ``folder`` (created); returns the folder.
    ``config`` overrides LlamaConfig fields."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    folder = Path(folder)
    tokenizer = train_byte_bpe_tokenizer(sentences)
    fields: dict[str, Any] = {
        "vocab_size": len(tokenizer),
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "intermediate_size": 64,
        "max_position_embeddings": 256,
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "tie_word_embeddings": False,
    }
    fields.update(config)
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(**fields)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
