"""Does the worker training loop keep up with a plain transformers + peft loop on a causal LM?
Prints the training tokens/s of :func:`ludwig_hpo.train.loop.train_loop` running a
``model_type: llm`` search trial with a LoRA adapter (per-epoch validation metrics and the
epoch's checkpoint, as in a sweep) and of a plain hand-written loop on the same model, adapter,
optimizer, gradient clipping (the trainer's), prepared rows, batch size and epochs: one worker
process, one intra-op thread.

The model: a random-initialised ``LlamaForCausalLM`` (``--layers`` decoder layers of width
``--hidden``, 4 heads) and a byte-level BPE tokenizer trained on the data, saved with
``save_pretrained`` to a temporary folder and read through ``base_model`` as a user's model is.
The task: ``sweeps/llm_lora.yaml``'s, WordNet lemma -> gloss (``sweeps/data/wordnet_definitions.csv``,
the first ``--rows`` rows, the prompt ``Define the {pos} '{lemma}':``), LoRA r 8 on ``q_proj`` and
``v_proj``; no generated-output metrics (``trainer.eval_generation_samples: 0``: this measures
training).

The plain loop is what a user writes with transformers and peft: ``get_peft_model`` on a copy
of the base model (loaded once, as the worker loop's per-process cache keeps it), AdamW on the
trainable parameters, shuffled rows of the same prepared tensors, each batch cut to its longest
row (a padding collator's work), ``model(input_ids, attention_mask, labels)``, backward, the
trainer's clipping, step; the validation loss over target tokens after every epoch.

tokens/s = the training rows' non-padding tokens (prompt + target + EOS) stepped over (epochs x
rows, a last batch of a single row left out as both loops do) / wall seconds of the whole run
(adapter build to last epoch). The ratio is the median, over ``--repeats`` pairs of back-to-back
runs in alternating order, of each pair's ratio.

Last line: ``tokens_per_s=<x> plain_tokens_per_s=<y> ratio_vs_plain=<z>`` (medians; goal
``ratio_vs_plain`` >= 0.9); the figures also go to ``bench/results/llm_throughput.json`` (see ``bench/_results.py``).
Run: ``python bench/llm_throughput.py``.
"""

from __future__ import annotations

import copy
import math
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ludwig_hpo.config.schema import SweepConfig
from ludwig_hpo.data import PreparedData, prepare
from ludwig_hpo.train.job import Job
from ludwig_hpo.train.loop import train_loop

from _loops import epoch_batches, optimizer_step, paired_runs, ratio_quartiles
from _results import BenchRun, Figure, parser

ROOT = Path(__file__).resolve().parents[1]
DEFINITIONS = ROOT / "sweeps" / "data" / "wordnet_definitions.csv"
TEMPLATE = "Define the {pos} '{lemma}':"
SPECIALS = ("<pad>", "<unk>", "<s>", "</s>")


def save_tiny_llama(folder: Path, texts: list[str], layers: int, hidden: int) -> Path:
    """A random ``LlamaForCausalLM`` (``layers`` decoder layers of width ``hidden``, 4 heads,
    MLP width 2 x ``hidden``, 256 positions) and a byte-level BPE tokenizer (2,000 ids) trained
    on ``texts``, saved to ``folder`` as a downloaded model is. Returns the folder."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # the bench's output is its figures
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=2000, special_tokens=list(SPECIALS), initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(texts, trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", tok.token_to_id("<s>"))]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        intermediate_size=2 * hidden,
        max_position_embeddings=256,
        pad_token_id=fast.pad_token_id,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        tie_word_embeddings=False,
    )
    LlamaForCausalLM(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def config(model_dir: Path, batch_size: int, epochs: int) -> SweepConfig:
    """The trial config (one worker, a fixed batch size, no early stop, no generation)."""
    return SweepConfig.model_validate(
        {
            "name": "llm-throughput",
            "model_type": "llm",
            "base_model": str(model_dir),
            "dataset": {
                "source": str(DEFINITIONS),
                "split": {"train": 0.8, "validation": 0.1, "test": 0.1, "seed": 42},
            },
            "prompt": {"template": TEMPLATE},
            "input_features": [{"name": "lemma", "type": "text"}],
            "output_features": [{"name": "gloss", "type": "text"}],
            "adapter": {"type": "lora", "r": 8, "alpha": 16, "dropout": 0.05, "target_modules": ["q_proj", "v_proj"]},
            "trainer": {
                "type": "finetune",
                "epochs": epochs,
                "batch_size": batch_size,
                "learning_rate": 2e-4,
                "early_stop": -1,
                "learning_rate_scaling": "constant",
                "eval_generation_samples": 0,
            },
            "backend": {"num_workers": 1},
            "hyperopt": {
                "goal": "minimize",
                "metric": "loss",
                "output_feature": "gloss",
                "parameters": {"trainer.learning_rate": {"space": "loguniform", "lower": 1e-4, "upper": 1e-3}},
            },
        }
    )


def trained_rows(cfg: SweepConfig, data: PreparedData) -> int:
    """Rows stepped over by one run: every training row each epoch, except a last batch of a
    single row (both loops leave that one out)."""
    rows = len(data.splits["train"])
    return cfg.trainer.epochs * (rows - (1 if rows % cfg.trainer.batch_size == 1 else 0))


def pad_id(data: PreparedData) -> int:
    """The tokenizer's padding id, as the prepared output's stats hold it."""
    (meta,) = [m for m in data.meta.values() if m.type == "text" and "pad_id" in m.stats]
    return int(meta.stats["pad_id"])


def trained_tokens(cfg: SweepConfig, data: PreparedData) -> float:
    """Non-padding tokens stepped over by one run: a training row's mean x :func:`trained_rows`."""
    ids = data.inputs["lemma"][data.splits["train"]]
    return float((ids != pad_id(data)).sum(axis=1).mean()) * trained_rows(cfg, data)


