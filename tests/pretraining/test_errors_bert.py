"""Bad input to lecturelib.pretraining.bert: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.pretraining import bert

SP = bert.Specials(10)


def model():
    torch.manual_seed(0)
    return bert.BERT(bert.BERTConfig(vocab_size=SP.vocab_size, max_len=8, d_model=16,
                                     n_heads=2, n_layers=1))


classifier = model
IDS2, LENS2 = torch.zeros(2, 4, dtype=torch.long), torch.tensor([4, 2])

CASES = [
    (lambda: bert.Specials(0), ValueError,
     r"Specials.n_text must be an int >= 1; got int 0"),
    (lambda: bert.mask_tokens(torch.zeros(2, 3), SP), TypeError,
     r"ids must be an integer \(long\) tensor of token ids; got torch.float32"),
    (lambda: bert.mask_tokens(torch.zeros(1, 2, 3, dtype=torch.long), SP), ValueError,
     r"ids must be an integer tensor .*shape \(1, 2, 3\)"),
    (lambda: bert.mask_tokens(torch.tensor([1, 14]), SP), ValueError,
     r"ids must lie in 0..13 \(the ordinary and special tokens\); "
     r"got ids from 1 to 14"),
    (lambda: bert.mask_tokens(torch.tensor([1, 2]), 10), TypeError,
     r"specials must be a Specials; got int 10"),
    (lambda: bert.mask_tokens(torch.tensor([1, 2]), SP, p=1.5), ValueError,
     r"p must be a finite number in \[0, 1\]; got float 1.5"),
    (lambda: bert.mask_tokens(torch.tensor([1, 2]), SP, p_mask=0.8, p_random=0.3),
     ValueError, r"p_mask \+ p_random must be <= 1; got 0.8 \+ 0.3"),
    (lambda: bert.token_stream("abc", SP), TypeError,
     r"sentences must be a list of lists of token ids; got str 'abc'"),
    (lambda: bert.token_stream([[1, 12]], SP), ValueError,
     r"sentences must hold ordinary token ids in 0..9"),
    (lambda: bert.mlm_batches(torch.arange(5), SP, 2, 8), ValueError,
     r"the stream \(5 tokens\) must be at least seq_len=8 long"),
    (lambda: bert.mlm_batches(torch.arange(20) % 10, SP, 0, 8), ValueError,
     r"batch_size must be an int >= 1; got int 0"),
    (lambda: bert.mlm_batches(torch.arange(20) % 10, SP, 2, 1), ValueError,
     r"seq_len must be an int >= 2; got int 1"),
    (lambda: bert.mlm_batches(torch.arange(20.0), SP, 2, 4), TypeError,
     r"stream must be an integer \(long\) tensor of token ids"),
    (lambda: bert.encode_sentence([1, 2], SP, 2), ValueError,
     r"max_len must be an int >= 3; got int 2"),
    (lambda: bert.encode_sentence([1, 11], SP, 5), ValueError,
     r"ids must be a list of ordinary token ids in 0..9; got list \[1, 11\]"),
    (lambda: bert.pad([], 0), ValueError,
     r"rows must be a non-empty list of non-empty lists of ids; got list \[\]"),
    (lambda: bert.pad([[1], []], 0), ValueError, r"rows must be a non-empty list"),
    (lambda: bert.token_stream([[1, 2]], 10), TypeError,
     r"specials must be a Specials; got int 10"),
    (lambda: bert.encode_sentence([1, 2], None, 5), TypeError,
     r"specials must be a Specials; got NoneType"),
    (lambda: bert.mlm_batches(torch.arange(20), SP, 2, 4), ValueError,
     r"stream must hold token ids in 0..13; got ids from 0 to 19"),
    (lambda: bert.mlm_batches(torch.arange(20) % 10, "sp", 2, 4), TypeError,
     r"specials must be a Specials; got str 'sp'"),
    (lambda: bert.classify_loss(classifier(), (IDS2, LENS2, torch.tensor([0, 5]))),
     ValueError, r"labels must be class ids in 0..1; got labels from 0 to 5"),
    (lambda: bert.classify_loss(classifier(), (IDS2, LENS2, torch.tensor([0.0, 1.0]))),
     TypeError, r"labels must be an integer tensor of class ids; got torch.float32"),
    (lambda: bert.classify_loss(classifier(), (IDS2, LENS2)), TypeError,
     r"batch must be a triple \(ids, lengths, labels\); got tuple"),
    (lambda: bert.classify_loss(classifier(), (IDS2, LENS2, torch.tensor([0]))),
     ValueError, r"labels must be \(2,\) class ids; got torch.int64 tensor of shape "
     r"\(1,\)"),
    (lambda: bert.classify_loss("bert", (IDS2, LENS2, torch.tensor([0, 1]))), TypeError,
     r"model must be a torch.nn.Module \(a BERT\); got str 'bert'"),
    (lambda: bert.accuracy("bert", IDS2, LENS2, torch.tensor([0, 1])), TypeError,
     r"model must be a torch.nn.Module \(a BERT\); got str 'bert'"),
    (lambda: bert.pad([[1, 2], [3]], -1), ValueError,
     r"pad_id must be an int >= 0; got int -1"),
    (lambda: bert.pad([[1, 2], [3]], 0.5), ValueError,
     r"pad_id must be an int >= 0; got float 0.5"),
    (lambda: bert.pad([[1.5, 2], [3]], 0), ValueError,
     r"rows must hold token ids \(ints >= 0\); got list \[1.5, 2\]"),
    (lambda: bert.pad([[1, 2], [-3]], 0), ValueError,
     r"rows must hold token ids \(ints >= 0\); got list \[-3\]"),
    (lambda: bert.BERTConfig(vocab_size=14, n_classes=1), ValueError,
     r"BERTConfig.n_classes must be an int >= 2; got int 1"),
    (lambda: bert.BERTConfig(vocab_size=14, pool="max"), ValueError,
     r"BERTConfig.pool must be one of \('cls', 'mean'\); got str 'max'"),
    (lambda: bert.BERTConfig(vocab_size=0), ValueError,
     r"BERTConfig.vocab_size must be an int >= 1; got int 0"),
    (lambda: bert.BERT(bert.BERTConfig), TypeError,
     r"config must be a BERTConfig; got type"),
    (lambda: model()(torch.zeros(1, 9, dtype=torch.long)), ValueError,
     r"ids must be \(b, t\) with t <= max_len=8; got \(1, 9\)"),
    (lambda: model()(torch.tensor([[1, 14]])), ValueError,
     r"ids must hold token ids in 0..13; got ids from 1 to 14"),
    (lambda: model()(torch.tensor([[1, 2]]), torch.tensor([3])), ValueError,
     r"src_len must be \(b,\) = \(1,\) integer lengths in 1..2; got torch.int64 \[3\]"),
    (lambda: bert.accuracy(model(), torch.zeros(2, 3, dtype=torch.long),
                           torch.tensor([3, 3]), torch.tensor([1])), ValueError,
     r"ids, lengths and labels must have the same non-zero length; got 2, 2 and 1"),
    (lambda: bert.accuracy(model(), torch.ones(2, 3, dtype=torch.long),
                           torch.tensor([3, 3]), torch.tensor([0, 2])), ValueError,
     r"labels must be class ids in 0..1; got labels from 0 to 2"),
    (lambda: bert.accuracy(model(), torch.ones(2, 3, dtype=torch.long),
                           torch.tensor([3, 3]), torch.tensor([0, -1])), ValueError,
     r"labels must be class ids >= 0; got labels from -1 to 0"),
    (lambda: bert.accuracy(model(), torch.ones(2, 3, dtype=torch.long),
                           torch.tensor([3, 3]), torch.tensor([0.0, 1.0])), TypeError,
     r"labels must be an integer tensor of class ids; got torch.float32"),
    (lambda: bert.accuracy(model(), torch.ones(2, 3, dtype=torch.long),
                           torch.tensor([3, 3]), torch.tensor([0, 1]), 0), ValueError,
     r"batch_size must be an int >= 1; got int 0"),
    (lambda: bert.mlm_loss(model(), (torch.ones(2, 3, dtype=torch.long),
                                     torch.full((2, 3), bert.IGNORE))), ValueError,
     r"the batch selects no position \(every target is IGNORE = -100\): the mean loss "
     r"over no token is undefined"),
    (lambda: bert.mlm_loss(model(), (torch.ones(2, 3, dtype=torch.long),
                                     torch.full((2, 3), 14))), ValueError,
     r"targets must be token ids in 0..13 or IGNORE = -100; got 14"),
    (lambda: bert.mlm_loss(model(), (torch.ones(2, 3, dtype=torch.long),
                                     torch.ones(2, 3))), TypeError,
     r"targets must be an integer \(long\) tensor of token ids"),
    (lambda: bert.mlm_loss(model(), (torch.ones(2, 3, dtype=torch.long),
                                     torch.ones(2, 2, dtype=torch.long))), ValueError,
     r"targets must have the shape of inputs \(2, 3\); got \(2, 2\)"),
    (lambda: bert.mlm_loss(model(), torch.ones(2, 3, dtype=torch.long)), TypeError,
     r"batch must be a pair \(inputs, targets\) from mask_tokens"),
    (lambda: bert.mlm_loss("bert", (torch.ones(2, 3, dtype=torch.long),) * 2), TypeError,
     r"model must be a BERT; got str"),
    # One sentence without its batch axis: refused by name, not an IndexError.
    (lambda: model().encode(torch.zeros(6, dtype=torch.long)), ValueError,
     r"ids must be \(b, t\) token ids, a batch \(one sentence \(t,\): ids\[None\]\); "
     r"got shape \(6,\)"),
    (lambda: model()(torch.zeros(6, dtype=torch.long)), ValueError,
     r"ids must be \(b, t\) token ids, a batch .*got shape \(6,\)"),
    (lambda: model()(torch.zeros(6, dtype=torch.long), torch.tensor([6])), ValueError,
     r"ids must be \(b, t\) token ids, a batch .*got shape \(6,\)"),
    (lambda: model().keys(torch.zeros(6, dtype=torch.long), None), ValueError,
     r"ids must be \(b, t\) token ids, a batch .*got shape \(6,\)"),
    (lambda: model().mlm_logits(torch.zeros(6)), TypeError,
     r"ids must be an integer tensor \(b, t\) of token ids; got torch.float32"),
    (lambda: bert.classify_loss(classifier(), (torch.zeros(6, dtype=torch.long),
                                               torch.tensor([6]), torch.tensor([0]))),
     ValueError, r"ids must be \(b, t\) token ids, a batch .*got shape \(6,\)"),
    (lambda: bert.accuracy(classifier(), torch.zeros(6, dtype=torch.long),
                           torch.tensor([6]), torch.tensor([0])),
     ValueError, r"ids must be \(b, t\) token ids, a batch .*got shape \(6,\)"),
    (lambda: bert.MLMHead("embedding"), TypeError,
     r"embedding must be an nn.Embedding; got str 'embedding'"),
    (lambda: bert.MLMHead(torch.nn.Embedding(5, 4))(torch.zeros(2, 3)), ValueError,
     r"h must be \(\.\.\., d=4\); got shape \(2, 3\)"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
