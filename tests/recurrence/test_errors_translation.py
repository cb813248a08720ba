"""lecturelib.recurrence.translation refuses bad input with a message that names the argument, what was
expected and what was given: strings where token lists are expected (they would be read as
characters), float or negative ids (they would be truncated or index from the end), zero sizes."""

from __future__ import annotations

import pytest
import torch

from lecturelib.recurrence import translation as tr

TEXT_PAIRS = [("Go.", "Va !"), ("I'm cold.", "J'ai froid."), ("Hi.", "Salut.")]
PAIRS = tr.tokenize_pairs(TEXT_PAIRS)
VOCAB = tr.build_vocab([s for s, _ in PAIRS])  # 4 specials + 6 words: ids 0..9
DATA = tr.TranslationData(PAIRS, PAIRS[:1], PAIRS[1:2], VOCAB, VOCAB)


@pytest.fixture(autouse=True)
def _no_corpus(monkeypatch):
    """load() must refuse bad sizes before it reads the corpus."""
    def refuse():
        raise AssertionError("load() read the corpus before checking its arguments")

    monkeypatch.setattr(tr.data, "fra_eng_pairs", refuse)


CASES = [
    (lambda: tr.tokenize(["go", "."]), TypeError, r"tokenize\(\): text must be a str; got list"),
    (lambda: tr.detokenize("go ."), TypeError,
     r"detokenize\(\): tokens must be a list of tokens; got the str 'go \.' \(call tokenize"),
    (lambda: tr.detokenize(["go", 1]), TypeError, r"tokens\[1\] must be a str; got 1 \(int\)"),
    (lambda: tr.detokenize(None), TypeError, r"tokens must be a list of tokens; got NoneType"),
    (lambda: tr.tokenize_pairs("Go.\tVa !"), TypeError,
     r"tokenize_pairs\(\): pairs must be a list of \(source, target\) string pairs; got str"),
    (lambda: tr.tokenize_pairs([("Go.",)]), ValueError,
     r"pairs\[0\] must be a \(source, target\) pair of str; got \('Go.',\)"),
    (lambda: tr.tokenize_pairs([TEXT_PAIRS[0], PAIRS[1]]), ValueError,
     r"pairs\[1\] must be a \(source, target\) pair of str; got \(\[\"i'\""),
    (lambda: tr.filter_by_length(PAIRS, 2.5), ValueError,
     r"max_len\ must\ be\ an\ int\ >=\ 1;\ got\ float\ 2\.5"),
    (lambda: tr.filter_by_length(PAIRS, 0), ValueError, r"max_len\ must\ be\ an\ int\ >=\ 1;\ got\ int\ 0"),
    (lambda: tr.filter_by_length(PAIRS, 3, min_len=4), ValueError,
     r"need 1 <= min_len <= max_len; got min_len=4, max_len=3"),
    (lambda: tr.filter_by_length(TEXT_PAIRS, 5), TypeError,
     r"pairs\[0\]\[0\] must be a list of tokens; got the str 'Go.'"),
    (lambda: tr.filter_by_length([(["go"],)], 5), ValueError,
     r"pairs\[0\] must be a \(source tokens, target tokens\) pair"),
    (lambda: tr.filter_by_vocab(PAIRS, 0), ValueError, r"n_words\ must\ be\ an\ int\ >=\ 1;\ got\ int\ 0"),
    (lambda: tr.filter_by_vocab(PAIRS, 10.0), ValueError, r"n_words\ must\ be\ an\ int\ >=\ 1;\ got\ float\ 10\.0"),
    (lambda: tr.filter_by_vocab(TEXT_PAIRS, 10), TypeError, r"pairs\[0\]\[0\] must be a list"),
    (lambda: tr.split_pairs(PAIRS, 0, 1), ValueError,
     r"n_val\ must\ be\ an\ int\ >=\ 1;\ got\ int\ 0"),
    (lambda: tr.split_pairs(PAIRS, 1, 1.5), ValueError, r"n_test\ must\ be\ an\ int\ >=\ 1;\ got\ float\ 1\.5"),
    (lambda: tr.split_pairs(PAIRS, 1, 1, n_train=0), ValueError, r"n_train\ must\ be\ an\ int\ >=\ 1;\ got\ int\ 0"),
    (lambda: tr.split_pairs(PAIRS, 1, 1, seed="0"), ValueError, r"seed\ must\ be\ an\ int\ >=\ \-9223372036854775808;\ got\ str\ '0'"),
    (lambda: tr.split_pairs(TEXT_PAIRS, 1, 1), TypeError, r"pairs\[0\]\[0\] must be a list"),
    (lambda: tr.split_pairs(PAIRS, 2, 2), ValueError,
     r"pairs: 3 pairs are too few for n_val=2 validation and n_test=2 test pairs"),
    (lambda: tr.build_vocab("hello world"), TypeError,
     r"build_vocab\(\): sentences must be a list of token lists; got str"),
    (lambda: tr.build_vocab(["hello world"]), TypeError,
     r"sentences\[0\] must be a list of tokens; got the str 'hello world'"),
    (lambda: tr.build_vocab([[1, 2]]), TypeError,
     r"build_vocab\(\): sentences\[0\]\[0\] must be a str; got 1 \(int\)"),
    (lambda: tr.build_vocab([["a"]], min_count=0), ValueError, r"min_count\ must\ be\ an\ int\ >=\ 1;\ got\ int\ 0"),
    (lambda: tr.encode("go .", VOCAB), TypeError, r"encode\(\): tokens must be a list of tokens"),
    (lambda: tr.encode(["go"], {"go": 4}), TypeError,
     r"vocab must be a lecturelib.recurrence.lm.Vocab \(see build_vocab\); got dict"),
    (lambda: tr.encode(["go", 4], VOCAB), TypeError, r"tokens\[1\] must be a str; got 4"),
    (lambda: tr.decode([-1], VOCAB), ValueError,
     r"decode\(\): ids must be in 0\.\.9 \(the vocabulary size is 10\); got -1 at position 0"),
    (lambda: tr.decode([4, -100], VOCAB), ValueError,
     r"ids must be in 0\.\.9 .*got -100 at position 1"),
    (lambda: tr.decode(torch.tensor([4, 10]), VOCAB), ValueError, r"got 10 at position 1"),
    (lambda: tr.decode([4.0], VOCAB), TypeError,
     r"ids must be ints; got 4.0 \(float\) at position 0"),
    (lambda: tr.decode([True], VOCAB), TypeError, r"ids must be ints; got True \(bool\)"),
    (lambda: tr.decode(torch.tensor([4.7]), VOCAB), TypeError,
     r"ids must be integer token ids; got dtype torch.float32"),
    (lambda: tr.decode(torch.tensor([[4, 5]]), VOCAB), ValueError,
     r"ids must be one sequence \(t,\); got shape \(1, 2\)"),
    (lambda: tr.decode("go", VOCAB), TypeError,
     r"ids must be a 1-D tensor or a list of ints; got str"),
    (lambda: tr.decode([4], None), TypeError, r"vocab must be a lecturelib.recurrence.lm.Vocab"),
    (lambda: tr.pad([]), ValueError,
     r"pad\(\): seqs must hold at least one tensor; got an empty list"),
    (lambda: tr.pad(torch.tensor([1, 2])), TypeError,
     r"seqs must be a list of 1-D id tensors; got Tensor"),
    (lambda: tr.pad([[1, 2]]), TypeError, r"seqs\[0\] must be a 1-D id tensor; got list"),
    (lambda: tr.pad([torch.tensor([1.0])]), ValueError,
     r"seqs\[0\] must be a 1-D integer tensor \(t,\); got shape \(1,\) and dtype torch.float32"),
    (lambda: tr.pad([torch.ones(2, 2, dtype=torch.long)]), ValueError, r"got shape \(2, 2\)"),
    (lambda: tr.make_batch([], VOCAB, VOCAB), ValueError,
     r"pairs must hold at least one .*got none"),
    (lambda: tr.make_batch(PAIRS, VOCAB, None), TypeError,
     r"tgt_vocab must be a lecturelib.recurrence.lm.Vocab"),
    (lambda: tr.make_batch(TEXT_PAIRS, VOCAB, VOCAB), TypeError,
     r"make_batch\(\): pairs\[0\]\[0\] must be a list of tokens; got the str 'Go.'"),
    (lambda: tr.make_batch([(["go"], [4])], VOCAB, VOCAB), TypeError,
     r"make_batch\(\): pairs\[0\]\[1\]\[0\] must be a str; got 4 \(int\)"),
    (lambda: DATA.sampler(0), ValueError, r"batch_size\ must\ be\ an\ int\ >=\ 1;\ got\ int\ 0"),
    (lambda: DATA.sampler(2.0), ValueError, r"batch_size\ must\ be\ an\ int\ >=\ 1;\ got\ float\ 2\.0"),
    (lambda: DATA.sampler(4), ValueError,
     r"batch_size must be in 1\.\.3 \(the training pairs\); got 4"),
    (lambda: DATA.sampler(2, seed=0.5), ValueError, r"seed\ must\ be\ an\ int\ >=\ \-9223372036854775808;\ got\ float\ 0\.5"),
    (lambda: DATA.sampler(2, by_length=1), TypeError, r"by_length must be a bool; got 1"),
    (lambda: DATA.batches(PAIRS, 0), ValueError, r"batch_size\ must\ be\ an\ int\ >=\ 1;\ got\ int\ 0"),
    (lambda: DATA.batches(PAIRS, 2.5), ValueError, r"batch_size\ must\ be\ an\ int\ >=\ 1;\ got\ float\ 2\.5"),
    (lambda: DATA.batches(TEXT_PAIRS, 2), TypeError, r"pairs\[0\]\[0\] must be a list of tokens"),
    (lambda: tr.load(max_len=0), ValueError, r"max_len\ must\ be\ an\ int\ >=\ 1;\ got\ int\ 0"),
    (lambda: tr.load(n_words=0), ValueError, r"n_words\ must\ be\ an\ int\ >=\ 1;\ got\ int\ 0"),
    (lambda: tr.load(n_val=1.5), ValueError, r"n_val\ must\ be\ an\ int\ >=\ 1;\ got\ float\ 1\.5"),
    (lambda: tr.load(min_count=0), ValueError, r"min_count\ must\ be\ an\ int\ >=\ 1;\ got\ int\ 0"),
    (lambda: tr.load(n_train=-5), ValueError, r"n_train\ must\ be\ an\ int\ >=\ 1;\ got\ int\ \-5"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()
