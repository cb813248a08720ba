"""A tiny training run for the tests of resume and distributed training.

    python tests/scripts/train_tiny.py --steps 6 --out params.pt [--checkpoint c.pt --resume]
    torchrun --nproc_per_node=2 tests/scripts/train_tiny.py --steps 3 --out params.pt

The same script runs alone or under torchrun (the data are a function of the step, so every
process sees the same global batch and trains on its shard of it).
"""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

from lecturelib import train
from lecturelib.train import distributed


def batch(step: int):
    g = torch.Generator().manual_seed(100 + step)
    x = torch.randn(8, 4, generator=g)
    return x, (x.sum(1) > 0).long()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--checkpoint")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--dropout", type=float, default=0.1)
    args = parser.parse_args()
    dist = distributed.init("gloo")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.Dropout(args.dropout), nn.Tanh(), nn.Linear(16, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=0.05)
    sched = train.warmup_cosine(opt, 8, warmup=2)
    rows = []

    def loss_fn(m, b):
        rows.append(len(b[0]))
        return F.cross_entropy(m(b[0]), b[1])

    hist = train.fit(model, batch, loss_fn,
                     steps=args.steps, optimizer=opt, scheduler=sched, clip=1.0,
                     checkpointing=train.Checkpointing(args.checkpoint, resume=args.resume)
                     if args.checkpoint else None, progress=False)
    if dist.is_main:
        torch.save({"params": [p.detach() for p in model.parameters()],
                    "loss": hist.train_loss, "rows": rows}, args.out)
    distributed.close()


if __name__ == "__main__":
    main()
