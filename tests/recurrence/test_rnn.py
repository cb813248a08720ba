"""lecturelib.recurrence.rnn: the from-scratch Elman RNN against torch.nn.RNN, Jacobian norms against an
explicit product, the stream layout, truncated BPTT, sampling, pooling and one-batch overfits."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lecturelib import check, train
from lecturelib.recurrence import gradients, rnn


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.delenv(train.PROGRESS_ENV, raising=False)


def test_cell_and_rnn_shapes():
    torch.manual_seed(0)
    cell = rnn.ElmanCell(3, 5)
    check.shape(cell(torch.randn(2, 3), torch.zeros(2, 5)), "b d", b=2, d=5)
    out, h = rnn.ElmanRNN(3, 5, n_layers=2)(torch.randn(4, 7, 3))
    check.shape(out, "b t d", b=4, t=7, d=5)
    check.shape(h, "l b d", l=2, b=4, d=5)
    check.close(out[:, -1], h[-1])  # the top layer's last output is its last state


@pytest.mark.parametrize("n_layers", [1, 3])
def test_ours_equals_torch_rnn_with_copied_weights(n_layers):
    torch.manual_seed(0)
    reference = nn.RNN(4, 6, n_layers, batch_first=True)
    ours = rnn.from_torch(reference)
    x, h0 = torch.randn(3, 9, 4), torch.randn(n_layers, 3, 6)
    for state in (None, h0):
        out, h = ours(x, state)
        out_ref, h_ref = reference(x, state)
        check.close(out, out_ref, atol=1e-6, name="outputs")
        check.close(h, h_ref, atol=1e-6, name="last states")


def test_from_torch_and_forward_reject_what_they_cannot_handle():
    with pytest.raises(TypeError, match="torch.nn.RNN"):
        rnn.from_torch(nn.LSTM(2, 3, batch_first=True))
    with pytest.raises(ValueError, match="tanh"):
        rnn.from_torch(nn.RNN(2, 3, nonlinearity="relu", batch_first=True))
    with pytest.raises(ValueError, match="batch_first"):
        rnn.from_torch(nn.RNN(2, 3))
    model = rnn.ElmanRNN(2, 3, n_layers=2)
    with pytest.raises(ValueError, match=r"d_in=2.*\(4, 5, 3\)"):
        model(torch.zeros(4, 5, 3))
    with pytest.raises(ValueError, match=r"\(2, 4, 3\).*\(1, 4, 3\)"):
        model(torch.zeros(4, 5, 2), torch.zeros(1, 4, 3))
    with pytest.raises(ValueError, match="n_layers"):
        rnn.ElmanRNN(2, 3, n_layers=0)


def explicit_jacobian_norms(cell, x):
    """‖∂h_T/∂h_{T-k}‖ as the product of the one-step Jacobians diag(1 - h_s²) W_h."""
    h, states = torch.zeros(cell.W_h.shape[0], dtype=x.dtype), []
    with torch.no_grad():
        for x_t in x:
            h = cell(x_t[None], h[None])[0]
            states.append(h)
        jac, norms = torch.eye(len(h), dtype=x.dtype), [1.0]
        for h_s in reversed(states):  # ∂h_T/∂h_{t-1} = ∂h_T/∂h_t · diag(1 - h_t²) W_h
            jac = jac @ torch.diag(1 - h_s**2) @ cell.W_h
            norms.append(torch.linalg.matrix_norm(jac, ord=2).item())
    return torch.tensor(norms, dtype=x.dtype)


def test_jacobian_norms_equal_the_explicit_product():
    torch.manual_seed(0)
    cell = rnn.ElmanCell(3, 4).double()
    x = torch.randn(7, 3, dtype=torch.float64)
    norms = gradients.jacobian_norms(cell, x)
    check.shape(norms, "k", k=8)
    check.close(norms, explicit_jacobian_norms(cell, x), atol=1e-10)


def test_jacobian_norms_known_answers():
    cell = rnn.ElmanCell(2, 3)
    with torch.no_grad():
        cell.W_h.zero_()  # no recurrence: h_T does not depend on any earlier state
    norms = gradients.jacobian_norms(cell, torch.randn(4, 2))
    check.close(norms, torch.tensor([1.0, 0.0, 0.0, 0.0, 0.0]))
    with pytest.raises(ValueError, match=r"\(t, d_in=2\)"):
        gradients.jacobian_norms(cell, torch.randn(2, 4, 2))


def test_init_recurrent_schemes():
    w = torch.empty(20, 20)
    gradients.init_recurrent_(w, "radius", 1.5, generator=torch.Generator().manual_seed(0))
    assert torch.linalg.eigvals(w).abs().max().item() == pytest.approx(1.5, rel=1e-5)
    gradients.init_recurrent_(w, "orthogonal", 0.5)
    check.close(w @ w.T, 0.25 * torch.eye(20), atol=1e-5)
    gradients.init_recurrent_(w, "identity")
    check.close(w, torch.eye(20))
    with pytest.raises(ValueError, match="scheme"):
        gradients.init_recurrent_(w, "xavier")
    with pytest.raises(ValueError, match="square"):
        gradients.init_recurrent_(torch.empty(2, 3))


def test_clip_grad_norm_matches_torch():
    torch.manual_seed(0)
    grads = [torch.randn(3, 4) * 10, torch.randn(5)]
    params = [nn.Parameter(torch.zeros_like(g)) for g in grads]
    for p, g in zip(params, grads):
        p.grad = g.clone()
    expected_norm = nn.utils.clip_grad_norm_(params, 1.0)
    ours = [g.clone() for g in grads]
    norm = gradients.clip_grad_norm(ours, 1.0)
    assert norm == pytest.approx(expected_norm.item(), rel=1e-6)
    for g, p in zip(ours, params):
        check.close(g, p.grad)
    small = [torch.tensor([0.3, 0.4])]
    assert gradients.clip_grad_norm(small, 1.0) == pytest.approx(0.5)
    check.close(small[0], torch.tensor([0.3, 0.4]))  # below the threshold: unchanged
    with pytest.raises(ValueError, match="max_norm"):
        gradients.clip_grad_norm(small, 0.0)


def test_consecutive_chunks_are_contiguous_in_the_stream():
    ids = torch.arange(103)
    streams = rnn.batchify(ids, 4)
    check.shape(streams, "b n", b=4, n=25)
    n_chunks = (25 - 1) // 6
    for row in range(4):
        xs = torch.cat([rnn.chunk(streams, k, 6)[0][row] for k in range(n_chunks)])
        start = row * 25
        check.close(xs, torch.arange(start, start + 6 * n_chunks))  # no gaps, no overlaps
    x, y = rnn.chunk(streams, 2, 6)
    check.close(y, x + 1)  # targets are the next tokens of the same stream
    with pytest.raises(ValueError, match="0..3"):
        rnn.chunk(streams, 4, 6)
    with pytest.raises(ValueError, match="1-D"):
        rnn.batchify(ids.view(1, -1), 2)
    with pytest.raises(ValueError, match="too few"):
        rnn.batchify(torch.arange(5), 4)
    with pytest.raises(ValueError, match="batch_size"):
        rnn.batchify(ids, 0)
    with pytest.raises(ValueError, match="seq_len"):
        rnn.chunk(streams, 0, 0)


def test_truncated_bptt_carries_the_state_and_equals_one_long_pass():
    torch.manual_seed(0)
    model = rnn.CharRNN(11, 4, 8)
    ids = torch.randint(0, 11, (2 * 31,))
    tb = rnn.TruncatedBPTT(ids, batch_size=2, seq_len=5)
    assert tb.n_chunks == 6
    chunked, h = [], None
    for step in range(tb.n_chunks):
        x, y, first = tb.batch(step)
        assert first == (step == 0)
        with torch.no_grad():
            chunked.append(model(x, h)[0])
        tb.loss(model, (x, y, first)).backward()  # no optimiser step: the weights stay fixed
        assert not tb.h.requires_grad  # the carried state is cut from the graph
        h = tb.h
    whole, _ = model(tb.streams[:, : 5 * tb.n_chunks])
    check.close(torch.cat(chunked, dim=1), whole, atol=1e-5)
    assert tb.batch(tb.n_chunks)[2]  # a new epoch starts from a fresh state
    with pytest.raises(ValueError, match="no chunk"):
        rnn.TruncatedBPTT(torch.arange(20), batch_size=4, seq_len=8)


def test_char_rnn_equals_the_from_scratch_oracle():
    torch.manual_seed(0)
    model = rnn.CharRNN(13, 6, 10, n_layers=2)
    x = torch.randint(0, 13, (3, 8))
    logits, h = model(x)
    check.shape(logits, "b t v", b=3, t=8, v=13)
    model.rnn = rnn.from_torch(model.rnn)
    logits_ref, h_ref = model(x)
    check.close(logits, logits_ref, atol=1e-5)
    check.close(h, h_ref, atol=1e-6)
    with pytest.raises(TypeError, match="long"):
        model(torch.zeros(3, 8))


def test_stream_nll_of_a_uniform_model_is_log_v():
    model = rnn.CharRNN(7, 3, 4)
    with torch.no_grad():
        model.readout.weight.zero_()
        model.readout.bias.zero_()
    nll = rnn.stream_nll(model, torch.randint(0, 7, (100,)), batch_size=3, seq_len=8)
    assert nll == pytest.approx(math.log(7), rel=1e-6)


def test_sample_lengths_temperature_and_stop():
    torch.manual_seed(0)
    model = rnn.CharRNN(9, 4, 8)
    prompt = torch.tensor([1, 2, 3])
    out = rnn.sample(model, prompt, 10, generator=torch.Generator().manual_seed(0))
    check.shape(out, "t", t=13)
    check.close(out[:3], prompt)
    greedy = [rnn.sample(model, prompt, 6, temperature=0) for _ in range(2)]
    check.close(greedy[0], greedy[1])
    first = int(greedy[0][3])
    stopped = rnn.sample(model, prompt, 6, temperature=0, stop_id=first)
    check.close(stopped, greedy[0][:4])  # the stop token is kept, nothing after it
    with pytest.raises(ValueError, match="temperature"):
        rnn.sample(model, prompt, 2, temperature=-1.0)
    with pytest.raises(ValueError, match="prompt"):
        rnn.sample(model, prompt[None], 2)


def test_pooling_ignores_padding():
    states = torch.tensor([[[1.0, -1.0], [3.0, 5.0], [99.0, 99.0]],
                           [[2.0, 4.0], [-99.0, 99.0], [99.0, -99.0]]])  # (b=2, t=3, d=2)
    mask = torch.tensor([[True, True, False], [True, False, False]])
    check.close(rnn.pool(states, mask, "last"), torch.tensor([[3.0, 5.0], [2.0, 4.0]]))
    check.close(rnn.pool(states, mask, "mean"), torch.tensor([[2.0, 2.0], [2.0, 4.0]]))
    check.close(rnn.pool(states, mask, "max"), torch.tensor([[3.0, 5.0], [2.0, 4.0]]))
    with pytest.raises(ValueError, match="how"):
        rnn.pool(states, mask, "sum")
    with pytest.raises(ValueError, match="bool"):
        rnn.pool(states, mask.long(), "mean")
    with pytest.raises(ValueError, match="at least one"):
        rnn.pool(states, torch.zeros(2, 3, dtype=torch.bool), "mean")


def test_pad_sequences_and_classifier_ignore_padding():
    x, mask = rnn.pad_sequences([torch.tensor([5, 6, 7]), torch.tensor([8])])
    check.close(x, torch.tensor([[5, 6, 7], [8, 0, 0]]))
    check.close(mask, torch.tensor([[True, True, True], [True, False, False]]))
    torch.manual_seed(0)
    config = rnn.ClassifierConfig(vocab_size=10, d_emb=4, d_model=6, n_classes=3)
    for how in rnn.POOLINGS:
        model = rnn.RNNClassifier(config, pooling=how)
        longer = torch.cat([x, torch.full((2, 4), 9)], dim=1)  # more padding, other pad symbols
        more = torch.cat([mask, torch.zeros(2, 4, dtype=torch.bool)], dim=1)
        check.close(model(x, mask), model(longer, more), atol=1e-6, name=how)
    with pytest.raises(ValueError, match="pooling"):
        rnn.RNNClassifier(config, pooling="attention")
    with pytest.raises(ValueError, match="at least 1 token id"):
        rnn.pad_sequences([torch.tensor([1]), torch.tensor([], dtype=torch.long)])


def test_char_rnn_overfits_one_batch():
    torch.manual_seed(0)
    model = rnn.CharRNN(8, 8, 32)
    x = torch.randint(0, 8, (4, 12))
    y = torch.roll(x, -1, dims=1)

    def loss_fn(m, batch):
        logits, _ = m(batch[0])
        return F.cross_entropy(logits.flatten(0, 1), batch[1].flatten())

    hist = train.fit(model, lambda step: (x, y), loss_fn, steps=80, lr=3e-2, progress=False)
    assert hist.train_loss[-1] < 0.1 < math.log(8) / 2 < hist.train_loss[0]


def test_classifier_overfits_one_batch():
    torch.manual_seed(0)
    x, mask = rnn.pad_sequences([torch.randint(1, 12, (n,)) for n in (3, 7, 5, 2, 6, 4)])
    y = torch.tensor([0, 1, 1, 0, 1, 0])
    config = rnn.ClassifierConfig(vocab_size=12, d_emb=8, d_model=16, n_classes=2)
    for how in rnn.POOLINGS:
        model = rnn.RNNClassifier(config, pooling=how)
        train.fit(model, lambda step: (x, mask, y),
                  lambda m, b: F.cross_entropy(m(b[0], b[1]), b[2]),
                  steps=60, lr=3e-2, progress=False)
        assert (model(x, mask).argmax(1) == y).all(), how
