"""lecturelib.state_space.mamba: the block's shapes, causality, recurrent steps equal to the parallel
forward, constant state, and a one-batch overfit."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from lecturelib.state_space import mamba


def small(**changes):
    torch.manual_seed(0)
    config = dict(d_model=16, n_layers=2, vocab_size=11, d_state=4, d_conv=3)
    config.update(changes)
    return mamba.MambaLM(mamba.MambaConfig(**config)).double()


def test_shapes_and_config():
    model = small()
    assert model.config.d_inner == 32 and model.config.dt_rank == 1
    assert model(torch.randint(0, 11, (2, 9))).shape == (2, 9, 11)


def test_the_block_is_causal():
    model = small()
    ids = torch.randint(0, 11, (1, 12))
    changed = ids.clone()
    changed[0, 7] = (ids[0, 7] + 1) % 11
    torch.testing.assert_close(model(ids)[:, :7], model(changed)[:, :7])
    assert not torch.allclose(model(ids)[:, 7:], model(changed)[:, 7:])


def test_the_causal_conv_step_equals_the_convolution():
    torch.manual_seed(0)
    conv = mamba.CausalConv1d(5, 4).double()
    x = torch.randn(2, 10, 5, dtype=torch.float64)
    state, ys = torch.zeros(2, 5, 3, dtype=torch.float64), []
    for t in range(10):
        y, state = conv.step(x[:, t], state)
        ys.append(y)
    torch.testing.assert_close(torch.stack(ys, 1), conv(x))


def test_recurrent_steps_equal_the_parallel_forward_for_every_scan():
    ids = torch.randint(0, 11, (3, 20))
    for method in ("loop", "parallel", "chunked"):
        model = small(scan=method)
        states, logits = model.init_state(3), []
        for t in range(20):
            out, states = model.step(ids[:, t], states)
            logits.append(out)
        torch.testing.assert_close(torch.stack(logits, 1), model(ids))


def test_the_state_does_not_grow_and_generation_matches_argmax():
    model = small()
    states = model.init_state(1)
    size = mamba.state_bytes(states)
    assert size == 2 * 32 * (4 + 2) * 8  # layers · d_inner · (d_state + d_conv - 1) · fp64
    out = mamba.generate(model, torch.tensor([[1, 2, 3]]), 5)
    assert out.shape == (1, 8)
    for t in range(3, 8):
        assert model(out[:, :t])[0, -1].argmax() == out[0, t]


def test_one_batch_overfit():
    model = small().float()
    ids = torch.randint(0, 11, (4, 16), generator=torch.Generator().manual_seed(1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(150):
        loss = F.cross_entropy(model(ids[:, :-1]).flatten(0, 1), ids[:, 1:].flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.1
