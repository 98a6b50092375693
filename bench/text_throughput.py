"""Does the worker training loop keep up with plain PyTorch on a text model? Prints, per tiny
text encoder, the tokens/s of :func:`ludwig_hpo.train.loop.train_loop` (a search trial: per-epoch
validation metrics and the epoch's checkpoint, as in a sweep) and of a plain hand-written
PyTorch loop (``bench/train_loop.py``'s) on the same model, optimizer, gradient clipping (the
trainer's: Ludwig's default clips the global norm to 0.5, about 4% of a step of these tiny
encoders), rows, batch size and epochs, one worker process, one intra-op thread.

The task: WordNet noun glosses -> their lexicographer file (``sweeps/data/wordnet_glosses.csv``,
the first ``--rows`` rows), a ``text`` input of at most ``--length`` tokens. The encoders:

- ``transformer``: our ``transformer`` text encoder (Ludwig's), 2 blocks of width 32, 2 heads;
- ``bert``: a Hugging Face ``BertModel`` of 2 layers, width 32, 2 heads, random weights and a
  WordPiece tokenizer trained on the glosses, saved to a temporary folder and read through
  ``pretrained_model_name_or_path`` as a user's model is (``trainable: true``).

tokens/s = the training rows' non-padding tokens stepped over (epochs x rows, a last batch of a
single row left out as both loops do) / wall seconds of the whole run (model build to last
epoch). The ratio is the median, over ``--repeats`` pairs of back-to-back runs in alternating
order, of each pair's ratio (load drifts between pairs far more than within one; a run is
about a second, so on a loaded machine single pairs range from 0.65 to 1.25 and the median
needs ``--repeats`` of 15 or more to settle).

Last line: ``ratio_vs_plain=<x>`` (the worse encoder's; goal >= 0.9); the figures also go to
``bench/results/text_throughput.json`` (see ``bench/_results.py``). Run:
``python bench/text_throughput.py`` (``--encoders transformer`` for ours alone).
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from train_loop import ours, plain, trained_samples

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data import PreparedData, prepare
from ludwig_hpo.train.lengths import padding_id

from _loops import paired_runs, ratio_quartiles
from _results import BenchRun, Figure, parser

ROOT = Path(__file__).resolve().parents[1]
GLOSSES = ROOT / "sweeps" / "data" / "wordnet_glosses.csv"
ENCODERS = ("transformer", "bert")


def save_tiny_bert(folder: Path, texts: list[str]) -> Path:
    """A random 2-layer BertModel (width 32) and a WordPiece tokenizer trained on ``texts``,
    saved to ``folder`` as a downloaded model is."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # the bench's output is its figures

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(texts, trainer=trainers.WordPieceTrainer(vocab_size=2000, special_tokens=specials))
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=128,
    )
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(fast),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        pad_token_id=fast.pad_token_id,
    )
    BertModel(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def config(encoder: str, batch_size: int, epochs: int, length: int, model_dir: Path | None) -> SweepConfig:
    """The trial config of one encoder (one worker, a fixed batch size, no early stop)."""
    if encoder == "bert":
        assert model_dir is not None
        enc: dict[str, Any] = {
            "type": "bert",
            "pretrained_model_name_or_path": str(model_dir),
            "trainable": True,
            "reduce_output": "mean",
            "max_sequence_length": length,
        }
        prep: dict[str, Any] = {"max_sequence_length": length}
    else:
        enc = {"type": "transformer", "hidden_size": 32, "num_heads": 2, "num_layers": 2, "embedding_size": 32}
        prep = {"tokenizer": "space_punct", "lowercase": True, "max_sequence_length": length}
    return SweepConfig.model_validate(
        {
            "name": f"text-throughput-{encoder}",
            "dataset": {"source": str(GLOSSES), "split": {"train": 0.8, "validation": 0.1, "test": 0.1, "seed": 42}},
            "input_features": [{"name": "gloss", "type": "text", "preprocessing": prep, "encoder": enc}],
            "output_features": [{"name": "label", "type": "category"}],
            "trainer": {
                "epochs": epochs,
                "batch_size": batch_size,
                "learning_rate": 1e-3,
                "early_stop": -1,
                "learning_rate_scaling": "constant",
            },
            "backend": {"num_workers": 1},
            "hyperopt": {
                "goal": "maximize",
                "metric": "accuracy",
                "output_feature": "label",
                "parameters": {"trainer.learning_rate": {"space": "loguniform", "lower": 1e-4, "upper": 1e-2}},
            },
        }
    )


def trained_tokens(cfg: SweepConfig, data: PreparedData) -> float:
    """Non-padding tokens stepped over by one run: the mean tokens of a training row x the
    samples :func:`trained_samples` counts."""
    meta = data.meta["gloss"]
    ids = data.inputs["gloss"][data.splits["train"]]
    return float((ids != padding_id(meta)).sum(axis=1).mean()) * trained_samples(cfg, data)


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--batch-size", type=int, default=32, help="per-worker batch size (default 32)")
    ap.add_argument("--repeats", type=int, default=15, help="measured pairs of runs per encoder (default 15)")
    ap.add_argument("--epochs", type=int, default=2, help="epochs per run (default 2)")
    ap.add_argument("--rows", type=int, default=1200, help="glosses used (default 1200)")
    ap.add_argument("--length", type=int, default=32, help="max_sequence_length (default 32)")
    ap.add_argument("--encoders", nargs="+", choices=ENCODERS, default=list(ENCODERS), help="encoders to measure")
    args = ap.parse_args()
    run = BenchRun("text_throughput", args)
    torch.set_num_threads(1)
    frame = pd.read_csv(GLOSSES).head(args.rows)
    ratios, details = [], {}
    with tempfile.TemporaryDirectory(prefix="text-throughput-") as tmp:
        model_dir = save_tiny_bert(Path(tmp), frame["gloss"].tolist()) if "bert" in args.encoders else None
        for encoder in args.encoders:
            cfg = config(encoder, args.batch_size, args.epochs, args.length, model_dir)
            data = prepare(frame, cfg)
            tokens = trained_tokens(cfg, data)
            times, pair_ratios = paired_runs(ours, plain, cfg, data, args.repeats)
            ours_tps = tokens / statistics.median(times["ours"])
            plain_tps = tokens / statistics.median(times["plain"])
            ratio, q1, q3 = ratio_quartiles(pair_ratios)
            ratios.append(ratio)
            width = data.inputs["gloss"].shape[1]
            print(
                f"{encoder}: {len(data.splits['train'])} training rows of {width} padded tokens "
                f"({tokens / trained_samples(cfg, data):.1f} real), batch size {args.batch_size}, "
                f"{args.epochs} epochs; worker loop {ours_tps:.0f} tokens/s, plain loop {plain_tps:.0f} "
                f"tokens/s (medians of {args.repeats}); ratio {ratio:.3f} (median of the pairs' ratios; "
                f"quartiles {q1:.3f}..{q3:.3f})",
                flush=True,
            )
            details[encoder] = {
                "padded_length": width,
                "tokens_per_run": tokens,
                "worker_loop_tokens_per_s": ours_tps,
                "plain_loop_tokens_per_s": plain_tps,
                "ratio": ratio,
                "ratio_quartiles": [q1, q3],
                "pair_ratios": pair_ratios,
            }
    run.finish({"ratio_vs_plain": Figure(min(ratios), ".3f")}, details)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
