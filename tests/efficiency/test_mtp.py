"""lecturelib.efficiency.mtp: the heads' shapes and loss, head 1 is the trunk, and self-speculative
greedy decoding equals greedy decoding."""

from __future__ import annotations

import torch

from lecturelib import train
from lecturelib.efficiency import kvcache, mtp
from lecturelib.pretraining import gpt


def trunk() -> gpt.GPT:
    torch.manual_seed(0)
    config = gpt.GPTConfig(vocab_size=7, seq_len=24, d_model=16, n_layers=2, n_heads=2)
    return gpt.GPT(config).eval()


def test_shapes_and_head_one_is_the_trunk():
    model = trunk()
    heads = mtp.MTPHeads(model, 3)
    ids = torch.randint(0, 7, (2, 10))
    logits = heads(ids)
    assert logits.shape == (2, 10, 3, 7)
    assert torch.allclose(logits[:, :, 0], model(ids), atol=1e-6)
    # zero-initialised extra layers: every head starts as the next-token head
    assert torch.allclose(logits[:, :, 2], logits[:, :, 0], atol=1e-6)


def test_only_the_extra_heads_train_and_the_loss_falls():
    model = trunk()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    heads = mtp.MTPHeads(model, 3)
    stream = torch.arange(400) % 7                      # x(t+k) = x(t) + k mod 7
    batches = gpt.windows(stream, 8, 16)
    loss0 = mtp.mtp_loss(heads, batches(0)).item()
    train.fit(heads, batches, mtp.mtp_loss, steps=60, progress=False,
              optimizer=torch.optim.AdamW(heads.extra.parameters(), lr=1e-2))
    assert mtp.mtp_loss(heads, batches(0)).item() < loss0
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())
    acc = mtp.head_accuracy(heads.eval(), stream, 16)
    assert len(acc) == 3 and acc[2] > 0.5


def test_self_speculative_equals_greedy_and_uses_fewer_calls():
    model = trunk()
    heads = mtp.MTPHeads(model, 3)
    with torch.no_grad():                               # make the guesses useful
        for layer in heads.extra:
            layer.weight.normal_(0, 0.01)
    prompt = torch.tensor([[1, 2, 3]])
    fast, stats = mtp.self_speculative_generate(heads, prompt, 20)
    slow, slow_stats = mtp.greedy_generate(model, prompt, 20)
    assert torch.equal(fast, slow)
    assert torch.equal(slow, kvcache.generate(model, prompt, 20)[0])
    assert stats["calls"] <= slow_stats["calls"] + 1
    assert fast.shape == (1, 23)

