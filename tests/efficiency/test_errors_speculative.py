"""Bad input to lecturelib.efficiency.speculative: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.efficiency import attention_variants, kvcache, moe, ngram_draft, speculative
from lecturelib.long_context import rope_scaling
from lecturelib.pretraining import gpt


def model(vocab_size: int = 7):
    torch.manual_seed(0)
    return gpt.GPT(gpt.GPTConfig(vocab_size=vocab_size, seq_len=16, d_model=16,
                                 n_layers=1, n_heads=2))


def scaled():
    return rope_scaling.extend(model(), 32, "pi")


def with_capacity():
    return moe.MoEGPT(model().config, moe.MoEConfig(16, 32, 4, 2, capacity_factor=1.0))


P = torch.tensor([[0.5, 0.5], [0.5, 0.5]])
Q = torch.tensor([[0.9, 0.1]])
PROMPT = torch.tensor([[1, 2]])

def drafted(ids):
    draft = model()
    return speculative.draft_logits(draft, ids, kvcache.new_cache(draft, 1, 16))


CASES = [
    (lambda: speculative.speculative_generate(model(), model(), PROMPT, 4, 0),
     ValueError, r"K must be an int >= 1; got int 0"),
    (lambda: speculative.speculative_generate(model(), model(9), PROMPT, 4, 2),
     ValueError, r"draft and target must share one vocabulary; got vocab_size 9 "
     r"\(draft\) and 7 \(target\)"),
    (lambda: speculative.speculative_generate(model(), "draft", PROMPT, 4, 2),
     TypeError, r"draft must be a gpt.GPT or an NGramDraft; got str"),
    (lambda: speculative.speculative_generate(None, model(), PROMPT, 4, 2),
     TypeError, r"target must be a gpt.GPT; got NoneType"),
    (lambda: speculative.speculative_generate(
        model(), ngram_draft.NGramDraft(torch.tensor([0, 1, 2]), 2, 5), PROMPT, 4, 2),
     ValueError, r"draft and target must share one vocabulary; got vocab_size 5 "
     r"\(draft\) and 7 \(target\)"),
    (lambda: speculative.speculative_generate(model(), model(), torch.tensor([1, 2]), 4,
                                              2),
     ValueError, r"prompt must be a \(1, t\) tensor of token ids; got torch.int64 "
     r"tensor of shape \(2,\)"),
    (lambda: speculative.speculative_generate(model(), model(), PROMPT, 0, 2),
     ValueError, r"n_new must be an int >= 1; got int 0"),
    (lambda: speculative.speculative_generate(model(), model(), PROMPT, 4, 2,
                                              rule="always"),
     ValueError, r"rule must be one of \('exact', 'resample_from_p'\); got 'always'"),
    (lambda: speculative.speculative_generate(model(), model(), PROMPT, 4, 2,
                                              temperature=-0.5),
     ValueError, r"temperature must be a finite number in \[0, inf\); got float -0.5"),
    (lambda: speculative.autoregressive_generate(model(), PROMPT, 3, temperature=None),
     ValueError, r"temperature must be a finite number in \[0, inf\); got NoneType"),
    (lambda: speculative.autoregressive_generate(None, PROMPT, 3), TypeError,
     r"model must be a gpt.GPT; got NoneType"),
    (lambda: speculative.verify(P, Q, torch.tensor([0, 1])), ValueError,
     r"K = 2 drafts need q of shape \(K, v\) and p of shape \(K \+ 1, v\) with the "
     r"same v; got q \(1, 2\), p \(2, 2\)"),
    (lambda: speculative.verify(P, Q, torch.tensor([], dtype=torch.long)), ValueError,
     r"drafts must be a 1-D tensor of K >= 1 token ids"),
    (lambda: speculative.verify(P, Q, torch.tensor([2])), ValueError,
     r"drafts must be ids in 0..1"),
    (lambda: speculative.verify(P, torch.tensor([[0.9, 0.3]]), torch.tensor([0])),
     ValueError, r"q must be probabilities \(>= 0, each row summing to 1\); got row "
     r"sums from 1.2 to 1.2"),
    (lambda: speculative.verify(P, torch.tensor([[1.5, -0.5]]), torch.tensor([0])),
     ValueError, r"q must be probabilities"),
    (lambda: speculative.verify(P[0], Q, torch.tensor([0])), ValueError,
     r"p must be a float tensor \(n, v\) of probabilities; got torch.float32 tensor "
     r"of shape \(2,\)"),
    (lambda: speculative.verify(P, Q, torch.tensor([0]), rule="x"), ValueError,
     r"rule must be one of"),
    (lambda: speculative.verify_greedy(P, torch.tensor([0, 1])), ValueError,
     r"p must be \(K \+ 1, v\) for K drafts"),
    (lambda: speculative.residual(torch.tensor([0.5, 0.5]), torch.tensor([1.0, 0, 0])),
     ValueError, r"p and q must have the same vocabulary; got 2 and 3 tokens"),
    (lambda: speculative.residual(torch.tensor([1, 0]), torch.tensor([1.0, 0])),
     TypeError, r"p must be a float tensor \(v,\) of probabilities; got torch.int64"),
    (lambda: speculative.first_token_distribution(P[0], P[0], "x"), ValueError,
     r"rule must be one of"),
    (lambda: speculative.sequence_distribution(None, None, (), 0, 2), ValueError,
     r"K must be an int >= 1; got int 0"),
    (lambda: speculative.sequence_distribution(lambda pre: torch.tensor([0.6, 0.6]),
                                               lambda pre: torch.tensor([0.5, 0.5]), (),
                                               1, 2),
     ValueError, r"p_fn\(\(\)\) must be probabilities \(>= 0, each row summing to 1\); "
     r"got row sums from 1.2 to 1.2"),
    (lambda: speculative.sequence_distribution(lambda pre: torch.tensor([0.5, 0.5]),
                                               lambda pre: torch.tensor([1.5, -0.5]),
                                               (), 1, 2),
     ValueError, r"q_fn\(\(\)\) must be probabilities"),
    (lambda: speculative.sequence_probs(lambda pre: torch.tensor([0.6, 0.6]), (), 2),
     ValueError, r"p_fn\(\(\)\) must be probabilities .*got row sums from 1.2 to 1.2"),
    (lambda: speculative.sequence_probs(lambda pre: [0.5, 0.5], (), 2),
     TypeError, r"p_fn\(\(\)\) must be a float tensor \(v,\) of probabilities; got "
     r"list"),
    (lambda: speculative.sequence_probs("p", (), 2), TypeError,
     r"p_fn must be callable; got str 'p'"),
    (lambda: speculative.sequence_probs(lambda pre: P[0], [1, 2], 2), TypeError,
     r"prompt must be a tuple of token ids \(ints >= 0\); got list \[1, 2\]"),
    (lambda: speculative.sequence_distribution(lambda pre: P[0], lambda pre: P[0],
                                               (1, -1), 1, 2), TypeError,
     r"prompt must be a tuple of token ids \(ints >= 0\); got tuple \(1, -1\)"),
    (lambda: speculative.verify_greedy(P[:1].long(), torch.tensor([], dtype=torch.long)),
     TypeError, r"p must be a float tensor \(K \+ 1, v\) of scores; got torch.int64"),
    (lambda: speculative.verify_greedy(P, torch.tensor([0.0])), TypeError,
     r"drafts must be an integer tensor \(K,\) of token ids; got torch.float32"),
    (lambda: speculative.sequence_probs(None, (), 0), ValueError,
     r"n must be an int >= 1; got int 0"),
    (lambda: speculative.expected_tokens(1.5, 2), ValueError,
     r"alpha must be a finite number in \[0, 1\]; got float 1.5"),
    (lambda: speculative.expected_tokens(0.5, 0), ValueError,
     r"K must be an int >= 1; got int 0"),
    (lambda: speculative.speedup(0.5, 2, -1.0), ValueError,
     r"cost must be a finite number in \[0, inf\); got float -1.0"),
    # The variants the cached path cannot run exactly are refused by name (issue 26).
    (lambda: speculative.speculative_generate(scaled(), model(), PROMPT, 28, 4,
                                              temperature=0),
     ValueError, r"speculative decoding reads 33 positions, past the model's RoPE "
     r"tables \(32 positions\)"),
    (lambda: speculative.speculative_generate(
        model(), rope_scaling.extend(model(), 24, "pi"), PROMPT, 24, 1),
     ValueError, r"speculative decoding reads 25 positions, past the model's RoPE "
     r"tables \(24 positions\)"),
    (lambda: speculative.speculative_generate(with_capacity(), model(), PROMPT, 4, 2),
     ValueError, r"the cached path reads a few tokens at a time, but block 0's MoE has "
     r"capacity_factor=1.0"),
    (lambda: speculative.autoregressive_generate(scaled(), PROMPT, 32), ValueError,
     r"autoregressive_generate reads 33 positions, past the model's RoPE tables "
     r"\(32 positions\)"),
    (lambda: speculative.speculative_generate(
        attention_variants.CacheGPT(attention_variants.CacheGPTConfig(7, 16, 16, 1, 2, "gqa", 1)),
        model(), PROMPT, 4, 2),
     TypeError, r"target must be a gpt.GPT; got CacheGPT"),
    # The per-token helpers: shapes and types everywhere, values on the CPU only.
    (lambda: speculative.fallback(P[0], P[0], "resampled"), ValueError,
     r"rule must be one of \('exact', 'resample_from_p'\); got 'resampled'"),
    (lambda: speculative.fallback(P, P, "resample_from_p"), ValueError,
     r"p must be \(v,\) of probabilities; got shape \(2, 2\)"),
    (lambda: speculative.fallback(P[0], torch.ones(3) / 3, "resample_from_p"),
     ValueError, r"p and q must have the same vocabulary; got 2 and 3 tokens"),
    (lambda: speculative.fallback(torch.tensor([0.6, 0.6]), P[0], "resample_from_p"),
     ValueError, r"p must be probabilities \(>= 0, each row summing to 1\); got row "
     r"sums from 1.2 to 1.2"),
    (lambda: speculative.probs_at(torch.tensor([1, 2]), 1.0), TypeError,
     r"logits must be a float tensor \(v,\) or \(n, v\); got torch.int64"),
    (lambda: speculative.probs_at(torch.zeros(0), 1.0), ValueError,
     r"logits must be \(v,\) or \(n, v\) with v >= 1; got shape \(0,\)"),
    (lambda: speculative.probs_at(torch.zeros(3), -1.0), ValueError,
     r"temperature must be a finite number in \[0, inf\); got float -1.0"),
    (lambda: speculative.probs_at(torch.zeros(3), float("nan")), ValueError,
     r"temperature must be a finite number in \[0, inf\); got float nan"),
    (lambda: speculative.draw(P, 0, None), ValueError,
     r"probs must be one row \(v,\); got shape \(2, 2\)"),
    (lambda: speculative.draw(torch.tensor([0.2, 0.2]), 1.0, None), ValueError,
     r"probs must be probabilities \(>= 0, each row summing to 1\); got row sums from "
     r"0.4 to 0.4"),
    (lambda: speculative.draw(torch.tensor([1.5, -0.5]), 1.0, None), ValueError,
     r"probs must be probabilities .* entries from -0.5"),
    (lambda: speculative.draw(P[0], -1.0, None), ValueError,
     r"temperature must be a finite number in \[0, inf\); got float -1.0"),
    (lambda: speculative.draw(torch.zeros(0), 0, None), ValueError,
     r"probs must be \(v,\) or \(n, v\) with v >= 1; got shape \(0,\)"),
    (lambda: drafted([1, 9]), ValueError,
     r"ids must be token ids in 0..6; got ids from 1 to 9 after the cached ones"),
    (lambda: drafted([1, -2]), ValueError,
     r"ids must be token ids in 0..6; got ids from -2 to 1"),
    (lambda: speculative.draft_logits(model(), [1, 2], None), TypeError,
     r"cache must be the draft's kvcache.KVCache; got NoneType None"),
    (lambda: drafted([]), ValueError,
     r"ids must hold more than the 0 positions the cache holds; got 0 ids"),
    (lambda: drafted(torch.tensor([1, 2])),
     TypeError, r"ids must be a list of int token ids; got torch.int64 tensor"),
    (lambda: speculative.draft_logits("gpt", [1, 2], None), TypeError,
     r"draft must be a gpt.GPT or an NGramDraft; got str 'gpt'"),
    (lambda: speculative.accept(P, Q, [-1], None, "exact"), ValueError,
     r"drafts must be ids in 0..1; got ids from -1 to -1"),
    (lambda: speculative.accept(P, Q, [5], None, "exact"), ValueError,
     r"drafts must be ids in 0..1; got ids from 5 to 5"),
    (lambda: speculative.accept(P[:1], Q, [0], None, "exact"), ValueError,
     r"K = 1 drafts need q of shape \(K, v\) and p of shape \(K \+ 1, v\) with the "
     r"same v >= 1; got q \(1, 2\), p \(1, 2\)"),
    (lambda: speculative.accept(P, torch.cat([Q, Q]), [0], None, "exact"), ValueError,
     r"K = 1 drafts need q of shape \(K, v\) .*got q \(2, 2\), p \(2, 2\)"),
    (lambda: speculative.accept(P, Q, [0], None, "x"), ValueError,
     r"rule must be one of \('exact', 'resample_from_p'\); got 'x'"),
    (lambda: speculative.accept(P, Q, [], None, "exact"), TypeError,
     r"drafts must be a non-empty list of int token ids; got list \[\]"),
    (lambda: speculative.accept(P, Q, torch.tensor([0]), None, "exact"), TypeError,
     r"drafts must be a non-empty list of int token ids; got torch.int64 tensor"),
    (lambda: speculative.accept(P[0], Q, [0], None, "exact"), ValueError,
     r"p must be \(K \+ 1, v\) of probabilities; got shape \(2,\)"),
    (lambda: speculative.accept(P, Q, [0], 5, "exact"), TypeError,
     r"generator must be a torch.Generator or None; got int 5"),
    (lambda: speculative.accept(P, Q.to("meta"), [0], None, "exact"), ValueError,
     r"p and q must be on one device; got cpu, meta"),
    # values, on the CPU: a row summing to 1.2, a q that is no distribution (each
    # draft is accepted at once, u·q < p, so no fallback would read them)
    (lambda: speculative.accept(P * 1.2, torch.tensor([[0.1, 0.9]]), [0], None, "exact"),
     ValueError,
     r"p must be probabilities \(>= 0, each row summing to 1\); got row sums from "
     r"1.2 to 1.2"),
    (lambda: speculative.accept(P, torch.tensor([[-0.5, 1.5]]), [0], None, "exact"),
     ValueError, r"q must be probabilities \(>= 0, each row summing to 1\); got row "
     r"sums from 1 to 1, entries from -0.5"),
    # checked_dist
    (lambda: speculative.checked_dist(3, "p_fn"), TypeError,
     r"p_fn must be callable; got int 3"),
    (lambda: speculative.checked_dist(lambda prefix: P[0], 3), TypeError,
     r"name must be a str \(the name of fn in messages\); got int 3"),
    (lambda: speculative.checked_dist(lambda prefix: torch.tensor([0.5, 0.6]), "p_fn")((1,)),
     ValueError, r"p_fn\(\(1,\)\) must be probabilities \(>= 0, each row summing to 1\)"),
    (lambda: speculative.checked_dist(lambda prefix: [0.5, 0.5], "p_fn")((1,)), TypeError,
     r"p_fn\(\(1,\)\) must be a float tensor \(v,\) of probabilities; got list"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
