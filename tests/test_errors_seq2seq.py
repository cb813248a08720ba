"""lecturelib.recurrence.seq2seq: every public function and class given bad input raises an error that
names the argument, what was expected and what was given."""

from __future__ import annotations

import pytest
import torch

from lecturelib.recurrence import seq2seq

from translation_helpers import V_SRC, V_TGT, toy_batch, toy_corpus  # noqa: E402


def model():
    torch.manual_seed(0)
    return seq2seq.make_model(seq2seq.Seq2SeqConfig(src_vocab_size=V_SRC,
                                                    tgt_vocab_size=V_TGT, d_emb=4, d_model=8))


def encoded():
    b = toy_batch()
    return model().encoder(b.src, b.src_len)


def config(**kw):
    return seq2seq.Seq2SeqConfig(**{"src_vocab_size": V_SRC, "tgt_vocab_size": V_TGT} | kw)


def report():
    return seq2seq.BleuReport(0.0, [0.0], [3], [["a"]], [["a"]], [["a"]])


SRC, LEN = toy_batch().src, toy_batch().src_len
CASES = [
    # sizes and configs
    (lambda: config(d_model=0), ValueError, r"Seq2SeqConfig: d_model must be a positive int; got 0"),
    (lambda: config(n_layers=1.5), ValueError, r"n_layers must be a positive int; got 1\.5"),
    (lambda: config(src_vocab_size=True), ValueError, r"src_vocab_size must be a positive int"),
    (lambda: config(context="max"), ValueError, r"context must be one of .*'max'"),
    (lambda: seq2seq.Seq2SeqConfig(V_SRC, V_TGT), TypeError, r"positional"),
    (lambda: seq2seq.make_model(V_SRC), TypeError, r"config must be a Seq2SeqConfig; got int"),
    (lambda: seq2seq.Encoder(V_SRC, 8, 0), ValueError, r"Encoder: d_model must be a positive"),
    (lambda: seq2seq.Encoder(V_SRC, 8, 16, context="max"), ValueError, r"context must be one of"),
    (lambda: seq2seq.Decoder(V_TGT, 8, 16, d_enc=0), ValueError, r"Decoder: d_enc must be"),
    (lambda: seq2seq.Seq2Seq(None, model().decoder), TypeError,
     r"encoder must be an nn.Module; got NoneType"),
    # ids: float, negative, too large, wrong shape
    (lambda: model().encoder(SRC.float(), LEN), ValueError,
     r"src must be \(b, s\) integer token ids; got torch.float32"),
    (lambda: model().encoder(SRC[0], LEN), ValueError, r"src must be \(b, s\) .*got torch.int64 \(5,\)"),
    (lambda: model().encoder(SRC - 5, LEN), ValueError, r"src must lie in 0\.\.10 .*got values from -5"),
    (lambda: model().encoder(SRC + V_SRC, LEN), ValueError, r"src must lie in 0\.\.10"),
    (lambda: model().encoder(SRC, LEN[:2]), ValueError, r"src_len must be \(b,\) = \(3,\)"),
    (lambda: model().encoder(SRC, LEN.float()), ValueError, r"src_len must be .* integer lengths"),
    (lambda: model().encoder(SRC, LEN + 9), ValueError, r"src_len must be .*1\.\.5; got"),
    (lambda: model().encoder(SRC, [5, 3, 4]), ValueError, r"src_len must be .*got list"),
    (lambda: model().decoder(torch.tensor([[1, -1]]), encoded()), ValueError,
     r"tgt_in must lie in 0\.\.12 .*from -1"),
    (lambda: model().decoder(torch.tensor([[1.0, 2.0]]), encoded()), ValueError,
     r"tgt_in must be \(b, t\) integer token ids; got torch.float32"),
    (lambda: model().decoder(torch.tensor([[1, 2]]), (1, 2, 3)), TypeError,
     r"enc must be the Encoded output of an encoder; got tuple"),
    # losses
    (lambda: seq2seq.masked_cross_entropy(torch.randn(2, 4), torch.zeros(2, 4, dtype=torch.long)),
     ValueError, r"logits must be a floating-point \(b, t, v\) tensor; got torch.float32 \(2, 4\)"),
    (lambda: seq2seq.masked_cross_entropy(torch.randn(2, 4, 7), torch.zeros(2, 4)), ValueError,
     r"targets must be \(b, t\) integer token ids; got torch.float32"),
    (lambda: seq2seq.masked_cross_entropy(torch.randn(2, 4, 7), torch.full((2, 4), 7)),
     ValueError, r"targets must lie in 0\.\.6"),
    (lambda: seq2seq.masked_cross_entropy(torch.randn(2, 4, 7),
                                          torch.zeros(2, 3, dtype=torch.long)),
     ValueError, r"logits \(b, t, v\) and targets \(b, t\) disagree: \(2, 4, 7\) vs \(2, 3\)"),
    (lambda: seq2seq.loss(model(), toy_batch()[:3]), TypeError,
     r"batch must be \(src, src_len, tgt_in, tgt_out\); got tuple of length 3"),
    (lambda: seq2seq.loss(model(), toy_batch().src), TypeError, r"batch must be .*got Tensor"),
    # training recipe
    (lambda: seq2seq.val_loss(model(), "corpus", "cpu"), TypeError,
     r"corpus must be a TranslationData .*got str"),
    (lambda: seq2seq.val_loss(model(), toy_corpus(), "cpu", batch_size=0), ValueError,
     r"val_loss: batch_size must be a positive int; got 0"),
    (lambda: seq2seq.train_translator(model(), toy_corpus(), steps=0, lr=1e-3, batch_size=4,
                                      seed=0, desc="x"),
     ValueError, r"train_translator: steps must be a positive int; got 0"),
    (lambda: seq2seq.train_translator(model(), toy_corpus(), steps=2, lr=-1.0, batch_size=4,
                                      seed=0, desc="x"),
     ValueError, r"train_translator: lr must be a positive number; got -1\.0"),
    (lambda: seq2seq.train_translator(model(), toy_corpus(), steps=2, lr=1e-3, batch_size=4.0,
                                      seed=0, desc="x"),
     ValueError, r"batch_size must be a positive int; got 4\.0"),
    (lambda: seq2seq.train_translator(model(), [], steps=2, lr=1e-3, batch_size=4, seed=0,
                                      desc="x"),
     TypeError, r"corpus must be a TranslationData; got list"),
    # decoding and evaluation
    (lambda: seq2seq.greedy_decode(model(), SRC, LEN, max_len=0), ValueError,
     r"greedy_decode: max_len must be a positive int; got 0"),
    (lambda: seq2seq.greedy_decode(model(), SRC.double(), LEN, max_len=3), ValueError,
     r"src must be \(b, s\) integer token ids; got torch.float64"),
    (lambda: seq2seq.translate(model(), toy_corpus(), ["tom voit marie"]), TypeError,
     r"sources\[0\] must be a list of str tokens .*got 'tom voit marie'"),
    (lambda: seq2seq.translate(model(), toy_corpus(), "tom voit"), TypeError,
     r"sources must be a list of token lists; got str"),
    (lambda: seq2seq.translate(model(), toy_corpus(), [["tom"]], max_len=-1), ValueError,
     r"translate: max_len must be a positive int; got -1"),
    (lambda: seq2seq.evaluate(model(), toy_corpus(), []), ValueError,
     r"pairs must be a non-empty list of \(source tokens, target tokens\)"),
    (lambda: seq2seq.evaluate(model(), toy_corpus(), [(["tom"], "marie")]), TypeError,
     r"pairs' targets\[0\] must be a list of str tokens"),
    (lambda: report().by_length([5]), ValueError, r"edges must be at least two increasing ints; got \[5\]"),
    (lambda: report().by_length([5, 3]), ValueError, r"edges must be .*got \[5, 3\]"),
    (lambda: report().by_length([1, 2.5]), ValueError, r"edges must be .*got \[1, 2\.5\]"),
    (lambda: seq2seq.plot_bleu_by_length(report(), [1, 4], "rnn-ish", "x"), ValueError,
     r"unknown model family 'rnn-ish'"),
    # BLEU
    (lambda: seq2seq.ngrams("the cat", 2), TypeError, r"tokens must be a list of str tokens"),
    (lambda: seq2seq.ngrams(["the", "cat"], 0), ValueError, r"ngrams: n must be a positive int; got 0"),
    (lambda: seq2seq.formula_bleu(["the cat sat"], [["the", "cat", "sat"]]), TypeError,
     r"hypotheses\[0\] must be a list of str tokens \(split the text first\); got 'the cat sat'"),
    (lambda: seq2seq.formula_bleu([["the"]], "the"), TypeError,
     r"references must be a list of token lists; got str"),
    (lambda: seq2seq.formula_bleu([["the", 3]], [["the"]]), TypeError, r"hypotheses\[0\] must be"),
    (lambda: seq2seq.formula_bleu([["the"]], []), ValueError,
     r"need as many hypotheses as references \(>0\); got 1 and 0"),
    (lambda: seq2seq.formula_bleu([["the"]], [["the"]], max_n=0), ValueError,
     r"formula_bleu: max_n must be a positive int; got 0"),
]


@pytest.mark.parametrize("call,error,message", CASES)
def test_bad_input_raises_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()
