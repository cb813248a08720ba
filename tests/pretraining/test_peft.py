"""lecturelib.pretraining.peft: every method starts as the pretrained model, LoRA merges exactly, only the
new parameters train, and each method can fit a batch."""

from __future__ import annotations

import copy

import pytest
import torch

from lecturelib.pretraining import gpt, peft
from lecturelib.recurrence import lm


def model(**kw) -> gpt.GPT:
    torch.manual_seed(0)
    args = {"vocab_size": 11, "seq_len": 16, "d_model": 32, "n_layers": 2, "n_heads": 4}
    args.update(kw)
    return gpt.GPT(gpt.GPTConfig(**args)).eval()


IDS = torch.randint(0, 11, (3, 12), generator=torch.Generator().manual_seed(1))


def methods():
    init = torch.tensor([1, 2, 3])
    return {
        "lora": lambda m: peft.add_lora(m, r=2, alpha=4.0),
        "adapters": lambda m: peft.add_adapters(m, 4),
        "prefix": lambda m: peft.PrefixTuned(m, init),
    }


@pytest.mark.parametrize("name", ["lora", "adapters", "prefix"])
@pytest.mark.parametrize("pos", ["rope", "learned"])
def test_a_new_method_starts_as_the_pretrained_model_or_reads_its_prefix(name, pos):
    base = model(positions=pos)
    wrapped = methods()[name](copy.deepcopy(base))
    if name == "prefix":  # keys and values of real text: differs, but shapes agree
        assert wrapped(IDS).shape == base(IDS).shape
        return
    torch.testing.assert_close(wrapped(IDS), base(IDS), rtol=0, atol=0)


def test_run_blocks_equals_the_model():
    m = model()
    torch.testing.assert_close(peft.run_blocks(m, m.embed_ids(IDS)), m(IDS))


def test_attend_without_prefix_is_the_blocks_attention():
    m = model()
    x = torch.randn(2, 5, 32)
    attn = m.blocks[0].attn
    torch.testing.assert_close(peft.attend(attn, x), attn(x))


def test_a_prefix_is_seen_by_every_position_and_the_text_stays_causal():
    m = model()
    tuned = peft.PrefixTuned(copy.deepcopy(m), torch.tensor([1, 2]))
    out = tuned(IDS)
    changed = IDS.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 11
    torch.testing.assert_close(tuned(changed)[:, :-1], out[:, :-1])  # no look-ahead
    assert (out - m(IDS)).abs().amax((0, 2)).min() > 0                # every position


def test_prompt_tuning_shifts_the_text_by_the_prompt():
    m = model()  # RoPE: no position table, the prompt takes positions 0..2
    init = torch.tensor([4, 5, 6])
    tuned = peft.PromptTuned(copy.deepcopy(m), init)
    torch.testing.assert_close(tuned(IDS), m(torch.cat([init.expand(3, -1), IDS], 1))[:, 3:])


def test_lora_update_is_low_rank_and_on_the_chosen_rows():
    m = peft.add_lora(model(), r=2, alpha=4.0, parts="qv")
    layer = m.blocks[0].attn.qkv
    assert layer.A.shape == (2, 2, 32) and layer.B.shape == (2, 32, 2)  # q and v
    torch.nn.init.normal_(layer.B)
    delta = layer.delta_weight()
    assert delta[32:64].abs().max() == 0  # the key rows are not touched
    # one adapter per slice: rank r each, rank 2r together (a shared A would give r)
    assert torch.linalg.matrix_rank(delta[:32]) == 2
    assert torch.linalg.matrix_rank(delta[64:]) == 2
    assert torch.linalg.matrix_rank(delta) == 4
    torch.testing.assert_close(delta[:32], 2.0 * layer.B[0] @ layer.A[0])
    torch.testing.assert_close(delta[64:], 2.0 * layer.B[1] @ layer.A[1])


@pytest.mark.parametrize("rows", [None, [0, 3, 5], [[0, 1], [4, 2]]])
def test_lora_linear_forward_is_the_base_plus_its_delta_weight(rows):
    torch.manual_seed(0)
    base = torch.nn.Linear(8, 6)
    layer = peft.LoRALinear(copy.deepcopy(base), 2, 3.0, rows)
    torch.nn.init.normal_(layer.B)
    x = torch.randn(4, 5, 8)
    expected = torch.nn.functional.linear(x, base.weight + layer.delta_weight(), base.bias)
    torch.testing.assert_close(layer(x), expected)
    torch.testing.assert_close(layer.merged()(x), expected)
    groups = 1 if rows is None or not isinstance(rows[0], list) else len(rows)
    assert layer.A.shape[0] == layer.B.shape[0] == groups


def test_merged_lora_equals_unmerged_after_training():
    m = peft.add_lora(model(), r=2, alpha=4.0)
    opt = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=1e-2)
    for _ in range(5):
        opt.zero_grad()
        lm.next_token_loss(m, (IDS[:, :-1], IDS[:, 1:])).backward()
        opt.step()
    before = m(IDS)
    peft.merge_lora(m)
    assert not any(isinstance(b.attn.qkv, peft.LoRALinear) for b in m.blocks)
    torch.testing.assert_close(m(IDS), before, rtol=1e-5, atol=1e-5)


def test_only_the_new_parameters_train():
    base = model()
    counts = {}
    for name, make in methods().items():
        counts[name] = peft.trainable(make(copy.deepcopy(base)))
    d, L, r = 32, 2, 2
    assert counts["lora"][0] == L * 2 * (r * d + d * r)       # A, B for q and for v
    assert counts["adapters"][0] == L * 2 * (2 * d * 4 + 4 + d)
    assert counts["prefix"][0] == L * 2 * 3 * d
    prompt = peft.PromptTuned(copy.deepcopy(base), torch.tensor([1, 2, 3]))
    assert peft.trainable(prompt)[0] == 3 * d


@pytest.mark.parametrize("name", ["lora", "adapters", "prefix", "prompt"])
def test_each_method_lowers_the_loss_on_a_batch_and_keeps_the_base(name):
    base = model()
    with torch.no_grad():  # a pretrained-looking model: larger weights than at init
        for p in base.parameters():
            p.mul_(10)
    frozen = [(p, p.detach().clone()) for p in base.parameters()]
    make = dict(methods(), prompt=lambda m: peft.PromptTuned(m, torch.tensor([1, 2, 3])))
    tuned = make[name](base).train()
    batch = (IDS[:, :-1], IDS[:, 1:])
    opt = torch.optim.AdamW([p for p in tuned.parameters() if p.requires_grad], lr=3e-2)
    first = lm.next_token_loss(tuned, batch).item()
    for _ in range(40):
        opt.zero_grad()
        lm.next_token_loss(tuned, batch).backward()
        opt.step()
    assert lm.next_token_loss(tuned, batch).item() < first - 0.05
    for p, before in frozen:
        assert not p.requires_grad and torch.equal(p, before)


def test_to_vocab_maps_what_it_can_and_counts_what_it_drops():
    vocab = lm.Vocab("abc '-\"e")
    text, dropped = peft.to_vocab("a\u2019b \u201cc\u201d\u2014\u00e9\u00e6\r", vocab)
    assert text == "a'b \"c\"-e"
    assert dropped == {"\u00e6": 1}


def test_to_vocab_without_double_quotes_uses_single_ones():
    text, dropped = peft.to_vocab("\u201chi\u201d \"x\"", lm.Vocab("hix '"))
    assert (text, dropped) == ("'hi' 'x'", {})
