"""Chapter 11's speed target: the book's cpu recipe against nanoGPT's published CPU recipe.

nanoGPT's README trains ``config/train_shakespeare_char.py`` on a CPU with ``--block_size=64
--batch_size=12 --n_layer=4 --n_head=4 --n_embd=128 --max_iters=2000 --lr_decay_iters=2000
--dropout=0.0`` (learning rate 1e-3 warmed up over 100 steps and decayed to 1e-4, AdamW with
betas (0.9, 0.99) and weight decay 0.1 on every matrix, clipping at 1.0): a GPT-2 with learned
positions, LayerNorm and biases. ``pretrain.RECIPES["nanogpt"]`` is that recipe in our code.

This script trains, in one process on the same machine, one after another:

1. nanoGPT's recipe;
2. the book's cpu recipe (``pretrain.RECIPES["cpu"]``);
3. the book's recipe with one change undone at a time (the ablation of chapter 11).

Every run's validation loss is measured on the whole validation split (the last 10% of tiny
Shakespeare, cut into consecutive windows of 64 characters), and its training time excludes
that evaluation. The target: the book's recipe reaches a validation loss <= 1.70 in no more
wall time than nanoGPT's recipe takes.

Usage: ``LECTURELIB_DATA=... python benchmarks/gpt_cpu_recipe.py`` (about 15 minutes on two
cores) writes ``benchmarks/results/gpt_cpu_recipe.json``.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict, replace
from pathlib import Path


from lecturelib import records
from lecturelib.pretraining import gpt, pretrain

RESULT = Path(__file__).resolve().parent / "results" / "gpt_cpu_recipe.json"
TARGET = 1.70


def variants() -> dict[str, pretrain.Recipe]:
    """nanoGPT's recipe, ours, and ours with one change undone at a time."""
    ours = pretrain.RECIPES["cpu"]
    nano = pretrain.RECIPES["nanogpt"]
    model = dict(ours.model)
    return {
        "nanoGPT (published CPU recipe)": nano,
        "ours": ours,
        "ours with AdamW instead of Muon": replace(ours, optimizer="adamw"),
        "ours with learned positions instead of RoPE": replace(
            ours, model={**model, "positions": "learned"}),
        "ours with LayerNorm and biases instead of RMSNorm": replace(
            ours, model={**model, "norm": "layer", "bias": True}),
        "ours with an untied output head": replace(
            ours, model={**model, "tie_embeddings": False}),
        "ours at nanoGPT's width and batch (128, 12 x 2000 steps)": replace(
            ours, model={**model, "d_model": 128}, batch_size=nano.batch_size,
            steps=nano.steps),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", help="names of the variants to run (default all)")
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args()
    vocab, train_ids, val_ids = pretrain.shakespeare()
    runs = []
    for name, recipe in variants().items():
        if args.only and name not in args.only:
            continue
        model, hist = pretrain.train_gpt(recipe, len(vocab), train_ids, val_ids, evals=1,
                                         eval_tokens=2048, desc=name, progress=False)
        val = gpt.evaluate_loss(model, val_ids, model.config.seq_len)
        runs.append({"recipe": name, "val_loss": val, "train_seconds": hist.train_seconds,
                     "tokens": hist.tokens, "tokens_per_s": hist.tokens / hist.train_seconds,
                     "params": gpt.n_params(model, embeddings=True),
                     "settings": asdict(recipe)})
        print(f"{name:50s} val {val:.3f}  {hist.train_seconds:6.1f} s  "
              f"{hist.tokens / hist.train_seconds:8,.0f} tok/s", flush=True)
    by_name = {r["recipe"]: r for r in runs}
    nano, ours = by_name.get("nanoGPT (published CPU recipe)"), by_name.get("ours")
    record = {
        "benchmark": "gpt_cpu_recipe",
        "what": "char-level tiny Shakespeare GPT: validation loss (nats/char, whole val split) "
                "and training wall time (evaluation excluded), all recipes in one run",
        "target": f"ours reaches val_loss <= {TARGET} in no more time than nanoGPT's recipe",
        "target_met": (None if not (nano and ours) else
                       ours["val_loss"] <= TARGET
                       and ours["train_seconds"] <= nano["train_seconds"]),
        "runs": runs,
        "command": "python benchmarks/gpt_cpu_recipe.py " + " ".join(sys.argv[1:]),
        "plot": {"x": "train_seconds", "y": "val_loss", "label": "recipe",
                 "xlabel": "training seconds", "ylabel": "validation loss (nats/char)",
                 "caption": "validation loss against training time, one point per recipe"},
        "machine": records.machine(),
    }
    records.save(record, args.out)
    print(f"target met: {record['target_met']}; wrote {args.out}")


if __name__ == "__main__":
    main()
