"""lecturelib.recurrence.seq2seq: every public function and class given bad input raises an error that
names the argument, what was expected and what was given."""

from __future__ import annotations

import pytest
import torch

from lecturelib.recurrence import bleu, seq2seq

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
    return bleu.BleuReport(0.0, [0.0], [3], [["a"]], [["a"]], [["a"]])


SRC, LEN = toy_batch().src, toy_batch().src_len
CASES = [
    # sizes and configs
    (lambda: config(d_model=0), ValueError, r"d_model\ must\ be\ an\ int\ >=\ 1;\ got\ int\ 0"),
    (lambda: config(n_layers=1.5), ValueError, r"n_layers\ must\ be\ an\ int\ >=\ 1;\ got\ float\ 1\.5"),
    (lambda: config(src_vocab_size=True), ValueError, r"src_vocab_size\ must\ be\ an\ int\ >=\ 1;\ got\ bool\ True"),
    (lambda: config(context="max"), ValueError, r"context must be one of .*'max'"),
    (lambda: config(bidirectional="no"), TypeError, r"bidirectional must be a bool; got str 'no'"),
    (lambda: config(d_emb=8, d_model=16, bidirectional=0), TypeError,
     r"bidirectional must be a bool; got int 0"),
    (lambda: seq2seq.Seq2SeqConfig(V_SRC, V_TGT), TypeError, r"positional"),
    (lambda: seq2seq.make_model(V_SRC), TypeError, r"config must be a Seq2SeqConfig; got int"),
    (lambda: config(d_emb=0), ValueError, r"d_emb\ must\ be\ an\ int\ >=\ 1;\ got\ int\ 0"),
    (lambda: config(tgt_vocab_size=0), ValueError, r"tgt_vocab_size\ must\ be\ an\ int\ >=\ 1;\ got\ int\ 0"),
    (lambda: config(d_model=16, context=None), ValueError, r"context must be one of"),
    (lambda: seq2seq.Encoder(V_SRC), TypeError, r"config must be a Seq2SeqConfig; got int 11"),
    (lambda: seq2seq.Encoder(V_SRC, 8, 16), TypeError, r"positional"),
    (lambda: seq2seq.Decoder({"tgt_vocab_size": V_TGT}), TypeError,
     r"config must be a Seq2SeqConfig; got dict"),
    # run_packed
    (lambda: seq2seq.run_packed(torch.nn.LSTM(4, 8, batch_first=True), torch.randn(3, 5, 4), LEN),
     TypeError, r"rnn must be a torch.nn.RNN or GRU; got LSTM"),
    (lambda: seq2seq.run_packed(torch.nn.GRU(4, 8), torch.randn(3, 5, 4), LEN), ValueError,
     r"rnn must be batch_first; got GRU\(4, 8\)"),
    (lambda: seq2seq.run_packed(torch.nn.GRU(4, 8, batch_first=True), SRC, LEN), TypeError,
     r"x must be a float tensor \(b, t, d_in\); got torch.int64"),
    (lambda: seq2seq.run_packed(torch.nn.GRU(4, 8, batch_first=True), torch.randn(3, 5, 4),
                                LEN + 1), ValueError,
     r"lengths must be \(b,\) = \(3,\) integer lengths in 1\.\.5; got"),
    (lambda: seq2seq.run_packed(torch.nn.GRU(4, 8, batch_first=True), torch.randn(3, 5, 4),
                                [5, 3, 4]), TypeError,
     r"lengths must be an integer tensor of \(b,\) lengths; got list"),
    (lambda: seq2seq.Seq2Seq(None, model().decoder), TypeError,
     r"encoder must be an nn.Module; got NoneType"),
    # ids: float, negative, too large, wrong shape
    (lambda: model().encoder(SRC.float(), LEN), TypeError,
     r"src\ must\ be\ an\ integer\ \(long\)\ tensor\ of\ token\ ids;\ got\ torch\.float32\ tensor\ of\ shape\ \(3,\ 5"),
    (lambda: model().encoder(SRC[0], LEN), ValueError, r"src\ must\ be\ 2\-D\ \(b,\ t\)\ token\ ids;\ got\ shape\ \(5,\)"),
    (lambda: model().encoder(SRC - 5, LEN), ValueError, r"src\ must\ hold\ token\ ids\ in\ 0\.\.10;\ got\ ids\ from\ \-5\ to\ 5"),
    (lambda: model().encoder(SRC + V_SRC, LEN), ValueError, r"src\ must\ hold\ token\ ids\ in\ 0\.\.10;\ got\ ids\ from\ 11\ to\ 21"),
    (lambda: model().encoder(SRC, LEN[:2]), ValueError, r"src_len must be \(b,\) = \(3,\)"),
    (lambda: model().encoder(SRC, LEN.float()), TypeError,
     r"src_len must be an integer tensor of \(b,\) lengths; got torch.float32 tensor"),
    (lambda: model().encoder(SRC, LEN + 9), ValueError, r"src_len must be .*1\.\.5; got"),
    (lambda: model().encoder(SRC, [5, 3, 4]), TypeError, r"src_len must be .*got list"),
    (lambda: model().decoder(torch.tensor([[1, -1]]), encoded()), ValueError,
     r"tgt_in\ must\ hold\ token\ ids\ in\ 0\.\.12;\ got\ ids\ from\ \-1\ to\ 1"),
    (lambda: model().decoder(torch.tensor([[1.0, 2.0]]), encoded()), TypeError,
     r"tgt_in\ must\ be\ an\ integer\ \(long\)\ tensor\ of\ token\ ids;\ got\ torch\.float32\ tensor\ of\ shape\ \(1"),
    (lambda: model().decoder(torch.tensor([[1, 2]]), (1, 2, 3)), TypeError,
     r"enc must be the Encoded output of an encoder; got tuple"),
    # losses
    (lambda: seq2seq.masked_cross_entropy(torch.randn(2, 4), torch.zeros(2, 4, dtype=torch.long)),
     ValueError, r"logits\ must\ be\ \(b,\ t,\ v\);\ got\ shape\ \(2,\ 4\)"),
    (lambda: seq2seq.masked_cross_entropy(torch.randn(2, 4, 7), torch.zeros(2, 4)), TypeError,
     r"targets\ must\ be\ an\ integer\ \(long\)\ tensor\ of\ token\ ids;\ got\ torch\.float32\ tensor\ of\ shape\ \("),
    (lambda: seq2seq.masked_cross_entropy(torch.randn(2, 4, 7), torch.full((2, 4), 7)),
     ValueError, r"targets\ must\ hold\ token\ ids\ in\ 0\.\.6;\ got\ ids\ from\ 7\ to\ 7"),
    (lambda: seq2seq.masked_cross_entropy(torch.randn(2, 4, 7),
                                          torch.zeros(2, 3, dtype=torch.long)),
     ValueError, r"logits \(b, t, v\) and targets \(b, t\) disagree: \(2, 4, 7\) vs \(2, 3\)"),
    (lambda: seq2seq.masked_cross_entropy(torch.randn(2, 4, 7),
                                          torch.full((2, 4), seq2seq.PAD_ID)),
     ValueError, r"targets hold no real token: every position is <pad>"),
    (lambda: seq2seq.loss(model(), toy_batch()[:3]), TypeError,
     r"batch must be \(src, src_len, tgt_in, tgt_out\); got tuple of length 3"),
    (lambda: seq2seq.loss(model(), toy_batch().src), TypeError, r"batch must be .*got Tensor"),
    # training recipe
    (lambda: seq2seq.val_loss(model(), "corpus", "cpu"), TypeError,
     r"corpus must be a TranslationData .*got str"),
    (lambda: seq2seq.val_loss(model(), toy_corpus(), "cpu", batch_size=0), ValueError,
     r"batch_size\ must\ be\ an\ int\ >=\ 1;\ got\ int\ 0"),
    (lambda: seq2seq.train_translator(model(), toy_corpus(), steps=0, lr=1e-3, batch_size=4,
                                      seed=0, desc="x"),
     ValueError, r"steps\ must\ be\ an\ int\ >=\ 1;\ got\ int\ 0"),
    (lambda: seq2seq.train_translator(model(), toy_corpus(), steps=2, lr=-1.0, batch_size=4,
                                      seed=0, desc="x"),
     ValueError, r"lr\ must\ be\ a\ finite\ number\ in\ \(0,\ inf\);\ got\ float\ \-1\.0"),
    (lambda: seq2seq.train_translator(model(), toy_corpus(), steps=2, lr=1e-3, batch_size=4.0,
                                      seed=0, desc="x"),
     ValueError, r"batch_size\ must\ be\ an\ int\ >=\ 1;\ got\ float\ 4\.0"),
    (lambda: seq2seq.train_translator(model(), [], steps=2, lr=1e-3, batch_size=4, seed=0,
                                      desc="x"),
     TypeError, r"corpus must be a TranslationData; got list"),
    # decoding and evaluation
    (lambda: seq2seq.greedy_decode(model(), SRC, LEN, max_len=0), ValueError,
     r"max_len\ must\ be\ an\ int\ >=\ 1;\ got\ int\ 0"),
    (lambda: seq2seq.greedy_decode(model(), SRC.double(), LEN, max_len=3), TypeError,
     r"src\ must\ be\ an\ integer\ \(long\)\ tensor\ of\ token\ ids;\ got\ torch\.float64\ tensor\ of\ shape\ \(3,\ 5"),
    (lambda: seq2seq.translate(model(), toy_corpus(), ["tom voit marie"]), TypeError,
     r"sources\[0\] must be a list of str tokens .*got 'tom voit marie'"),
    (lambda: seq2seq.translate(model(), toy_corpus(), "tom voit"), TypeError,
     r"sources must be a list of token lists; got str"),
    (lambda: seq2seq.translate(model(), toy_corpus(), [["tom"]], max_len=-1), ValueError,
     r"max_len\ must\ be\ an\ int\ >=\ 1;\ got\ int\ \-1"),
    (lambda: seq2seq.evaluate(model(), toy_corpus(), []), ValueError,
     r"pairs must be a non-empty list of \(source tokens, target tokens\)"),
    (lambda: seq2seq.evaluate(model(), toy_corpus(), [(["tom"], "marie")]), TypeError,
     r"pairs' targets\[0\] must be a list of str tokens"),
    (lambda: report().by_length([5]), ValueError, r"edges must be at least two increasing ints; got \[5\]"),
    (lambda: report().by_length([5, 3]), ValueError, r"edges must be .*got \[5, 3\]"),
    (lambda: report().by_length([1, 2.5]), ValueError, r"edges must be .*got \[1, 2\.5\]"),
    (lambda: bleu.plot_bleu_by_length(report(), [1, 4], "rnn-ish", "x"), ValueError,
     r"unknown model family 'rnn-ish'"),
    # BLEU
    (lambda: bleu.ngrams("the cat", 2), TypeError, r"tokens must be a list of str tokens"),
    (lambda: bleu.ngrams(["the", "cat"], 0), ValueError, r"n\ must\ be\ an\ int\ >=\ 1;\ got\ int\ 0"),
    (lambda: bleu.formula_bleu(["the cat sat"], [["the", "cat", "sat"]]), TypeError,
     r"hypotheses\[0\] must be a list of str tokens \(split the text first\); got 'the cat sat'"),
    (lambda: bleu.formula_bleu([["the"]], "the"), TypeError,
     r"references must be a list of token lists; got str"),
    (lambda: bleu.formula_bleu([["the", 3]], [["the"]]), TypeError, r"hypotheses\[0\] must be"),
    (lambda: bleu.formula_bleu([["the"]], []), ValueError,
     r"need as many hypotheses as references \(>0\); got 1 and 0"),
    (lambda: bleu.formula_bleu([["the"]], [["the"]], max_n=0), ValueError,
     r"max_n\ must\ be\ an\ int\ >=\ 1;\ got\ int\ 0"),
]


@pytest.mark.parametrize("call,error,message", CASES)
def test_bad_input_raises_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()
