"""lecturelib.recurrence.seq2seq: encoder context, padding-masked loss, teacher forcing, greedy decoding, BLEU."""

from __future__ import annotations

import math

import pytest
import sacrebleu
import torch
import torch.nn.functional as F

from lecturelib import metrics, plot, train
from lecturelib.recurrence import bleu, seq2seq
from lecturelib.recurrence import translation as tr
from lecturelib.recurrence.translation import EOS_ID, PAD_ID

from translation_helpers import V_SRC, V_TGT, toy_batch, toy_corpus  # noqa: E402


def config(**kw) -> seq2seq.Seq2SeqConfig:
    return seq2seq.Seq2SeqConfig(src_vocab_size=V_SRC, tgt_vocab_size=V_TGT, d_emb=8, d_model=16,
                                 **kw)


def tiny_model(seed=0, **kw) -> seq2seq.Seq2Seq:
    torch.manual_seed(seed)
    return seq2seq.make_model(config(**kw))


@pytest.mark.parametrize("bidirectional,n_layers,context",
                         [(True, 1, "last"), (False, 2, "last"), (True, 2, "mean")])
def test_encoder_shapes(bidirectional, n_layers, context):
    enc = seq2seq.Encoder(config(n_layers=n_layers, bidirectional=bidirectional, context=context))
    b = toy_batch()
    out = enc(b.src, b.src_len)
    d_enc = 32 if bidirectional else 16
    assert enc.d_enc == d_enc
    assert out.states.shape == (3, 5, d_enc) and out.context.shape == (3, d_enc)
    assert torch.equal(out.mask, b.src_mask)
    assert (out.states[~out.mask] == 0).all()  # nothing is computed at padded positions


def test_last_context_is_final_forward_and_backward_state():
    enc = seq2seq.Encoder(config(bidirectional=True, context="last"))
    b = toy_batch()
    out = enc(b.src, b.src_len)
    for i, n in enumerate(b.src_len.tolist()):
        torch.testing.assert_close(out.context[i, :16], out.states[i, n - 1, :16])  # forward
        torch.testing.assert_close(out.context[i, 16:], out.states[i, 0, 16:])      # backward


def test_mean_context_averages_real_positions():
    enc = seq2seq.Encoder(config(context="mean"))
    b = toy_batch()
    out = enc(b.src, b.src_len)
    for i, n in enumerate(b.src_len.tolist()):
        torch.testing.assert_close(out.context[i], out.states[i, :n].mean(0))


@pytest.mark.parametrize("bidirectional,n_layers", [(True, 1), (False, 2), (True, 2)])
def test_run_packed_equals_torchs_unsorted_packing(bidirectional, n_layers):
    """Sorting on the CPU and restoring the order gives torch's enforce_sorted=False result,
    ties in the lengths included."""
    torch.manual_seed(0)
    gru = torch.nn.GRU(4, 6, n_layers, batch_first=True, bidirectional=bidirectional)
    x, lengths = torch.randn(9, 7, 4), torch.tensor([3, 7, 1, 3, 5, 7, 2, 3, 6])
    packed = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True,
                                                     enforce_sorted=False)
    out, h_n = gru(packed)
    states, _ = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=7)
    ours, ours_h_n = seq2seq.run_packed(gru, x, lengths)
    assert torch.equal(ours, states) and torch.equal(ours_h_n, h_n)


def test_encoder_and_decoder_read_their_sizes_from_the_config():
    c = config(n_layers=2, bidirectional=False, context="mean")
    enc, dec = seq2seq.Encoder(c), seq2seq.Decoder(c)
    assert enc.embed.num_embeddings == V_SRC and dec.embed.num_embeddings == V_TGT
    assert enc.d_enc == c.d_enc == 16 and config().d_enc == 32
    assert enc.rnn.num_layers == dec.rnn.num_layers == 2 and not enc.rnn.bidirectional
    assert dec.bridge.in_features == c.d_enc and dec.rnn.input_size == 8 + c.d_enc
    torch.manual_seed(0)
    model = seq2seq.make_model(c)
    torch.manual_seed(0)
    parts = seq2seq.Seq2Seq(seq2seq.Encoder(c), seq2seq.Decoder(c))
    assert list(model.state_dict()) == list(parts.state_dict())
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), parts.parameters()))


def test_encoder_rejects_bad_input():
    with pytest.raises(ValueError, match="context must be one of"):
        seq2seq.Encoder(config(context="max"))
    with pytest.raises(TypeError, match="config must be a Seq2SeqConfig"):
        seq2seq.Encoder(V_SRC)
    enc = seq2seq.Encoder(config())
    with pytest.raises(ValueError, match=r"src must be 2-D \(b, t\) token ids"):
        enc(torch.zeros(3, dtype=torch.long), torch.tensor([3]))


