"""A tiny random translation batch shared by the seq2seq and attention tests."""

from __future__ import annotations

import torch

from lecturelib.recurrence import translation as tr
from lecturelib.recurrence.translation import BOS_ID, EOS_ID

V_SRC, V_TGT = 11, 13


def toy_batch(lengths=(5, 3, 4), tgt_lengths=(4, 2, 6), seed=0) -> tr.Batch:
    """Random sources of the given lengths and targets wrapped in <s> ... </s>, padded."""
    gen = torch.Generator().manual_seed(seed)
    src = [torch.randint(4, V_SRC, (n,), generator=gen) for n in lengths]
    tgt = [torch.cat([torch.tensor([BOS_ID]), torch.randint(4, V_TGT, (n,), generator=gen),
                      torch.tensor([EOS_ID])]) for n in tgt_lengths]
    return tr.Batch(tr.pad(src), torch.tensor(lengths), tr.pad([t[:-1] for t in tgt]),
                    tr.pad([t[1:] for t in tgt]))


WORDS = ["tom", "marie", "chat", "chien", "voit", "aime", "le", "un", "petit", "grand"]


def toy_corpus(n_train=48, n_val=10, seed=0) -> tr.TranslationData:
    """A copy-and-reverse task on ten words: the target is the source backwards."""
    gen = torch.Generator().manual_seed(seed)

    def pair():
        n = int(torch.randint(2, 6, (1,), generator=gen))
        src = [WORDS[i] for i in torch.randint(0, len(WORDS), (n,), generator=gen)]
        return src, src[::-1]

    pairs = [pair() for _ in range(n_train + 2 * n_val)]
    vocab = tr.build_vocab([s for s, _ in pairs])
    return tr.TranslationData(pairs[:n_train], pairs[n_train:n_train + n_val],
                              pairs[n_train + n_val:], vocab, vocab)
