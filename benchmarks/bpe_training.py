"""Time BPE training to a 4,096-token vocabulary on about 1 MB of text (chapter 9).

Three trainers learn merges on the same corpus (the chapter's cpu profile: the first 200,000
characters of each of five Project Gutenberg books):

- ``fast``: :func:`lecturelib.transformers.bpe.train_bpe`, incremental pair counts;
- ``hf``: the Hugging Face ``tokenizers`` BPE trainer, set up the same way
  (:func:`lecturelib.transformers.bpe.train_hf_bpe`);
- ``plain``: :func:`lecturelib.transformers.bpe.train_bpe_plain`, which recounts every pair before every
  merge; it checks that the fast trainer learned the same merges. It takes minutes. With
  ``--plain-merges K`` it is timed on its first K merges only and the time is *extrapolated*
  linearly to all merges, a rough estimate: the reference visits every chunk for every merge,
  and the table of distinct pairs it searches grows as the chunks shrink (on the chapter's
  two shared cores the first 200 merges extrapolated to under four minutes, and the full
  run took over five).

Usage: ``LECTURELIB_DATA=... python benchmarks/bpe_training.py`` (about six minutes on two
cores) writes ``benchmarks/results/bpe_training.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import regex
import tokenizers

from lecturelib import data, records
from lecturelib.transformers import bpe

BOOKS = ["pride-and-prejudice", "sherlock-holmes", "frankenstein", "moby-dick",
         "war-and-peace"]
HELD_OUT = "tale-of-two-cities"
RESULT = Path(__file__).resolve().parent / "results" / "bpe_training.json"


def corpus(n_chars: int) -> str:
    per_book = n_chars // len(BOOKS)
    return "".join(data.gutenberg_text(book)[:per_book] for book in BOOKS)


def timed(fn, *args):
    start = time.perf_counter()
    result = fn(*args)
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n-chars", type=int, default=1_000_000)
    parser.add_argument("--vocab-size", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--plain-merges", type=int, default=None,
                        help="time the reference on this many merges and extrapolate")
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args()

    text = corpus(args.n_chars)
    n_merges = bpe.n_merges(args.vocab_size)
    fast_times, hf_times = [], []
    for _ in range(args.repeats):
        t, fast = timed(bpe.train_bpe, text, args.vocab_size)
        fast_times.append(t)
        t, hf = timed(bpe.train_hf_bpe, text, args.vocab_size)
        hf_times.append(t)
        print(f"fast {fast_times[-1]:.2f} s, hf {hf_times[-1]:.2f} s")

    k = min(args.plain_merges or n_merges, n_merges)
    plain_time, plain = timed(bpe.train_bpe_plain, text, 256 + k)
    assert plain.merges == fast.truncated(256 + k).merges, "plain and fast disagree"
    plain_estimate = plain_time * n_merges / k
    print(f"plain {plain_time:.1f} s for {k} merges" +
          (f" -> about {plain_estimate:.0f} s for all" if k < n_merges else ""))

    held_out = data.gutenberg_text(HELD_OUT)[:200_000]
    ours = set(fast.vocab[256:])
    theirs = {b for b in bpe.hf_vocab_bytes(hf) if len(b) > 1}
    record = {
        "benchmark": "bpe_training",
        "what": (f"train byte-level BPE with the GPT-2 regex to {args.vocab_size} tokens "
                 f"({n_merges} merges); wall-clock seconds, best of {args.repeats}"),
        "corpus": {"books": [data.gutenberg_title(b) for b in BOOKS],
                   "chars": len(text), "bytes": len(text.encode("utf-8"))},
        "vocab_size": args.vocab_size,
        "n_merges": n_merges,
        "seconds": {
            "fast": min(fast_times),
            "hf_tokenizers": min(hf_times),
            "plain": plain_estimate,
        },
        "all_runs": {"fast": fast_times, "hf_tokenizers": hf_times},
        "plain": {"merges_timed": k, "seconds_timed": plain_time, "runs": 1,
                  "extrapolated": k < n_merges,
                  "note": ("timed on all merges" if k == n_merges else
                           f"timed on the first {k} merges and extrapolated linearly to "
                           f"all {n_merges} (a rough estimate)"),
                  "merges_identical_to_fast": True},
        "speedup_fast_over_plain": plain_estimate / min(fast_times),
        "vocab_overlap": len(ours & theirs) / len(ours),
        "held_out_bytes_per_token": {
            "text": f"first 200,000 characters of {data.gutenberg_title(HELD_OUT)}",
            "fast": bpe.bytes_per_token(fast, held_out),
            "hf_tokenizers": bpe.bytes_per_token(hf, held_out),
        },
        "command": "python benchmarks/bpe_training.py " + " ".join(sys.argv[1:]),
        "plot": {"bars": "seconds", "log": True, "ylabel": "seconds (log scale)",
                 "caption": "seconds to train the vocabulary, best of the runs"},
        "machine": records.machine(tokenizers=tokenizers.__version__,
                                   regex=regex.__version__),
    }
    records.save(record, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