def test_masked_loss_equals_ignore_index_and_rejects_bad_shapes():
    logits, targets = torch.randn(2, 4, 7), torch.tensor([[3, 4, 2, 0], [5, 2, 0, 0]])
    torch.testing.assert_close(seq2seq.masked_cross_entropy(logits, targets),
                               F.cross_entropy(logits.flatten(0, 1), targets.flatten(),
                                               ignore_index=PAD_ID))
    with pytest.raises(ValueError, match="disagree"):
        seq2seq.masked_cross_entropy(logits, targets[:, :3])


@pytest.mark.parametrize("context", ["last", "mean"])
def test_padded_loss_equals_unpadded_loss(context):
    model = tiny_model(context=context)
    b = toy_batch()
    padded = seq2seq.loss(model, b)
    total, count = 0.0, 0
    for i, (n_src, n_tgt) in enumerate(zip(b.src_len.tolist(), b.tgt_mask.sum(1).tolist())):
        one = tr.Batch(b.src[i:i + 1, :n_src], b.src_len[i:i + 1], b.tgt_in[i:i + 1, :n_tgt],
                       b.tgt_out[i:i + 1, :n_tgt])
        total += seq2seq.loss(model, one) * n_tgt
        count += n_tgt
    torch.testing.assert_close(padded, total / count)


def test_teacher_forcing_in_one_call_equals_step_by_step():
    model = tiny_model()
    b = toy_batch()
    enc = model.encoder(b.src, b.src_len)
    all_at_once, _, _ = model.decoder(b.tgt_in, enc)
    h, steps = None, []
    for t in range(b.tgt_in.shape[1]):
        logits, h, _ = model.decoder(b.tgt_in[:, t:t + 1], enc, h)
        steps.append(logits)
    torch.testing.assert_close(all_at_once, torch.cat(steps, 1))


def test_greedy_decode_batched_equals_one_by_one_and_pads_after_eos():
    model = tiny_model().eval()
    b = toy_batch()
    ids, weights = seq2seq.greedy_decode(model, b.src, b.src_len, max_len=7)
    assert weights is None and ids.shape[0] == 3 and ids.shape[1] <= 7
    for i, n in enumerate(b.src_len.tolist()):
        alone, _ = seq2seq.greedy_decode(model, b.src[i:i + 1, :n], b.src_len[i:i + 1], 7)
        k = alone.shape[1]
        assert torch.equal(ids[i, :k], alone[0])
        assert (ids[i, k:] == PAD_ID).all()


def test_greedy_decode_stops_at_eos():
    model = tiny_model().eval()
    with torch.no_grad():
        model.decoder.readout.bias.fill_(-100.0)
        model.decoder.readout.bias[EOS_ID] = 100.0  # the decoder always says </s>
    b = toy_batch()
    ids, _ = seq2seq.greedy_decode(model, b.src, b.src_len, max_len=9)
    assert ids.tolist() == [[EOS_ID]] * 3


def overfit(model, batch, steps=80, lr=3e-2) -> float:
    hist = train.fit(model, lambda s: tuple(batch), seq2seq.loss, steps=steps, lr=lr,
                     progress=False)
    return hist.train_loss[-1]


def test_one_batch_overfit_and_greedy_reproduces_targets():
    model = tiny_model()
    b = toy_batch()
    assert overfit(model, b) < 0.05
    ids, _ = seq2seq.greedy_decode(model.eval(), b.src, b.src_len, max_len=10)
    for i, n in enumerate(b.tgt_mask.sum(1).tolist()):
        assert ids[i, :n].tolist() == b.tgt_out[i, :n].tolist()


def test_formula_bleu_equals_sacrebleu():
    hyps = [["the", "cat", "sat", "on", "the", "mat"], ["a", "dog", "is", "here", "now"],
            ["hello", "world", "it", "is", "me"]]
    refs = [["the", "cat", "is", "on", "the", "mat"], ["the", "dog", "is", "here", "now", "."],
            ["hello", "world", "it", "is", "i"]]
    ours = bleu.formula_bleu(hyps, refs)
    theirs = metrics.bleu([" ".join(h) for h in hyps], [" ".join(r) for r in refs],
                          tokenize="none")
    assert abs(ours - theirs) < 1e-9
    assert abs(theirs - sacrebleu.corpus_bleu([" ".join(h) for h in hyps],
                                              [[" ".join(r) for r in refs]],
                                              tokenize="none").score) < 1e-9
    assert bleu.formula_bleu(refs, refs) == pytest.approx(100.0)


