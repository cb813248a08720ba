"""lecturelib.posttraining.instruct: the chat vocabulary and template, the task mix and its
exact checkers, the masked SFT loss, packing, response log-probabilities, decoding, and the
chapter's cached models."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from lecturelib import tasks
from lecturelib.posttraining import instruct as I
from lecturelib.pretraining import gpt
from lecturelib.transformers import decoding


def tiny(seq_len=96, seed=0, positions="rope"):
    torch.manual_seed(seed)
    return gpt.GPT(
        gpt.GPTConfig(
            vocab_size=len(I.VOCAB),
            seq_len=seq_len,
            d_model=32,
            n_layers=2,
            n_heads=2,
            positions=positions,
        )
    ).eval()


# ----------------------------------------------------------------------------- vocabulary


def test_vocab_round_trip_and_special_tokens():
    v = I.VOCAB
    text = "<|user|>Sort the digits: 3141<|assistant|>1134<|end|>"
    ids = v.encode(text)
    assert v.decode(ids) == text
    assert ids[0] == v.user and ids[-1] == v.end
    assert (ids == v.assistant).sum() == 1
    assert (
        len(ids) == len("Sort the digits: 3141") + len("1134") + 3
    )  # one id per special
    assert v.pad == 0 and len(v) == 4 + 96
    assert v.decode(v.encode("\n a~")) == "\n a~"


# ----------------------------------------------------------------------------- tasks


@pytest.mark.parametrize("kind", I.KINDS)
@pytest.mark.parametrize("held_out", [False, True])
def test_the_checker_solves_every_problem(kind, held_out):
    pairs = I.problems(kind, 300, seed=5, held_out=held_out)
    assert pairs == I.problems(kind, 300, seed=5, held_out=held_out)  # seeded
    assert pairs != I.problems(kind, 300, seed=6, held_out=held_out)
    for prompt, answer in pairs:
        assert I.solve(kind, prompt) == answer
        assert I.is_correct(kind, prompt, answer)
        assert I.is_correct(kind, prompt, answer + I.END)
        assert not I.is_correct(kind, prompt, answer + "0")
        assert not I.is_correct(kind, prompt, answer + I.END + I.END)
    phrasings = I.PHRASINGS[kind][held_out]
    used = {
        next(p for p in phrasings if I._template_regex(p).match(q)) for q, _ in pairs
    }
    assert used == set(phrasings)  # every phrasing of the set, and only those


def test_held_out_phrasings_are_new():
    for kind in I.KINDS:
        train, held = I.PHRASINGS[kind]
        assert not set(train) & set(held)
        for prompt, _ in I.problems(kind, 100, seed=1, held_out=True):
            assert not any(I._template_regex(p).match(prompt) for p in train)


def test_problems_come_from_the_tasks_module():
    x, y = tasks.reverse_task(5, 4, vocab_size=tasks.N_SPECIAL + 26, seed=I._mix(0, 4))
    ours = [a for (w, a) in I.operands("reverse", 50, seed=0) if len(w) == 4]
    assert ours[0] == "".join(chr(97 + s - 2) for s in y[0, 4:].tolist())
    dates = I.operands("date", 20, seed=3)
    assert dates == tasks.date_normalisation(20, seed=3)
    for x, a in I.operands("sort", 50, seed=2) + I.operands("reverse", 50, seed=2):
        assert I.LENGTHS[0] <= len(x) <= I.LENGTHS[1]
    for x, a in I.operands("add", 100, seed=0):
        p, q = map(int, x.split(" + "))
        assert 0 <= p <= I.MAX_TERM and 0 <= q <= I.MAX_TERM and int(a) == p + q


def test_known_answers():
    assert I.solve("reverse", "Write abc backwards.") == "cba"
    assert I.solve("sort", "Sort the digits: 3141") == "1134"
    assert I.solve("add", "What is 37 + 45?") == "82"
    assert I.solve("date", "ISO date: 05-Mar-49") == "2049-03-05"
    assert I.solve("date", "ISO date: 05-Mar-50") == "1950-03-05"
    assert I.solve("date", "ISO date: Tuesday, March 3, 1998") == "1998-03-03"
    assert I.solve("date", "ISO date: 3.4.1998") == "1998-04-03"  # day first
    with pytest.raises(ValueError, match="not an instruction of kind 'sort'"):
        I.solve("sort", "Reverse the letters: abc")


def test_format_check():
    assert I.follows_format("82<|end|>")
    assert not I.follows_format("82")  # never ended
    assert not I.follows_format("82<|end|>1")  # text after the end
    assert not I.follows_format("82<|end|><|end|>")
    assert not I.follows_format("<|end|>")  # empty answer
    assert not I.follows_format(" 82<|end|>")
    assert not I.follows_format("8<|user|>2<|end|>")


def test_few_shot_prompts_and_corpus():
    ((prompt, answer),) = I.few_shot("reverse", 2, 1, seed=0)
    lines = prompt.strip("\n").split("\n")
    assert len(lines) == 3 and prompt.startswith("\n\n") and prompt.endswith(" > ")
    for line in lines[:2]:
        x, y = line.split(" > ")
        assert y == x[::-1]
    assert answer == lines[2].removesuffix(" > ")[::-1]
    assert I.few_shot("sort", 0, 3, seed=1)[0][0].count(">") == 1
    text = I.corpus(5000, seed=0)
    assert len(text) == 5000 and text == I.corpus(5000, seed=0)
    blocks = [b for b in text.split("\n\n") if b][:-1]  # the last may be cut
    rules = set()
    for block in blocks:
        pairs = [line.split(" > ") for line in block.split("\n")]
        assert 2 <= len(pairs) <= 8
        fits = {r for r, f in I.RULES.items() if all(f(x) == y for x, y in pairs)}
        fits |= {
            k
            for k in I.KINDS
            if all(
                I.solve(k, I.PHRASINGS[k][0][0].format(x=x)) == y
                for x, y in pairs
                if _parses(k, x)
            )
            and all(_parses(k, x) for x, _ in pairs)
        }
        assert fits, block
        rules |= fits
    assert len(rules) >= 5  # several rules per document


def _parses(kind, x):
    try:
        I.solve(kind, I.PHRASINGS[kind][0][0].format(x=x))
        return True
    except ValueError:
        return False


# ----------------------------------------------------------------------------- template


def test_chat_template_and_mask():
    ids, mask = I.chat("Add: 1 + 2", "3")
    assert I.VOCAB.decode(ids) == "<|user|>Add: 1 + 2<|assistant|>3<|end|>"
    assert I.VOCAB.decode(ids[mask]) == "3<|end|>"
    assert mask.dtype == torch.bool and not mask[: len(ids) - 2].any()
    head, none = I.chat("Add: 1 + 2")
    assert torch.equal(head, ids[: len(head)]) and not none.any()
    assert I.VOCAB.decode(head).endswith(I.ASSISTANT)
    assert torch.equal(I.chat("q", "3<|end|>")[0], I.chat("q", "3")[0])


def test_masked_loss_gives_prompt_tokens_zero_gradient():
    model = tiny()
    ex = [I.chat(p, a) for p, a in I.problems("add", 3, seed=0)]
    x, y, _, m = I.shifted(*I.collate(ex))
    logits = model(x)
    logits.retain_grad()
    loss = I.masked_loss(logits, y, m)
    loss.backward()
    assert logits.grad[~m].abs().max() == 0  # prompt and padding
    assert (logits.grad[m].abs().sum(-1) > 0).all()  # every response token
    ref = F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="none")
    torch.testing.assert_close(loss, ref[m.flatten()].mean())


def test_collate_pads_on_the_right():
    ex = [I.chat("Add: 1 + 2", "3"), I.chat("Write abcdef backwards.", "fedcba")]
    ids, mask = I.collate(ex)
    assert ids.shape == (2, len(ex[1][0]))
    assert (ids[0, len(ex[0][0]) :] == I.VOCAB.pad).all() and not mask[
        0, len(ex[0][0]) :
    ].any()


@pytest.mark.parametrize("positions", ["rope", "learned"])
def test_packed_equals_unpacked(positions):
    model = tiny(positions=positions)
    ex = [I.chat(p, a) for k in I.KINDS for p, a in I.problems(k, 3, seed=2)]
    ids, targets, segments, mask = I.pack(ex, 96)
    assert ids.shape[1] == 96 and len(ids) < len(ex)  # several per row
    assert (segments[:, 1:] >= segments[:, :-1]).all()
    assert mask.sum() == sum(m[1:].sum() for _, m in ex)
    with torch.no_grad():
        packed = model(ids, segments)
        r, at = 0, 0
        for x, m in ex:
            n = len(x) - 1
            if at + n > 96:
                r, at = r + 1, 0
            alone = model(x[None, :-1])[0]
            torch.testing.assert_close(
                packed[r, at : at + n], alone, atol=1e-5, rtol=1e-5
            )
            assert torch.equal(targets[r, at : at + n], x[1:])
            assert torch.equal(mask[r, at : at + n], m[1:])
            at += n
    loss_packed = I.sft_loss(model, (ids, targets, segments, mask))
    loss_alone = I.sft_loss(model, I.shifted(*I.collate(ex)))
    torch.testing.assert_close(loss_packed, loss_alone, atol=1e-5, rtol=1e-5)


def test_pack_refuses_an_example_too_long():
    ex = [I.chat("Write abcdef backwards.", "fedcba")]
    with pytest.raises(ValueError, match="does not fit seq_len=10"):
        I.pack(ex, 10)


def test_response_logprobs_equals_token_by_token():
    model = tiny()
    ex = [I.chat(p, a) for p, a in I.problems("reverse", 4, seed=3)]
    ids, mask = I.collate(ex)
    got = I.response_logprobs(model, ids, mask)
    assert got.shape == (4,)
    for i, (x, m) in enumerate(ex):
        n_prompt = int((~m).sum())
        step = lambda prefix: model(prefix)[:, -1]  # noqa: E731
        ref = decoding.sequence_logprobs(step, x[None], n_prompt).sum()
        torch.testing.assert_close(got[i].double(), ref, atol=1e-4, rtol=1e-5)
    with torch.no_grad():  # right padding changes nothing
        longer = torch.cat([ids, torch.zeros(4, 5, dtype=torch.long)], 1)
        more = torch.cat([mask, torch.zeros(4, 5, dtype=torch.bool)], 1)
        torch.testing.assert_close(
            I.response_logprobs(model, longer, more), got.detach()
        )


def test_respond_greedy_equals_one_prompt_at_a_time():
    model = tiny()
    prompts = [
        p for p, _ in I.problems("sort", 6, seed=0) + I.problems("add", 3, seed=0)
    ]
    batched = I.respond(model, prompts, max_new=5)
    for p, r in zip(prompts, batched):
        ids = I.chat(p)[0][None]
        out = decoding.greedy(lambda x: model(x)[:, -1], ids, 5, eos=I.VOCAB.end)
        text = I.VOCAB.decode(out[0, ids.shape[1] :])
        assert r == (text[: text.index(I.END) + len(I.END)] if I.END in text else text)
    g1, g2 = (torch.Generator().manual_seed(0) for _ in range(2))
    assert I.respond(model, prompts, 5, 1.0, g1) == I.respond(
        model, prompts, 5, 1.0, g2
    )


def test_sft_overfits_one_batch():
    model = tiny().train()
    pairs = I.problems("reverse", 4, seed=0)
    batch = I.pack([I.chat(p, a) for p, a in pairs], 96)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(150):
        loss = I.sft_loss(model, batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.05
    model.eval()
    assert I.accuracy(model, pairs, "reverse") == {"accuracy": 1.0, "format": 1.0}


# ----------------------------------------------------------------------------- models


@pytest.mark.slow
def test_models_are_trained_on_the_device_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("LECTURELIB_CACHE", str(tmp_path))
    monkeypatch.setenv("LECTURELIB_STEPS_CAP", "3")
    monkeypatch.setenv("LECTURELIB_PROGRESS", "off")
    seen = []
    fit = I.train.fit

    def spy(model, *args, **kw):
        seen.append((next(model.parameters()).device.type, kw["steps"]))
        return fit(model, *args, **kw)

    monkeypatch.setattr(I.train, "fit", spy)
    monkeypatch.setattr(I.pretrain.train, "fit", spy)
    model, vocab = I.sft_model("smoke", "cpu")
    assert vocab is I.VOCAB and not model.training
    assert seen == [("cpu", 3), ("cpu", 3)]  # base, then SFT; capped
    assert (
        I.model_path("smoke", "base").exists() and I.model_path("smoke", "sft").exists()
    )
    again, _ = I.sft_model("smoke", "cpu")
    assert len(seen) == 2  # loaded, not trained
    for a, b in zip(model.state_dict().values(), again.state_dict().values()):
        assert torch.equal(a, b)
    assert I.history("smoke", "sft").steps[-1] == 3
    base, _ = I.base_model("smoke")
    assert len(seen) == 2
    assert not all(
        torch.equal(a, b)
        for a, b in zip(
            base.state_dict().values(), copy.deepcopy(model).state_dict().values()
        )
    )
    monkeypatch.delenv("LECTURELIB_STEPS_CAP")
    assert I.model_path("smoke", "sft") != I.model_path("smoke", "sft").with_name(
        "x"
    ) and "capped" not in str(I.model_path("smoke", "sft"))
    assert I.recipe("smoke").sft.steps == I.RECIPES["smoke"].sft.steps


def test_capped_recipe_has_its_own_key(monkeypatch):
    free = I.model_path("cpu", "sft")
    monkeypatch.setenv("LECTURELIB_STEPS_CAP", "2")
    capped = I.model_path("cpu", "sft")
    assert capped != free
    capped_recipe = I.recipe("cpu")
    assert capped_recipe.base.steps == 2 and capped_recipe.sft.steps == 2
    assert capped_recipe.base.warmup == 1 and capped_recipe.sft.warmup == 1
    assert capped_recipe.corpus_chars == I.CAPPED_CORPUS
    assert capped_recipe.sft.n_per_kind == I.CAPPED_PER_KIND
    assert capped_recipe.base.model == I.RECIPES["cpu"].base.model  # the same model
    monkeypatch.delenv("LECTURELIB_STEPS_CAP")
    assert I.recipe("cpu") == I.RECIPES["cpu"]


def test_mix_echo_pairs_and_logprobs():
    items = I.mix(3, seed=4)
    assert [k for k, _, _ in items] == [k for k in I.KINDS for _ in range(3)]
    assert all(I.solve(k, p) == a for k, p, a in items)
    pairs = I.echo_pairs(items)
    ops = [x for k in I.KINDS for x, _ in I.operands(k, 3, seed=4)]
    assert [p for p, _, _ in pairs] == [p for (_, p, a), x in zip(items, ops) if x != a]
    for (prompt, chosen, rejected), (kind, p, a), x in zip(pairs, items, ops):
        assert chosen == I.solve(kind, prompt) + I.END
        assert rejected == I.operand(kind, prompt) + I.END
        assert I.is_correct(kind, prompt, chosen)
        assert not I.is_correct(kind, prompt, rejected)
    palindrome = [("reverse", "Write abba backwards.", "abba")]
    assert I.echo_pairs(palindrome) == []                 # the echo would be right
    model = tiny()
    prompts, chosen, _ = zip(*pairs)
    got = I.logprobs(model, list(prompts), list(chosen))
    ids, mask = I.collate([I.chat(p, c) for p, c in zip(prompts, chosen)])
    torch.testing.assert_close(got, I.response_logprobs(model, ids, mask))
    one = I.logprobs(model, [prompts[0]], [chosen[0]])
    torch.testing.assert_close(one, got[:1], atol=1e-5, rtol=1e-5)


def test_operand_reads_every_phrasing():
    for kind in I.KINDS:
        for held in (False, True):
            pairs = I.problems(kind, 20, seed=9, held_out=held)
            ops = I.operands(kind, 20, seed=9)
            assert [I.operand(kind, p) for p, _ in pairs] == [x for x, _ in ops]
    assert I.operand("add", "What is 37 + 45?") == "37 + 45"


def test_finetune_masked_unmasked_and_stopped(monkeypatch):
    monkeypatch.setenv("LECTURELIB_PROGRESS", "off")
    recipe = I.SFTRecipe(n_per_kind=8, batch_size=2, steps=6, warmup=1, lr=1e-3)
    model = tiny()
    full, hist = I.finetune(model, recipe)
    assert hist.steps[-1] == 6 and hist.eval_steps == [1, 2, 3, 4, 5, 6]
    assert not full.training and full is not model
    assert any(not torch.equal(a, b) for a, b in
               zip(model.state_dict().values(), full.state_dict().values()))
    half, half_hist = I.finetune(model, recipe, stop=3)
    assert half_hist.eval_steps == [1, 2, 3]                  # the same schedule, cut
    torch.testing.assert_close(half_hist.train_loss, hist.train_loss[:3])
    _, unmasked = I.finetune(model, recipe, masked=False, stop=3)
    assert unmasked.train_loss[0] != half_hist.train_loss[0]  # more targets
    assert unmasked.eval_steps == half_hist.eval_steps
