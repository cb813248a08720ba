"""lecturelib.recurrence.lstm_gru refuses bad input with a message that names the argument, what was expected
and what was given (one row per wrong input)."""

from __future__ import annotations

import pytest
import torch

from lecturelib.recurrence import lstm_gru

LSTM_CELL = lstm_gru.LSTMCell(2, 3)
GRU_CELL = lstm_gru.GRUCell(2, 3)
LSTM = lstm_gru.Recurrent("lstm", 2, 3)
GRU = lstm_gru.Recurrent("gru", 2, 3)
CHAR = lstm_gru.CharLSTM(5, 3, 4)
X = torch.zeros(4, 5, 2)
H = torch.zeros(4, 3)

CASES = [
    # LSTMCell, GRUCell: zero sizes no longer end in ZeroDivisionError
    (lambda: lstm_gru.LSTMCell(2, 0), ValueError, r"d_model must be an int >= 1; got int 0"),
    (lambda: lstm_gru.GRUCell(0, 3), ValueError, r"d_in must be an int >= 1; got int 0"),
    (lambda: lstm_gru.GRUCell(2, 3.5), ValueError, r"d_model must be an int >= 1; got float 3.5"),
    # scan, trace_gates
    (lambda: lstm_gru.scan(torch.nn.LSTMCell(2, 3), X), TypeError,
     r"cell must be a lecturelib.recurrence.lstm_gru.LSTMCell or GRUCell \(torch.nn cells are not accepted\); "
     r"got torch.nn.modules.rnn.LSTMCell"),
    (lambda: lstm_gru.scan(torch.nn.Linear(2, 3), X), TypeError, r"got torch.nn.modules.linear.Linear"),
    (lambda: lstm_gru.trace_gates(torch.nn.GRUCell(2, 3), X), TypeError,
     r"cell must be a lecturelib.recurrence.lstm_gru.LSTMCell or GRUCell .*torch.nn.modules.rnn.GRUCell"),
    (lambda: lstm_gru.scan(LSTM_CELL, X[..., :1]), ValueError,
     r"x must be \(b, t, d_in=2\); got shape \(4, 5, 1\)"),
    (lambda: lstm_gru.scan(LSTM_CELL, X[0]), ValueError, r"x must be \(b, t, d_in=2\); got shape \(5, 2\)"),
    (lambda: lstm_gru.scan(LSTM_CELL, X.long()), TypeError, r"x must be a float tensor \(b, t, d_in=2\)"),
    (lambda: lstm_gru.scan(LSTM_CELL, X, (H,)), ValueError,
     r"state must be 2 tensor\(s\) of shape \(b, d_model\) = \(4, 3\); got \[\(4, 3\)\]"),
    (lambda: lstm_gru.scan(GRU_CELL, X, (H[:2],)), ValueError,
     r"state must be 1 tensor\(s\) .*= \(4, 3\); got \[\(2, 3\)\]"),
    (lambda: lstm_gru.scan(GRU_CELL, X, H), ValueError, r"state must be 1 tensor\(s\) .*got torch.float32"),
    (lambda: lstm_gru.scan(GRU_CELL, X, ([[0.0]],)), ValueError, r"state must be .*got \['list"),
    # Recurrent
    (lambda: lstm_gru.Recurrent("rnn", 2, 3), ValueError, r"kind must be one of \['gru', 'lstm'\]"),
    (lambda: lstm_gru.Recurrent("lstm", 2, 0), ValueError, r"d_model must be an int >= 1; got int 0"),
    (lambda: lstm_gru.Recurrent("lstm", 2, 3, n_layers=0), ValueError, r"n_layers must be an int >= 1"),
    (lambda: LSTM(X[0]), ValueError, r"x must be \(b, t, d_in\); got shape \(5, 2\)"),
    (lambda: LSTM(X.long()), TypeError, r"x must be a float tensor \(b, t, d_in\)"),
    (lambda: LSTM(X, torch.zeros(1, 4, 3)), ValueError,
     r"state must be \(h0, c0\), each \(l·dirs, b, d_model\) = \(1, 4, 3\); got torch.float32"),
    (lambda: LSTM(X, (torch.zeros(1, 4, 3), torch.zeros(2, 4, 3))), ValueError,
     r"= \(1, 4, 3\); got \[\(1, 4, 3\), \(2, 4, 3\)\]"),
    (lambda: GRU(X, torch.zeros(1, 3, 3)), ValueError, r"state must be h0 .*got \[\(1, 3, 3\)\]"),
    # from_torch, n_params
    (lambda: lstm_gru.from_torch(torch.nn.RNN(2, 3, batch_first=True)), TypeError,
     r"expected a torch.nn.LSTM or torch.nn.GRU; got RNN"),
    (lambda: lstm_gru.from_torch(torch.nn.LSTM(2, 3)), ValueError, r"only batch_first modules"),
    (lambda: lstm_gru.from_torch(torch.nn.LSTM(2, 3, batch_first=True, proj_size=2)), ValueError,
     r"no projection"),
    (lambda: lstm_gru.n_params("transformer", 2, 3), ValueError, r"kind must be one of"),
    (lambda: lstm_gru.n_params("lstm", 2, 0), ValueError, r"must be positive ints; got 2, 0, 1"),
    # CharLSTM
    (lambda: lstm_gru.CharLSTM(5, 3, 0), ValueError, r"d_model must be an int >= 1; got int 0"),
    (lambda: CHAR(torch.zeros(2, 3)), TypeError, r"x must be an integer \(long\) tensor"),
    (lambda: CHAR(torch.full((2, 3), -1)), ValueError, r"x must hold token ids in 0\.\.4; got .*-1"),
    (lambda: CHAR(torch.full((2, 3), 9)), ValueError, r"x must hold token ids in 0\.\.4"),
    (lambda: CHAR(torch.zeros(2, 3, dtype=torch.long), torch.zeros(1, 2, 4)), ValueError,
     r"state must be \(h, c\) stacked, \(2, l, b, d_model\) = \(2, 1, 2, 4\); got"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()