def test_formula_bleu_known_answers():
    ref = ["a", "b", "c", "d", "e", "f", "g", "h"]
    # the first half of the reference: every n-gram matches, only the brevity penalty bites
    assert bleu.formula_bleu([ref[:4]], [ref]) == pytest.approx(100 * math.exp(1 - 8 / 4))
    assert bleu.formula_bleu([["x", "y", "z", "w"]], [ref]) == 0.0
    with pytest.raises(ValueError, match="as many hypotheses"):
        bleu.formula_bleu([ref], [])


def test_bleu_report_by_length():
    report = bleu.BleuReport(
        bleu=0.0, sentence_bleu=[100.0, 0.0, 100.0], src_len=[3, 5, 6],
        sources=[["x"]] * 3,
        hypotheses=[["a", "b", "c", "d"], ["q", "r", "s", "t"], ["e", "f", "g", "h", "."]],
        references=[["a", "b", "c", "d"], ["k", "l", "m", "n"], ["e", "f", "g", "h", "."]])
    by_len = report.by_length([1, 4, 6, 8, 9])
    assert list(by_len) == ["1–3", "4–5", "6–7", "8"]
    assert by_len["1–3"] == (pytest.approx(100.0), 1) and by_len["4–5"] == (0.0, 1)
    assert math.isnan(by_len["8"][0]) and by_len["8"][1] == 0


def test_plot_bleu_by_length_draws_groups_and_points():
    report = bleu.BleuReport(
        bleu=0.0, sentence_bleu=[100.0, 0.0, 50.0], src_len=[3, 5, 5], sources=[["x"]] * 3,
        hypotheses=[["a", "b", "c", "d"]] * 3, references=[["a", "b", "c", "d"]] * 3)
    ax = bleu.plot_bleu_by_length(report, [1, 4, 6], "rnn", "model")
    line, points = ax.get_lines()
    assert list(line.get_xdata()) == [2.0, 4.5]
    assert list(points.get_xdata()) == [3, 5] and list(points.get_ydata()) == [100.0, 25.0]
    assert line.get_color() == plot.family_color("rnn")


# --- the training recipe of chapters 4, 5 and 8 ---

def test_val_loss_is_the_token_weighted_mean_whatever_the_batch_size():
    corpus = toy_corpus()
    model = seq2seq.make_model(seq2seq.Seq2SeqConfig(
        src_vocab_size=len(corpus.src_vocab), tgt_vocab_size=len(corpus.tgt_vocab), d_emb=8,
        d_model=16))
    whole = seq2seq.loss(model, corpus.batch(corpus.val))  # one batch: the definition
    for batch_size in (1, 3, 500):
        out = seq2seq.val_loss(model, corpus, "cpu", batch_size=batch_size)
        assert list(out) == ["loss"]
        assert out["loss"] == pytest.approx(whole.item(), rel=1e-5)


def test_train_translator_is_the_documented_recipe_and_learns():
    corpus = toy_corpus()

    def fresh():
        torch.manual_seed(0)
        return seq2seq.make_model(seq2seq.Seq2SeqConfig(
            src_vocab_size=len(corpus.src_vocab), tgt_vocab_size=len(corpus.tgt_vocab),
            d_emb=8, d_model=16))

    hist = seq2seq.train_translator(fresh(), corpus, steps=20, lr=1e-2, batch_size=8,
                                    seed=1, desc="toy")
    model = fresh()  # the recipe written out with train.fit
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ref = train.fit(model, corpus.sampler(8, seed=1, by_length=True), seq2seq.loss,
                    steps=20, optimizer=opt, scheduler=train.warmup_cosine(opt, 20, 2),
                    clip=1.0, evaluation=train.Evaluation(lambda m: seq2seq.val_loss(m, corpus, "cpu"), every=4), progress=False)
    assert hist.eval_steps == [4, 8, 12, 16, 20]                 # 5 evaluations
    torch.testing.assert_close(hist.train_loss, ref.train_loss, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(hist.evals["loss"], ref.evals["loss"], rtol=1e-4, atol=1e-5)
    assert hist.lr[0] == pytest.approx(1e-2) and hist.lr[-1] == pytest.approx(0, abs=1e-12)
    assert all(a >= b for a, b in zip(hist.lr, hist.lr[1:]))      # cosine decay after warm-up
    assert hist.evals["loss"][-1] < hist.evals["loss"][0] < math.log(len(corpus.tgt_vocab))