def ours(cfg: SweepConfig, data: PreparedData) -> float:
    """Wall seconds of one search-trial run of the platform's worker loop."""
    t = time.perf_counter()
    train_loop(cfg, data, Job(), lambda metrics, checkpoint_dir: None)
    return time.perf_counter() - t


class Plain:
    """The hand-written transformers + peft loop; the base model is loaded once (``__init__``)
    and copied per run, as the worker loop's per-process base-model cache does."""

    def __init__(self, cfg: SweepConfig, data: PreparedData) -> None:
        from transformers import AutoModelForCausalLM

        self.base = AutoModelForCausalLM.from_pretrained(str(cfg.base_model))
        self.pad = pad_id(data)

    def __call__(self, cfg: SweepConfig, data: PreparedData) -> float:
        """Wall seconds of one run (see the module docstring)."""
        import peft

        t = time.perf_counter()
        torch.manual_seed(cfg.trainer.seed)
        assert cfg.adapter is not None
        kwargs = {**cfg.adapter.peft_kwargs(), "task_type": "CAUSAL_LM"}
        lora = getattr(peft, cfg.adapter.peft_class_name)(**kwargs)
        model = peft.get_peft_model(copy.deepcopy(self.base), lora)
        params = [p for p in model.parameters() if p.requires_grad]
        o = cfg.trainer.optimizer
        cls = torch.optim.AdamW if o.type == "adamw" else torch.optim.Adam
        opt = cls(params, lr=cfg.trainer.learning_rate, weight_decay=o.weight_decay)
        clip = cfg.trainer.gradient_clipping
        x = torch.from_numpy(data.inputs["lemma"])
        y = torch.from_numpy(data.targets["gloss"])
        train = torch.from_numpy(data.splits["train"])
        val = torch.from_numpy(data.splits["validation"])
        bs = cfg.trainer.batch_size
        ebs = cfg.trainer.eval_batch_size or bs
        for _ in range(cfg.trainer.epochs):
            model.train()
            for idx in epoch_batches(train, bs):
                ids, labels = self._batch(x, y, idx)
                loss = model(input_ids=ids, attention_mask=(ids != self.pad).long(), labels=labels).loss
                optimizer_step(opt, params, loss, clip)
            model.eval()
            with torch.no_grad():
                total, count = 0.0, 0
                for i in range(0, len(val), ebs):
                    ids, labels = self._batch(x, y, val[i : i + ebs])
                    logits = model(input_ids=ids, attention_mask=(ids != self.pad).long()).logits
                    shifted = labels[:, 1:]
                    total += torch.nn.functional.cross_entropy(
                        logits[:, :-1].flatten(0, 1), shifted.flatten(), ignore_index=-100, reduction="sum"
                    ).item()
                    count += int((shifted != -100).sum())
            _ = math.exp(total / max(count, 1))
        return time.perf_counter() - t

    def _batch(self, x: torch.Tensor, y: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ids = x[idx]
        width = int((ids != self.pad).sum(dim=1).max())  # right-padded: cut to the longest row
        return ids[:, :width], y[idx][:, :width]


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--batch-size", type=int, default=16, help="per-worker batch size (default 16)")
    ap.add_argument("--repeats", type=int, default=15, help="measured pairs of runs (default 15)")
    ap.add_argument("--epochs", type=int, default=1, help="epochs per run (default 1)")
    ap.add_argument("--rows", type=int, default=600, help="rows of the definitions used (default 600)")
    ap.add_argument("--layers", type=int, default=4, help="decoder layers (default 4)")
    ap.add_argument("--hidden", type=int, default=128, help="hidden size (default 128)")
    args = ap.parse_args()
    run = BenchRun("llm_throughput", args)
    torch.set_num_threads(1)
    frame = pd.read_csv(DEFINITIONS).head(args.rows)
    with tempfile.TemporaryDirectory(prefix="llm-throughput-") as tmp:
        texts = [TEMPLATE.format(**row) + " " + row["gloss"] for row in frame.to_dict("records")]
        model_dir = save_tiny_llama(Path(tmp), texts, args.layers, args.hidden)
        cfg = config(model_dir, args.batch_size, args.epochs)
        data = prepare(frame, cfg)
        tokens = trained_tokens(cfg, data)
        plain = Plain(cfg, data)
        times, pair_ratios = paired_runs(ours, plain, cfg, data, args.repeats)
        ours_tps = tokens / statistics.median(times["ours"])
        plain_tps = tokens / statistics.median(times["plain"])
        ratio, q1, q3 = ratio_quartiles(pair_ratios)
        width = data.inputs["lemma"].shape[1]
        print(
            f"{len(data.splits['train'])} training rows of {width} padded tokens "
            f"({tokens / trained_rows(cfg, data):.1f} real), batch size {args.batch_size}, {args.epochs} epochs, "
            f"{args.layers} layers of width {args.hidden}; ratio {ratio:.3f} (median of {args.repeats} pairs' "
            f"ratios; quartiles {q1:.3f}..{q3:.3f})",
            flush=True,
        )
    run.finish(
        {
            "tokens_per_s": Figure(ours_tps, ".0f"),
            "plain_tokens_per_s": Figure(plain_tps, ".0f"),
            "ratio_vs_plain": Figure(ratio, ".3f"),
        },
        {
            "padded_length": width,
            "tokens_per_run": tokens,
            "ratio_quartiles": [q1, q3],
            "pair_ratios": pair_ratios,
        },
    )


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
