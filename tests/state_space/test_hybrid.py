"""lecturelib.state_space.hybrid: every family builds into a causal next-token model of the same
interface, trains on a task, and reports its generation state."""

from __future__ import annotations

import torch

from lecturelib import tasks
from lecturelib.pretraining import gpt
from lecturelib.state_space import hybrid


def test_every_kind_maps_ids_to_logits_causally():
    ids = torch.randint(0, 12, (2, 10))
    changed = ids.clone()
    changed[:, 6] = (ids[:, 6] + 1) % 12
    for kind in hybrid.KINDS:
        torch.manual_seed(0)
        model = hybrid.build(kind, 12, d_model=16, n_layers=2, seq_len=16, d_state=4).eval()
        out = model(ids)
        assert out.shape == (2, 10, 12), kind
        torch.testing.assert_close(out[:, :6], model(changed)[:, :6], msg=kind)


def test_the_hybrid_interleaves_mamba_and_attention():
    config = hybrid.HybridConfig(d_model=16, vocab_size=7, d_state=4, pattern="MAM",
                                 n_heads=2, seq_len=8)
    model = hybrid.HybridLM(config)
    names = [type(layer).__name__ for layer in model.layers]
    assert names == ["Residual", "Block", "Residual"]


def test_state_bytes_grow_only_with_attention():
    sizes = {}
    for kind in hybrid.KINDS:
        model = hybrid.build(kind, 12, d_model=16, n_layers=2, seq_len=64, d_state=4)
        sizes[kind] = [hybrid.state_bytes(model, L) for L in (8, 64)]
    for kind in ("rnn", "lstm", "s4d", "mamba"):
        assert sizes[kind][0] == sizes[kind][1], kind
    assert sizes["transformer"] == [2 * 2 * 8 * 16 * 4, 2 * 2 * 64 * 16 * 4]
    assert sizes["rnn"][0] == 2 * 16 * 4 and sizes["lstm"][0] == 2 * 2 * 16 * 4
    assert sizes["mamba"][0] == 2 * 32 * (4 + 3) * 4
    assert sizes["hybrid"][1] - sizes["hybrid"][0] == 2 * 56 * 16 * 4  # one attention layer


def test_a_transformer_learns_associative_recall_and_accuracy_counts_scored_positions():
    torch.manual_seed(0)
    model = hybrid.build("transformer", 12, d_model=32, n_layers=2, seq_len=16)
    batch = lambda step: tasks.associative_recall(32, 3, vocab_size=12, seed=step)  # noqa
    losses, seconds = hybrid.train_task(model, batch, 150, lr=3e-3)
    assert losses[-1] < losses[0] and seconds > 0
    x, y = tasks.associative_recall(300, 3, vocab_size=12, seed=10_000)
    assert hybrid.accuracy(model, x, y) > 0.4  # chance: 1 of 5 values
    x[:, -1] = y[:, -1]
    assert hybrid.accuracy(lambda ids: torch.nn.functional.one_hot(ids, 12).float(),
                           x, y) == 1.0


def test_default_init_lets_attention_learn_recall_where_gpt2_init_does_not():
    def trained(model):
        batch = lambda step: tasks.associative_recall(32, 4, vocab_size=10, seed=step)  # noqa
        hybrid.train_task(model, batch, 500, lr=3e-3)
        x, y = tasks.associative_recall(500, 4, vocab_size=10, seed=10_000)
        return hybrid.accuracy(model, x, y)

    torch.manual_seed(0)
    config = gpt.GPTConfig(vocab_size=10, seq_len=16, d_model=32, n_layers=2, n_heads=4)
    assert trained(gpt.GPT(config)) < 0.7                        # GPT-2's std 0.02
    torch.manual_seed(0)
    assert trained(hybrid.default_init(gpt.GPT(config))) > 0.95
