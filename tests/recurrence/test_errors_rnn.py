"""lecturelib.recurrence.rnn refuses bad input with a message that names the argument, what was expected and
what was given (one row per wrong input)."""

from __future__ import annotations

import math

import pytest
import torch

from lecturelib.recurrence import gradients, rnn

ELMAN = rnn.ElmanRNN(2, 3)
CELL = rnn.ElmanCell(2, 3)
CHAR = rnn.CharRNN(5, 3, 4)


def classifier_config(**kw):
    return rnn.ClassifierConfig(**{"vocab_size": 5, "d_emb": 3, "d_model": 4, "n_classes": 2} | kw)


CLASSIFIER = rnn.RNNClassifier(classifier_config())
IDS = torch.arange(20) % 5
STREAMS = rnn.batchify(IDS, 2)
MASK = torch.ones(2, 3, dtype=torch.bool)

CASES = [
    # ElmanCell, ElmanRNN: zero sizes no longer end in ZeroDivisionError
    (lambda: rnn.ElmanCell(4, 0), ValueError, r"d_model must be an int >= 1; got int 0"),
    (lambda: rnn.ElmanCell(0, 4), ValueError, r"d_in must be an int >= 1; got int 0"),
    (lambda: rnn.ElmanRNN(4, 0), ValueError, r"d_model must be an int >= 1; got int 0"),
    (lambda: rnn.ElmanRNN(4, 3.0), ValueError, r"d_model must be an int >= 1; got float 3.0"),
    (lambda: rnn.ElmanRNN(4, 3, 0), ValueError, r"n_layers must be an int >= 1; got int 0"),
    (lambda: ELMAN(torch.zeros(4, 5, 3)), ValueError, r"x must be \(b, t, d_in=2\); got shape"),
    (lambda: ELMAN(torch.zeros(4, 5)), ValueError, r"x must be \(b, t, d_in=2\); got shape \(4, 5\)"),
    (lambda: ELMAN(torch.zeros(4, 5, 2, dtype=torch.long)), TypeError,
     r"x must be a float tensor \(b, t, d_in=2\); got torch.int64"),
    (lambda: ELMAN(torch.zeros(4, 5, 2), torch.zeros(1, 3, 3)), ValueError,
     r"h0 must be \(l, b, d_model\) = \(1, 4, 3\); got \(1, 3, 3\)"),
    (lambda: ELMAN(torch.zeros(4, 5, 2), [[0.0]]), TypeError, r"h0 must be a float tensor"),
    # from_torch
    (lambda: rnn.from_torch(torch.nn.GRU(2, 3)), TypeError, r"expected a torch.nn.RNN; got GRU"),
    (lambda: rnn.from_torch(torch.nn.RNN(2, 3, nonlinearity="relu", batch_first=True)),
     ValueError, r"only tanh, unidirectional, batch_first"),
    (lambda: rnn.from_torch(torch.nn.RNN(2, 3)), ValueError, r"batch_first"),
    # jacobian_norms, init_recurrent_, clip_grad_norm
    (lambda: gradients.jacobian_norms(torch.nn.RNNCell(2, 3), torch.zeros(4, 2)), TypeError,
     r"cell must be an rnn.ElmanCell; got RNNCell"),
    (lambda: gradients.jacobian_norms(CELL, torch.zeros(4, 3)), ValueError, r"x must be \(t, d_in=2\)"),
    (lambda: gradients.jacobian_norms(CELL, torch.zeros(4, 2, dtype=torch.long)), TypeError,
     r"x must be a float tensor"),
    (lambda: gradients.init_recurrent_(torch.zeros(3, 4)), ValueError, r"must be square \(d, d\)"),
    (lambda: gradients.init_recurrent_(torch.zeros(3, 3), "xavier"), ValueError,
     r"scheme must be 'orthogonal', 'identity' or 'radius'; got 'xavier'"),
    (lambda: gradients.init_recurrent_(torch.zeros(3, 3), scale=math.nan), ValueError,
     r"scale must be a finite number .*got float nan"),
    (lambda: gradients.init_recurrent_([[0.0]]), TypeError, r"weight must be a float tensor"),
    (lambda: gradients.clip_grad_norm([torch.ones(2)], 0.0), ValueError,
     r"max_norm must be a finite number in \(0, inf\); got float 0.0"),
    (lambda: gradients.clip_grad_norm([torch.ones(2)], math.nan), ValueError, r"max_norm .*got float nan"),
    (lambda: gradients.clip_grad_norm(torch.ones(2), 1.0), TypeError, r"grads must be a list of tensors"),
    # batchify, chunk, TruncatedBPTT
    (lambda: rnn.batchify(IDS.view(4, 5), 2), ValueError, r"ids must be 1-D \(t,\) token ids"),
    (lambda: rnn.batchify(IDS.float(), 2), TypeError, r"ids must be an integer \(long\) tensor"),
    (lambda: rnn.batchify(IDS, 0), ValueError, r"batch_size must be an int >= 1; got int 0"),
    (lambda: rnn.batchify(IDS, 15), ValueError, r"20 tokens are too few for 15 streams"),
    (lambda: rnn.chunk(STREAMS, 3, 3), ValueError, r"the chunk index k must be an int in 0\.\.2"),
    (lambda: rnn.chunk(STREAMS, -1, 3), ValueError, r"the chunk index k must be an int in 0\.\.2"),
    (lambda: rnn.chunk(STREAMS, 1.0, 3), ValueError, r"the chunk index k must be an int .*float"),
    (lambda: rnn.chunk(STREAMS, 0, 0), ValueError, r"seq_len must be an int >= 1; got int 0"),
    (lambda: rnn.chunk(IDS, 0, 3), ValueError, r"streams must be 2-D \(b, t\) token ids"),
    (lambda: rnn.TruncatedBPTT(IDS, 2, 0), ValueError, r"seq_len must be an int >= 1; got int 0"),
    (lambda: rnn.TruncatedBPTT(IDS, 2, 10), ValueError, r"streams of 10 tokens hold no chunk"),
    (lambda: rnn.TruncatedBPTT(IDS, 2, 3).batch(-1), ValueError, r"step must be an int >= 0"),
    # CharRNN, stream_nll, sample
    (lambda: rnn.CharRNN(5, 0, 4), ValueError, r"d_emb must be an int >= 1; got int 0"),
    (lambda: rnn.CharRNN(0, 3, 4), ValueError, r"vocab_size must be an int >= 1; got int 0"),
    (lambda: CHAR(torch.zeros(2, 3)), TypeError, r"x must be an integer \(long\) tensor"),
    (lambda: CHAR(torch.zeros(2, 3, 1, dtype=torch.long)), ValueError, r"x must be 2-D \(b, t\)"),
    (lambda: CHAR(torch.full((2, 3), -1)), ValueError, r"x must hold token ids in 0\.\.4; got .*-1"),
    (lambda: CHAR(torch.full((2, 3), 5)), ValueError, r"x must hold token ids in 0\.\.4"),
    (lambda: CHAR(torch.zeros(2, 3, dtype=torch.long), torch.zeros(1, 3, 4)), ValueError,
     r"the state must be \(l, b, d_model\) = \(1, 2, 4\); got torch.float32 tensor of shape"),
    (lambda: rnn.stream_nll(CHAR, IDS, seq_len=0), ValueError, r"seq_len must be an int >= 1"),
    (lambda: rnn.stream_nll(CHAR, IDS + 1, batch_size=2), ValueError, r"x must hold token ids in 0\.\.4"),
    (lambda: rnn.sample(CHAR, torch.tensor([[1]]), 3), ValueError, r"prompt must be 1-D \(t,\)"),
    (lambda: rnn.sample(CHAR, torch.tensor([], dtype=torch.long), 3), ValueError,
     r"prompt must hold at least 1 token id"),
    (lambda: rnn.sample(CHAR, torch.tensor([1.0]), 3), TypeError, r"prompt must be an integer"),
    (lambda: rnn.sample(CHAR, torch.tensor([-1]), 3), ValueError, r"prompt must hold token ids >= 0"),
    (lambda: rnn.sample(CHAR, torch.tensor([1]), -1), ValueError, r"n_new must be an int >= 0"),
    (lambda: rnn.sample(CHAR, torch.tensor([1]), 3, temperature=-1.0), ValueError,
     r"temperature must be a finite number in \[0, inf\); got float -1.0"),
    (lambda: rnn.sample(CHAR, torch.tensor([1]), 3, temperature=math.nan), ValueError,
     r"temperature must be .*got float nan"),
    (lambda: rnn.sample(CHAR, torch.tensor([1]), 3, stop_id=-1), ValueError,
     r"stop_id must be an int >= 0; got int -1"),
    # pad_sequences, pool, RNNClassifier
    (lambda: rnn.pad_sequences([]), TypeError, r"seqs must be a non-empty list of 1-D id tensors"),
    (lambda: rnn.pad_sequences("abc"), TypeError, r"seqs must be a non-empty list .*got str"),
    (lambda: rnn.pad_sequences([torch.tensor([1.0])]), TypeError,
     r"each of seqs must be an integer \(long\) tensor"),
    (lambda: rnn.pad_sequences([torch.tensor([1]), torch.tensor([], dtype=torch.long)]),
     ValueError, r"each of seqs must hold at least 1 token id"),
    (lambda: rnn.pad_sequences([torch.tensor([1])], pad_id=-1), ValueError,
     r"pad_id must be an int >= 0; got int -1"),
    (lambda: rnn.pool(torch.zeros(2, 3, 4), MASK, "attention"), ValueError,
     r"how must be one of \('last', 'mean', 'max'\); got 'attention'"),
    (lambda: rnn.pool(torch.zeros(2, 3, 4), MASK.long(), "mean"), ValueError,
     r"mask must be bool \(b, t\) = \(2, 3\); got torch.int64"),
    (lambda: rnn.pool(torch.zeros(2, 3, 4), MASK[:, :2], "mean"), ValueError,
     r"mask must be bool \(b, t\) = \(2, 3\); got torch.bool \(2, 2\)"),
    (lambda: rnn.pool(torch.zeros(2, 3, 4), ~MASK, "max"), ValueError,
     r"every sequence needs at least one real"),
    (lambda: rnn.pool(torch.zeros(2, 3), MASK, "mean"), ValueError, r"states must be \(b, t, d\)"),
    (lambda: classifier_config(n_classes=0), ValueError, r"n_classes must be an int >= 1; got int 0"),
    (lambda: classifier_config(d_emb=2.0), ValueError, r"d_emb must be an int >= 1; got float 2.0"),
    (lambda: rnn.ClassifierConfig(5, 3, 4, 2), TypeError, r"positional"),
    (lambda: rnn.RNNClassifier(classifier_config(), pooling="sum"), ValueError, r"pooling must be one of"),
    (lambda: rnn.RNNClassifier(5), TypeError, r"config must be a ClassifierConfig; got int 5"),
    (lambda: rnn.RNNClassifier({"vocab_size": 5}), TypeError,
     r"config must be a ClassifierConfig; got dict"),
    (lambda: CLASSIFIER(torch.full((2, 3), 7), MASK), ValueError, r"x must hold token ids in 0\.\.4"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()
