"""Bad input to lecturelib.efficiency.ngram_draft: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.efficiency import ngram_draft

DRAFT = ngram_draft.NGramDraft(torch.tensor([0, 1, 2, 3, 4, 0, 1, 2]), 3, 5)

CASES = [
    (lambda: ngram_draft.NGramDraft(torch.tensor([0, 1, 2]), 0, 5),
     ValueError, r"order must be an int >= 1; got int 0"),
    (lambda: ngram_draft.NGramDraft(torch.tensor([0, 1, 2]), 2, 0),
     ValueError, r"vocab_size must be an int >= 1; got int 0"),
    (lambda: ngram_draft.NGramDraft(torch.tensor([0.0, 1.0]), 2, 5),
     TypeError, r"ids must be a 1-D integer tensor of at least order = 2 token ids; "
     r"got torch.float32 tensor of shape \(2,\)"),
    (lambda: ngram_draft.NGramDraft(torch.tensor([3]), 2, 5),
     ValueError, r"ids must be a 1-D integer tensor of at least order = 2 token ids"),
    (lambda: ngram_draft.NGramDraft([0, 1, 2], 2, 5),
     TypeError, r"ids must be a 1-D integer tensor .*; got list"),
    (lambda: ngram_draft.NGramDraft(torch.tensor([0, 7, 2]), 2, 5),
     ValueError, r"ids must lie in 0..4 \(vocab_size 5\); got ids from 0 to 7"),
    (lambda: DRAFT.probs(torch.tensor([0, 1])),
     TypeError, r"ids must be a list of int token ids \(pass ids.tolist\(\)\); got torch.int64"),
    (lambda: DRAFT.probs([0, 1.0]),
     TypeError, r"ids must be a list of int token ids; got float 1.0"),
    (lambda: DRAFT.probs([0, True]),
     TypeError, r"ids must be a list of int token ids; got bool True"),
    (lambda: DRAFT.probs([0, 5]),
     ValueError, r"ids must lie in 0..4 \(vocab_size 5\); got 5"),
    (lambda: DRAFT.probs([1, -1]),
     ValueError, r"ids must lie in 0..4 \(vocab_size 5\); got -1"),
    (lambda: DRAFT.logits("01"),
     TypeError, r"ids must be a list of int token ids; got str '01'"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
