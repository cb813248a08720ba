"""Bad input to lecturelib.recurrence.attention: each row is a call, the exception it raises and a
pattern its message must match (the argument, what was expected, what was given)."""

from __future__ import annotations

import pytest
import torch

from lecturelib.recurrence import attention, seq2seq

Q, K, V = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 6)
SCORES = torch.zeros(2, 3, 5)
KEEP = torch.ones(2, 1, 5, dtype=torch.bool)
BOOL = torch.bool


def decoder():
    torch.manual_seed(0)
    return attention.AttentionDecoder(config(d_emb=4, d_model=4))  # d_enc = 2 * 4


def encoded(b=2, s=5, d_enc=8):
    return seq2seq.Encoded(torch.randn(b, s, d_enc), torch.ones(b, s, dtype=BOOL),
                           torch.randn(b, d_enc))


def config(**kw):
    return attention.AttentionConfig(**{"src_vocab_size": 9, "tgt_vocab_size": 9} | kw)


TGT = torch.zeros(2, 3, dtype=torch.long)

CASES = [
    # (id, call, exception, message pattern)
    ("check_qk: int queries", lambda: attention.check_qk(Q.long(), K), TypeError,
     r"queries must be a float tensor \(b, t, d_q\); got torch.int64 tensor of shape"),
    ("check_qk: list keys", lambda: attention.check_qk(Q, [[1.0]]), TypeError,
     r"keys must be a float tensor \(b, s, d_k\); got list"),
    ("check_qk: batches differ", lambda: attention.check_qk(Q, K[:1]), ValueError,
     r"queries must be \(b, t, d_q\) and keys \(b, s, d_k\) with one b; got \(2, 3, 4\) "
     r"and \(1, 5, 4\)"),
    ("dot: 2-D queries", lambda: attention.DotScore()(Q[0], K), ValueError,
     r"queries must be \(b, t, d_q\).*got \(3, 4\)"),
    ("dot: widths differ", lambda: attention.DotScore()(Q, K[..., :3]), ValueError,
     r"needs d_q == d_k; got queries \(2, 3, 4\) and keys \(2, 5, 3\)"),
    ("bilinear: key width", lambda: attention.BilinearScore(4, 4)(Q, K[..., :3]),
     ValueError, r"expected d_q=4, d_k=4; got .*\(2, 5, 3\)"),
    ("bilinear: zero width", lambda: attention.BilinearScore(0, 4), ValueError,
     r"d_q\ must\ be\ an\ int\ >=\ 1;\ got\ int\ 0"),
    ("bilinear: float width", lambda: attention.BilinearScore(4, 2.5), ValueError,
     r"d_k\ must\ be\ an\ int\ >=\ 1;\ got\ float\ 2\.5"),
    ("additive: negative d_att", lambda: attention.AdditiveScore(4, 4, -1), ValueError,
     r"d_att\ must\ be\ an\ int\ >=\ 1;\ got\ int\ \-1"),
    ("additive: query width", lambda: attention.AdditiveScore(3, 4, 8)(Q, K), ValueError,
     r"expected d_q=3, d_k=4; got queries \(2, 3, 4\)"),
    ("make_score: unknown", lambda: attention.make_score("cosine", 4, 4), ValueError,
     r"score must be one of \('dot', 'bilinear', 'additive'\); got 'cosine'"),
    ("make_score: dot widths", lambda: attention.make_score("dot", 4, 8), ValueError,
     r"d_q == d_k; got 4 and 8"),
    ("make_score: zero d_q", lambda: attention.make_score("additive", 0, 8), ValueError,
     r"d_q\ must\ be\ an\ int\ >=\ 1;\ got\ int\ 0"),
    ("check_mask: float mask", lambda: attention.check_mask(KEEP.float(), 2, 3, 5),
     TypeError, r"mask must be a bool tensor \(True = may attend\); got torch.float32"),
    ("check_mask: list", lambda: attention.check_mask([[True]], 2, 3, 5), TypeError,
     r"mask must be a bool tensor .*got list"),
    ("check_mask: 2-D (t, s)", lambda: attention.check_mask(torch.ones(3, 5, dtype=BOOL),
                                                              2, 3, 5), ValueError,
     r"mask must be 3-D \(b, t, s\) = \(2, 3, 5\).*got the 2-D \(3, 5\): write mask\[None\]"),
    ("check_mask: 4-D", lambda: attention.check_mask(KEEP[:, None], 2, 3, 5), ValueError,
     r"mask must be \(b, t, s\) = \(2, 3, 5\), where b and t may be 1; got \(2, 1, 1, 5\)"),
    ("check_mask: other batch", lambda: attention.check_mask(KEEP[:1].expand(3, 1, 5), 2, 3,
                                                             5), ValueError,
     r"got \(3, 1, 5\)"),
    ("check_mask: other queries", lambda: attention.check_mask(
        torch.ones(2, 2, 5, dtype=BOOL), 2, 3, 5), ValueError, r"got \(2, 2, 5\)"),
    ("masked_softmax: int scores", lambda: attention.masked_softmax(SCORES.long()),
     TypeError, r"scores must be a float tensor \(\.\.\., s\); got torch.int64 tensor"),
    ("masked_softmax: float mask",
     lambda: attention.masked_softmax(SCORES, torch.ones(2, 1, 5)), TypeError,
     r"mask must be a bool tensor.*got torch.float32"),
    ("masked_softmax: (b, s) mask with b == t",
     lambda: attention.masked_softmax(torch.zeros(3, 3, 5), torch.ones(3, 5, dtype=BOOL)),
     ValueError, r"mask must be 3-D.*mask\[:, None, :\] for a \(b, s\) padding mask"),
    ("masked_softmax: 1-D scores with a mask",
     lambda: attention.masked_softmax(torch.zeros(5), KEEP), ValueError,
     r"scores must be \(b, \.\.\., t, s\) when a mask is given; got \(5,\)"),
    ("masked_softmax: all masked",
     lambda: attention.masked_softmax(SCORES, torch.zeros(2, 1, 5, dtype=BOOL)),
     ValueError, r"mask: every query needs at least one key"),
    ("attend: scores vs values", lambda: attention.attend(torch.zeros(2, 3, 4), V),
     ValueError, r"scores must be \(b, t, s\) and values \(b, s, d_v\); got \(2, 3, 4\)"),
    ("attend: int values", lambda: attention.attend(SCORES, V.long()), TypeError,
     r"values must be a float tensor \(b, s, d_v\); got torch.int64 tensor"),
    ("attend: 2-D padding mask",
     lambda: attention.attend(SCORES, V, torch.ones(2, 5, dtype=BOOL)), ValueError,
     r"mask must be 3-D \(b, t, s\) = \(2, 3, 5\).*got the 2-D \(2, 5\)"),
    ("attend: mask of other keys",
     lambda: attention.attend(SCORES, V, torch.ones(2, 1, 4, dtype=BOOL)), ValueError,
     r"mask must be \(b, t, s\) = \(2, 3, 5\).*got \(2, 1, 4\)"),
    ("lookup: score not callable", lambda: attention.lookup(Q, K, V, "dot"), TypeError,
     r"score\ must\ be\ callable;\ got\ str\ 'dot'"),
    ("lookup: 2-D mask", lambda: attention.lookup(Q, K, V, attention.DotScore(),
                                                  torch.ones(2, 5, dtype=BOOL)), ValueError,
     r"mask must be 3-D"),
    ("decoder: zero vocabulary", lambda: config(tgt_vocab_size=0), ValueError,
     r"vocab_size\ must\ be\ an\ int\ >=\ 1;\ got\ int\ 0"),
    ("decoder: float layers", lambda: config(n_layers=1.0),
     ValueError, r"n_layers\ must\ be\ an\ int\ >=\ 1;\ got\ float\ 1\.0"),
    ("decoder: unknown score", lambda: config(score="mlp"),
     ValueError, r"score must be one of .*got 'mlp'"),
    ("decoder: not a config", lambda: attention.AttentionDecoder(9), TypeError,
     r"config must be an AttentionConfig; got int 9"),
    ("decoder: sizes instead of a config", lambda: attention.AttentionDecoder(9, 4, 6, 8),
     TypeError, r"positional"),
    ("decoder: the plain seq2seq config",
     lambda: attention.AttentionDecoder(seq2seq.Seq2SeqConfig(src_vocab_size=9, tgt_vocab_size=9)),
     TypeError, r"config must be an AttentionConfig; got Seq2SeqConfig"),
    ("decoder: float ids", lambda: decoder()(TGT.float(), encoded()), TypeError,
     r"tgt_in\ must\ be\ an\ integer\ \(long\)\ tensor\ of\ token\ ids;\ got\ torch\.float32\ tensor\ of\ shape\ \(2"),
    ("decoder: ids past the vocabulary", lambda: decoder()(TGT + 9, encoded()), ValueError,
     r"tgt_in\ must\ hold\ token\ ids\ in\ 0\.\.8;\ got\ ids\ from\ 9\ to\ 9"),
    ("decoder: negative ids", lambda: decoder()(TGT - 1, encoded()), ValueError,
     r"tgt_in\ must\ hold\ token\ ids\ in\ 0\.\.8;\ got\ ids\ from\ \-1\ to\ \-1"),
    ("decoder: enc not Encoded", lambda: decoder()(TGT, torch.randn(2, 5, 8)), TypeError,
     r"enc must be a seq2seq.Encoded; got Tensor"),
    ("decoder: states of another width", lambda: decoder()(TGT, encoded(d_enc=7)),
     ValueError, r"enc.states must be \(b, s, d_enc\) = \(2, s, 8\); got \(2, 5, 7\)"),
    ("decoder: states of another batch", lambda: decoder()(TGT, encoded(b=3)), ValueError,
     r"enc.states must be \(b, s, d_enc\) = \(2, s, 8\); got \(3, 5, 8\)"),
    ("decoder: state of another shape",
     lambda: decoder()(TGT, encoded(), torch.zeros(2, 6)), ValueError,
     r"h must be \(l, b, d_model\) = \(1, 2, 4\) or None; got \(2, 6\)"),
    ("config: unknown score", lambda: config(score="cosine"), ValueError,
     r"AttentionConfig: score must be one of .*got 'cosine'"),
    ("config: dot with a bidirectional encoder", lambda: config(score="dot"), ValueError,
     r"AttentionConfig: a dot-product score needs d_q == d_k.*d_model=256.*width 512"),
    ("config: zero width", lambda: config(d_model=0), ValueError,
     r"d_model\ must\ be\ an\ int\ >=\ 1;\ got\ int\ 0"),
    ("config: positional", lambda: attention.AttentionConfig(9, 9), TypeError, r"positional"),
    ("make_model: not a config", lambda: attention.make_model(9), TypeError,
     r"config must be an AttentionConfig; got int"),
    ("make_model: the plain seq2seq config",
     lambda: attention.make_model(seq2seq.Seq2SeqConfig(src_vocab_size=9, tgt_vocab_size=9)),
     TypeError, r"config must be an AttentionConfig; got Seq2SeqConfig"),
]


@pytest.mark.parametrize("call, error, message", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_input_raises_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_dot_config_without_bidirectional_encoder_is_accepted():
    model = attention.make_model(config(score="dot", bidirectional=False, d_model=8, d_emb=4))
    assert isinstance(model.decoder.score, attention.DotScore)
