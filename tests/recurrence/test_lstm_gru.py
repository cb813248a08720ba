"""lecturelib.recurrence.lstm_gru: the from-scratch LSTM and GRU against torch.nn (layers and directions),
parameter-count formulas, the backward direction as a reversed sequence, gate traces, a cell
that keeps its memory exactly, the character LSTM with chapter 2's tools, and bad inputs."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lecturelib import check, train
from lecturelib.recurrence import lstm_gru, rnn

TORCH = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.delenv(train.PROGRESS_ENV, raising=False)


def random_state(kind, n, b, d):
    if kind == "lstm":
        return torch.randn(n, b, d), torch.randn(n, b, d)
    return torch.randn(n, b, d)


def assert_same_state(kind, ours, ref):
    if kind == "lstm":
        check.close(ours[0], ref[0], atol=1e-6, name="h_n")
        check.close(ours[1], ref[1], atol=1e-6, name="c_n")
    else:
        check.close(ours, ref, atol=1e-6, name="h_n")


def test_cell_shapes():
    torch.manual_seed(0)
    h, c = lstm_gru.LSTMCell(3, 5)(torch.randn(2, 3), (torch.zeros(2, 5), torch.zeros(2, 5)))
    check.shape(h, "b d", b=2, d=5)
    check.shape(c, "b d", b=2, d=5)
    (h,) = lstm_gru.GRUCell(3, 5)(torch.randn(2, 3), (torch.zeros(2, 5),))
    check.shape(h, "b d", b=2, d=5)
    out, (h_n, c_n) = lstm_gru.Recurrent("lstm", 3, 5, n_layers=2, bidirectional=True)(
        torch.randn(4, 7, 3))
    check.shape(out, "b t d", b=4, t=7, d=10)
    check.shape(h_n, "l b d", l=4, b=4, d=5)
    check.shape(c_n, "l b d", l=4, b=4, d=5)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("n_layers,bidirectional", [(1, False), (3, False), (2, True)])
def test_ours_equals_torch_with_copied_weights(kind, n_layers, bidirectional):
    torch.manual_seed(0)
    reference = TORCH[kind](4, 6, n_layers, batch_first=True, bidirectional=bidirectional)
    ours = lstm_gru.from_torch(reference)
    x = torch.randn(3, 9, 4)
    for state in (None, random_state(kind, n_layers * (1 + bidirectional), 3, 6)):
        out, last = ours(x, state)
        out_ref, last_ref = reference(x, state)
        check.close(out, out_ref, atol=1e-6, name="outputs")
        assert_same_state(kind, last, last_ref)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_gradients_equal_torch(kind):
    torch.manual_seed(0)
    reference = TORCH[kind](3, 4, batch_first=True)
    ours = lstm_gru.from_torch(reference)
    x = torch.randn(2, 6, 3)
    ours(x)[0].square().sum().backward()
    reference(x)[0].square().sum().backward()
    check.close(ours.cells[0].W_h.grad, reference.weight_hh_l0.grad, atol=1e-5)


@pytest.mark.parametrize("kind", lstm_gru.KINDS)
@pytest.mark.parametrize("n_layers", [1, 2, 3])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_parameter_count_formula(kind, n_layers, bidirectional):
    module = TORCH[kind](5, 7, n_layers, bidirectional=bidirectional)
    assert lstm_gru.n_params(kind, 5, 7, n_layers, bidirectional) == train.count_parameters(module)


def test_gru_has_three_quarters_of_the_lstm_parameters():
    assert 4 * lstm_gru.n_params("gru", 8, 16) == 3 * lstm_gru.n_params("lstm", 8, 16)
    assert 4 * lstm_gru.n_params("rnn", 8, 16) == lstm_gru.n_params("lstm", 8, 16)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_backward_direction_is_the_reversed_sequence(kind):
    torch.manual_seed(0)
    model = lstm_gru.Recurrent(kind, 3, 4, bidirectional=True)
    x = torch.randn(2, 8, 3)
    out, _ = model(x)
    backward, _ = lstm_gru.scan(model.cells[1], x.flip(1))
    check.close(out[..., 4:], backward.flip(1), name="backward half")
    forward, _ = lstm_gru.scan(model.cells[0], x)
    check.close(out[..., :4], forward, name="forward half")


def test_saturated_gates_keep_the_cell_state_exactly():
    torch.manual_seed(0)
    cell = lstm_gru.LSTMCell(3, 4)
    with torch.no_grad():  # forget gate σ(+30) = 1, input gate σ(-30) = 0 in float32
        cell.W_x[:8].zero_()
        cell.W_h[:8].zero_()
        cell.b[:4].fill_(-30.0)
        cell.b[4:8].fill_(30.0)
    c0 = torch.randn(2, 4)
    state = (torch.randn(2, 4), c0)
    _, (_, c_n) = lstm_gru.scan(cell, torch.randn(2, 50, 3) * 10, state)
    assert torch.equal(c_n, c0)


def test_gru_update_gate_one_keeps_the_state():
    cell = lstm_gru.GRUCell(2, 3)
    with torch.no_grad():
        cell.W_x[3:6].zero_()
        cell.W_h[3:6].zero_()
        cell.b_x[3:6].fill_(30.0)  # z = 1: h_t = h_{t-1}
    h0 = torch.randn(2, 3)
    _, (h_n,) = lstm_gru.scan(cell, torch.randn(2, 20, 2), (h0,))
    assert torch.equal(h_n, h0)


def test_cell_path_jacobian_is_diag_f():
    torch.manual_seed(0)
    cell = lstm_gru.LSTMCell(2, 3).double()
    x_t, h = torch.randn(1, 2, dtype=torch.float64), torch.randn(1, 3, dtype=torch.float64)
    c = torch.randn(1, 3, dtype=torch.float64)
    jac = torch.autograd.functional.jacobian(lambda c_: cell(x_t, (h, c_[None]))[1][0], c[0])
    check.close(jac, torch.diag(cell.gates(x_t, h)["f"][0]), atol=1e-12)


@pytest.mark.parametrize("kind,names", [("lstm", "i f g o c h"), ("gru", "r z n h")])
def test_trace_gates_agrees_with_scan(kind, names):
    torch.manual_seed(0)
    cell = lstm_gru.CELLS[kind](2, 3)
    x = torch.randn(4, 6, 2)
    trace = lstm_gru.trace_gates(cell, x)
    assert sorted(trace) == sorted(names.split())
    check.shape(trace["h"], "b t d", b=4, t=6, d=3)
    check.close(trace["h"], lstm_gru.scan(cell, x)[0])
    gate = "f" if kind == "lstm" else "z"
    assert ((trace[gate] > 0) & (trace[gate] < 1)).all()


def test_char_lstm_works_with_chapter_2_tools():
    torch.manual_seed(0)
    model = lstm_gru.CharLSTM(vocab_size=7, d_emb=4, d_model=8, n_layers=2)
    logits, state = model(torch.randint(0, 7, (3, 5)))
    check.shape(logits, "b t v", b=3, t=5, v=7)
    check.shape(state, "two l b d", two=2, l=2, b=3, d=8)
    ids = torch.randint(0, 7, (400,))
    stream = rnn.TruncatedBPTT(ids, batch_size=4, seq_len=10)
    loss = stream.loss(model, stream.batch(0))
    assert stream.h.shape == (2, 2, 4, 8) and not stream.h.requires_grad
    assert loss.item() > 0 and rnn.stream_nll(model, ids, batch_size=2, seq_len=50) > 0
    out = rnn.sample(model, torch.tensor([1, 2]), n_new=6,
                     generator=torch.Generator().manual_seed(0))
    check.shape(out, "t", t=8)
    # carrying the state over two chunks equals reading them in one go
    x = torch.randint(0, 7, (2, 9))
    whole, _ = model(x)
    first, s = model(x[:, :4])
    second, _ = model(x[:, 4:], s)
    check.close(torch.cat([first, second], 1), whole, atol=1e-6)


def test_one_batch_overfit():
    torch.manual_seed(0)
    model = lstm_gru.CharLSTM(vocab_size=5, d_emb=8, d_model=16)
    x = torch.randint(0, 5, (2, 8))
    y = torch.randint(0, 5, (2, 8))

    def loss_fn(m, batch):
        return F.cross_entropy(m(batch[0])[0].flatten(0, 1), batch[1].flatten())

    hist = train.fit(model, lambda step: (x, y), loss_fn, steps=60, lr=5e-2, progress=False)
    assert hist.train_loss[-1] < 0.05 and hist.train_loss[0] > 1.0


def test_bad_inputs_are_rejected():
    model = lstm_gru.Recurrent("lstm", 2, 3, n_layers=2)
    with pytest.raises(ValueError, match=r"d_in=2.*\(4, 5, 3\)"):
        model(torch.zeros(4, 5, 3))
    with pytest.raises(ValueError, match=r"\(2, 4, 3\).*\(1, 4, 3\)"):
        model(torch.zeros(4, 5, 2), (torch.zeros(1, 4, 3), torch.zeros(1, 4, 3)))
    with pytest.raises(ValueError, match=r"\(b, t, d_in\)"):
        model(torch.zeros(5, 2))
    with pytest.raises(ValueError, match="kind"):
        lstm_gru.Recurrent("transformer", 2, 3)
    with pytest.raises(ValueError, match="n_layers"):
        lstm_gru.Recurrent("gru", 2, 3, n_layers=0)
    with pytest.raises(TypeError, match="LSTMCell or GRUCell"):
        lstm_gru.scan(nn.Linear(2, 3), torch.zeros(1, 4, 2))
    with pytest.raises(ValueError, match="state"):
        lstm_gru.scan(lstm_gru.GRUCell(2, 3), torch.zeros(1, 4, 2), (torch.zeros(2, 3),))
    with pytest.raises(TypeError, match="torch.nn.LSTM or torch.nn.GRU"):
        lstm_gru.from_torch(nn.RNN(2, 3, batch_first=True))
    with pytest.raises(ValueError, match="batch_first"):
        lstm_gru.from_torch(nn.LSTM(2, 3))
    with pytest.raises(ValueError, match="kind"):
        lstm_gru.n_params("mamba", 2, 3)
    with pytest.raises(ValueError, match="positive ints"):
        lstm_gru.n_params("gru", 2, 0)
    with pytest.raises(TypeError, match=r"x must be an integer \(long\) tensor"):
        lstm_gru.CharLSTM(5, 2, 3)(torch.zeros(2, 3))
