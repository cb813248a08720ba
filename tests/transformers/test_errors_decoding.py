"""lecturelib.transformers.decoding refuses bad input with a message that names the argument, what was
expected and what was given (one row per wrong input)."""

from __future__ import annotations

import math

import pytest
import torch

from lecturelib.recurrence import lstm_gru
from lecturelib.transformers import decoding, degeneration

TREE = decoding.TreeLM(3, 2)
START = torch.zeros(1, 1, dtype=torch.long)
PROMPT = torch.zeros(1, dtype=torch.long)
LSTM_STEP = decoding.RecurrentStep(lstm_gru.CharLSTM(5, 3, 4).eval())


def constant(row: list[float]) -> decoding.Step:
    return lambda prefixes: torch.tensor(row).expand(len(prefixes), -1)


NAN = constant([0.0, math.nan, 1.0])

CASES = [
    # generate, greedy
    (lambda: decoding.greedy(TREE, torch.zeros(1, 1), 2), TypeError,
     r"prompts must be a long tensor of token ids \(b, t\); got torch.float32 tensor"),
    (lambda: decoding.greedy(TREE, [[0]], 2), TypeError, r"prompts must be a long tensor .*got list"),
    (lambda: decoding.greedy(TREE, "the", 2), TypeError, r"prompts must be a long tensor .*got str"),
    (lambda: decoding.greedy(TREE, PROMPT, 2), ValueError,
     r"prompts must be \(b, t\) with b, t >= 1; got \(1,\)"),
    (lambda: decoding.greedy(TREE, torch.zeros(2, 0, dtype=torch.long), 2), ValueError,
     r"prompts must be \(b, t\) with b, t >= 1; got \(2, 0\)"),
    (lambda: decoding.greedy(TREE, -START - 1, 2), ValueError,
     r"prompts must hold token ids >= 0; got -1"),
    (lambda: decoding.greedy(TREE, START, -1), ValueError, r"max_new must be an int >= 0; got int -1"),
    (lambda: decoding.greedy(TREE, START, 2.0), ValueError, r"max_new must be an int >= 0; got float"),
    (lambda: decoding.greedy(TREE, START, 2, eos=-1), ValueError, r"eos must be an int >= 0"),
    (lambda: decoding.greedy(TREE, START, 2, eos=3), ValueError,
     r"eos must be an int in 0\.\.2; got int 3"),
    (lambda: decoding.greedy(TREE, START, 2, eos=1.0), ValueError, r"eos must be an int >= 0; got float"),
    (lambda: decoding.greedy("tree", START, 2), TypeError, r"step must be callable; got str"),
    (lambda: decoding.greedy(NAN, START, 2), ValueError,
     r"step\(prefixes\) must not hold nan; got 1 nan of 3"),
    (lambda: decoding.greedy(lambda p: torch.zeros(3), START, 2), ValueError,
     r"step\(prefixes\) must return logits \(b, v\) with b = 1, one row per prefix; got shape \(3,\)"),
    (lambda: decoding.greedy(lambda p: torch.zeros(2, 3), START, 2), ValueError,
     r"with b = 1, one row per prefix; got shape \(2, 3\)"),
    (lambda: decoding.greedy(lambda p: torch.zeros(1, 3, dtype=torch.long), START, 2), TypeError,
     r"step\(prefixes\) must be a float tensor \(\.\.\., v\); got torch.int64"),
    (lambda: decoding.generate(TREE, START, 2, lambda z: z.argmax(-1), eos=True), ValueError,
     r"eos must be an int >= 0; got bool True"),
    # TreeLM
    (lambda: decoding.TreeLM(0, 2), ValueError, r"vocab_size must be an int >= 1; got int 0"),
    (lambda: decoding.TreeLM(3, 0), ValueError, r"depth must be an int >= 1; got int 0"),
    (lambda: decoding.TreeLM(3.0, 2), ValueError, r"vocab_size must be an int >= 1; got float"),
    (lambda: decoding.TreeLM(3, 2, scale=math.nan), ValueError, r"scale must be a finite number"),
    (lambda: decoding.TreeLM(3, 2, seed=-1), ValueError, r"seed must be an int >= 0; got int -1"),
    (lambda: decoding.TreeLM(1000, 5), ValueError, r"vocab_size 1000 and depth 5 need .* logits"),
    (lambda: TREE(torch.zeros(1, 4, dtype=torch.long)), ValueError,
     r"prefixes must hold a start symbol and at most 2 tokens in 0\.\.2; got shape \(1, 4\)"),
    (lambda: TREE(torch.tensor([[0, 3]])), ValueError, r"at most 2 tokens in 0\.\.2; .*largest id 3"),
    (lambda: TREE(torch.tensor([[0, -1]])), ValueError, r"prefixes must hold token ids >= 0; got -1"),
    (lambda: TREE(torch.tensor([[0.0]])), TypeError, r"prefixes must be a long tensor"),
    # beam_search, exhaustive_search: one prompt (t,), not a batch
    (lambda: decoding.beam_search(TREE, START, 2, 2), ValueError,
     r"prompt must be one sequence of token ids \(t,\) with t >= 1; got shape \(1, 1\) \(for a "
     r"batch, search each row: prompts\[i\]\)"),
    (lambda: decoding.beam_search(TREE, PROMPT[:0], 2, 2), ValueError,
     r"prompt must be one sequence .*got shape \(0,\)"),
    (lambda: decoding.beam_search(TREE, [0], 2, 2), TypeError,
     r"prompt must be a long tensor of token ids \(t,\); got list"),
    (lambda: decoding.beam_search(TREE, PROMPT.float(), 2, 2), TypeError,
     r"prompt must be a long tensor .*got torch.float32"),
    (lambda: decoding.beam_search(TREE, PROMPT - 1, 2, 2), ValueError,
     r"prompt must hold token ids >= 0; got -1"),
    (lambda: decoding.beam_search(TREE, PROMPT, 0, 2), ValueError,
     r"beam_size must be an int >= 1; got int 0"),
    (lambda: decoding.beam_search(TREE, PROMPT, 2.0, 2), ValueError,
     r"beam_size must be an int >= 1; got float 2.0"),
    (lambda: decoding.beam_search(TREE, PROMPT, 2, 0), ValueError, r"max_new must be an int >= 1"),
    (lambda: decoding.beam_search(TREE, PROMPT, 2, 2, alpha=-1.0), ValueError,
     r"the length-normalisation exponent alpha must be a finite number in \[0, inf\)"),
    (lambda: decoding.beam_search(TREE, PROMPT, 2, 2, alpha="1"), ValueError,
     r"alpha must be a finite number .*got str"),
    (lambda: decoding.beam_search(TREE, PROMPT, 2, 2, eos=5), ValueError,
     r"eos must be an int in 0\.\.2; got int 5"),
    (lambda: decoding.beam_search(NAN, PROMPT, 2, 2), ValueError, r"step\(prefixes\) must not hold nan"),
    (lambda: decoding.exhaustive_search(TREE, START, 2), ValueError,
     r"prompt must be one sequence of token ids \(t,\)"),
    (lambda: decoding.exhaustive_search(TREE, PROMPT, 2, limit=0), ValueError,
     r"limit must be an int >= 1; got int 0"),
    (lambda: decoding.exhaustive_search(TREE, PROMPT, 2, limit=5), ValueError,
     r"9 continuations exceed the limit of 5"),
    (lambda: decoding.exhaustive_search(TREE, PROMPT, 2, alpha=math.nan), ValueError,
     r"alpha must be a finite number .*got float nan"),
    # RecurrentStep
    (lambda: decoding.RecurrentStep(lambda x: x), TypeError,
     r"model must be a torch.nn.Module with parameters; got function"),
    (lambda: decoding.RecurrentStep(lstm_gru.CharLSTM(5, 3, 4), batch_dim=0.5), ValueError,
     r"batch_dim must be an int in -8\.\.7; got float 0.5"),
    (lambda: LSTM_STEP(torch.tensor([[1, -2]])), ValueError, r"prefixes must hold token ids >= 0"),
    (lambda: LSTM_STEP(torch.tensor([[1, 7]])), ValueError, r"x must hold token ids in 0\.\.4"),
    (lambda: LSTM_STEP(torch.tensor([1, 2])), ValueError, r"prefixes must be \(b, t\) with b, t >= 1"),
    # pipe
    (lambda: decoding.pipe(TREE, 0.7), TypeError, r"processor 0 must be callable; got float 0.7"),
    (lambda: decoding.pipe(None), TypeError, r"step must be callable; got NoneType"),
    # sequence_logprobs
    (lambda: decoding.sequence_logprobs(TREE, START, 1), ValueError,
     r"ids must hold a prompt and at least one token to score \(t >= 2\); got shape \(1, 1\)"),
    (lambda: decoding.sequence_logprobs(TREE, torch.tensor([[0, 1, 2]]), 0), ValueError,
     r"n_prompt must be an int in 1\.\.2; got int 0"),
    (lambda: decoding.sequence_logprobs(TREE, torch.tensor([[0, 1, 2]]), 2.0), ValueError,
     r"n_prompt must be an int in 1\.\.2; got float"),
    (lambda: decoding.sequence_logprobs(constant([0.0, 0.0]), torch.tensor([[0, 1, 2]]), 1),
     ValueError, r"every id of ids must be an int in 0\.\.1; got int 2"),
    (lambda: decoding.sequence_logprobs(TREE, torch.tensor([[0.0, 1.0]]), 1), TypeError,
     r"ids must be a long tensor of token ids"),
    # repetition, distinct_n: strings are not token lists
    (lambda: degeneration.repetition("abcabc", 2), TypeError,
     r"tokens must be a list of int token ids \(e.g. tensor.tolist\(\)\); got str 'abcabc'"),
    (lambda: degeneration.repetition(torch.tensor([1, 2, 1, 2]), 2), TypeError,
     r"tokens must be a list of int token ids .*got torch.int64 tensor"),
    (lambda: degeneration.repetition([1.0, 2.0, 1.0], 2), TypeError, r"got an element float 1.0"),
    (lambda: degeneration.repetition([1, 2, 1], 0), ValueError, r"n must be an int >= 1; got int 0"),
    (lambda: degeneration.distinct_n(["ab", "cd"], 2), TypeError,
     r"each of sequences must be a list of int token ids .*got str 'ab'"),
    (lambda: degeneration.distinct_n("abcd", 2), TypeError, r"sequences must be a list of token-id lists"),
    (lambda: degeneration.distinct_n([1, 2, 3], 2), TypeError, r"each of sequences .*got int 1"),
    (lambda: degeneration.distinct_n([[1, 2]], -1), ValueError, r"n must be an int >= 1; got int -1"),
    (lambda: degeneration.distinct_n([[1], [2]], 2), ValueError, r"the sequences hold no 2-gram"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()
