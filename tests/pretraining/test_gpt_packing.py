"""lecturelib.pretraining.gpt with packed rows (chapter 21): several examples in one row,
attention kept inside each and positions restarting at 0, read as if each were alone."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from lecturelib.pretraining import gpt, peft


def tiny(**kw) -> gpt.GPTConfig:
    args = {"vocab_size": 13, "seq_len": 16, "d_model": 32, "n_layers": 2, "n_heads": 4}
    args.update(kw)
    return gpt.GPTConfig(**args)


def packed(lengths_per_row, vocab_size=13, seed=0):
    """Random examples packed into rows of equal length: ids, segments, and the examples
    as (row, start, ids) triples."""
    g = torch.Generator().manual_seed(seed)
    rows, segs, examples = [], [], []
    for r, lengths in enumerate(lengths_per_row):
        ids = torch.randint(0, vocab_size, (sum(lengths),), generator=g)
        rows.append(ids)
        segs.append(torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths)))
        starts = torch.tensor([0, *lengths]).cumsum(0)
        examples += [(r, s, ids[s:s + n]) for s, n in zip(starts.tolist(), lengths)]
    return torch.stack(rows), torch.stack(segs), examples


LENGTHS = [[3, 5, 1, 7], [16], [4, 12]]  # rows of 16 positions


def test_positions_restart_and_the_mask_is_block_diagonal_causal():
    segments = torch.tensor([[0, 0, 1, 1, 1], [2, 2, 2, 2, 2]])
    positions, mask = gpt.segment_positions_and_mask(segments, torch.zeros_like(segments))
    assert positions.tolist() == [[0, 1, 0, 1, 2], [0, 1, 2, 3, 4]]
    assert mask.shape == (2, 1, 5, 5) and mask.dtype == torch.bool
    assert mask[0, 0].int().tolist() == [
        [1, 0, 0, 0, 0],
        [1, 1, 0, 0, 0],
        [0, 0, 1, 0, 0],
        [0, 0, 1, 1, 0],
        [0, 0, 1, 1, 1],
    ]
    assert torch.equal(mask[1, 0], torch.ones(5, 5, dtype=torch.bool).tril())


@pytest.mark.parametrize("pos, norm, bias", [("learned", "layer", True), ("rope", "rms", False)])
def test_a_packed_forward_equals_each_example_alone(pos, norm, bias):
    torch.manual_seed(0)
    model = gpt.GPT(tiny(positions=pos, norm=norm, bias=bias)).eval()
    ids, segments, examples = packed(LENGTHS)
    with torch.no_grad():
        logits = model(ids, segments)  # (b, t, v)
        for row, start, example in examples:
            alone = model(example[None])[0]  # (n, v)
            torch.testing.assert_close(
                logits[row, start:start + len(example)], alone, atol=1e-5, rtol=1e-5
            )
        # the same rows read as one sequence each differ: the mask and positions matter
        assert not torch.allclose(logits[0], model(ids)[0], atol=1e-3)


def test_one_segment_per_row_equals_the_unpacked_fast_path():
    torch.manual_seed(1)
    model = gpt.GPT(tiny(positions="learned", norm="layer", bias=True)).eval()
    ids = torch.randint(0, 13, (2, 16))
    with torch.no_grad():
        torch.testing.assert_close(
            model(ids, torch.zeros_like(ids)), model(ids), atol=1e-5, rtol=1e-5
        )


def test_without_segments_attention_keeps_its_causal_fast_path(monkeypatch):
    calls = []
    sdpa = F.scaled_dot_product_attention

    def spy(*args, **kw):
        calls.append((kw.get("attn_mask"), kw.get("is_causal")))
        return sdpa(*args, **kw)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    model = gpt.GPT(tiny()).eval()
    ids = torch.randint(0, 13, (2, 8))
    model(ids)
    assert calls == [(None, True)] * 2
    calls.clear()
    model(ids, torch.zeros_like(ids))
    assert [causal for _, causal in calls] == [False] * 2
    assert all(mask.shape == (2, 1, 8, 8) for mask, _ in calls)


@pytest.mark.parametrize("pos", ["learned", "rope"])
def test_packed_gradients_are_the_sum_of_each_examples(pos):
    """The loss summed over a packed batch has the gradient of the per-example losses
    summed: no example's loss reaches another's tokens."""
    torch.manual_seed(2)
    model = gpt.GPT(tiny(positions=pos, dropout=0.0))
    ids, segments, examples = packed(LENGTHS, seed=3)
    logits = model(ids, segments)
    loss = sum(
        F.cross_entropy(logits[r, s:s + len(x) - 1], x[1:], reduction="sum")
        for r, s, x in examples
    )
    packed_grads = torch.autograd.grad(loss, list(model.parameters()))
    loss = sum(
        F.cross_entropy(model(x[None])[0, :-1], x[1:], reduction="sum") for _, _, x in examples
    )
    alone_grads = torch.autograd.grad(loss, list(model.parameters()))
    for a, b in zip(packed_grads, alone_grads):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_lora_reads_packed_rows_too():
    torch.manual_seed(4)
    model = peft.add_lora(gpt.GPT(tiny()), r=2).eval()
    for p in model.parameters():  # LoRA's B starts at zero: move it
        if p.requires_grad:
            p.data.normal_(0, 0.1)
    ids, segments, examples = packed(LENGTHS)
    with torch.no_grad():
        logits = model(ids, segments)
        for row, start, example in examples:
            torch.testing.assert_close(
                logits[row, start:start + len(example)], model(example[None])[0],
                atol=1e-5, rtol=1e-5,
            )


CASES = [
    (lambda: gpt.GPT(tiny())(torch.zeros(1, 4, dtype=torch.long), torch.zeros(1, 4)),
     TypeError,
     r"segments must be an integer tensor \(b, t\) of example ids; got torch.float32"),
    (lambda: gpt.GPT(tiny())(torch.zeros(1, 4, dtype=torch.long),
                             torch.zeros(1, 3, dtype=torch.long)),
     ValueError, r"segments must have the shape of ids \(1, 4\); got shape \(1, 3\)"),
    (lambda: gpt.GPT(tiny())(torch.zeros(1, 4, dtype=torch.long), torch.tensor([[0, 1, 0, 1]])),
     ValueError, r"segments must be non-decreasing along each row"),
    (lambda: gpt.segment_positions_and_mask(torch.zeros(4, dtype=torch.long),
                                            torch.zeros(4, dtype=torch.long)),
     ValueError, r"ids must be 2-D \(b, t\) token ids; got shape \(4,\)"),
    (lambda: gpt.GPT(tiny())([[0, 1]], torch.zeros(1, 2, dtype=torch.long)), TypeError,
     r"ids must be an integer \(long\) tensor of token ids; got list"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_segments_are_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
