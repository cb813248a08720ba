"""lecturelib.posttraining.instructions: the task mix and its exact checkers, the raw
corpus of demonstrations, the preference pairs, and a model's scores on the mix."""

from __future__ import annotations


import pytest
import torch

from lecturelib import tasks
from lecturelib.posttraining import chat, instructions
from lecturelib.pretraining import gpt


def tiny(seq_len=96, seed=0, positions="rope"):
    torch.manual_seed(seed)
    return gpt.GPT(
        gpt.GPTConfig(
            vocab_size=len(chat.VOCAB),
            seq_len=seq_len,
            d_model=32,
            n_layers=2,
            n_heads=2,
            positions=positions,
        )
    ).eval()


# ----------------------------------------------------------------------------- tasks


@pytest.mark.parametrize("kind", instructions.KINDS)
@pytest.mark.parametrize("held_out", [False, True])
def test_the_checker_solves_every_problem(kind, held_out):
    pairs = instructions.problems(kind, 300, seed=5, held_out=held_out)
    assert pairs == instructions.problems(kind, 300, seed=5, held_out=held_out)  # seeded
    assert pairs != instructions.problems(kind, 300, seed=6, held_out=held_out)
    for prompt, answer in pairs:
        assert instructions.solve(kind, prompt) == answer
        assert instructions.is_correct(kind, prompt, answer)
        assert instructions.is_correct(kind, prompt, answer + chat.END)
        assert not instructions.is_correct(kind, prompt, answer + "0")
        assert not instructions.is_correct(kind, prompt, answer + chat.END + chat.END)
    phrasings = instructions.PHRASINGS[kind][held_out]
    used = {
        next(p for p in phrasings if instructions._template_regex(p).match(q)) for q, _ in pairs
    }
    assert used == set(phrasings)  # every phrasing of the set, and only those


def test_excluded_inputs_are_left_out_and_the_sets_are_disjoint():
    seen = instructions.seen_operands(300, 1)  # the SFT mix's inputs, as the chapter's
    sft = instructions.mix(300, seed=1)
    assert {k: {instructions.operand(k, p) for k2, p, _ in sft if k2 == k}
            for k in instructions.KINDS} == seen
    for kind in instructions.KINDS:
        plain = instructions.operands(kind, 200, seed=1)  # the same seed as SFT: collides
        assert {x for x, _ in plain} <= seen[kind]
        kept = instructions.operands(kind, 200, seed=1, exclude=seen[kind])
        assert len(kept) == 200 and not {x for x, _ in kept} & seen[kind]
        assert kept == [xy for xy in instructions.operands(kind, 2000, seed=1)
                        if xy[0] not in seen[kind]][:200]  # the same stream, filtered
        held = instructions.problems(kind, 50, seed=2, held_out=True, exclude=seen[kind])
        assert not {instructions.operand(kind, p) for p, _ in held} & seen[kind]
    assert instructions.operands("sort", 30, seed=4, exclude=frozenset()) == (
        instructions.operands("sort", 30, seed=4))  # nothing excluded: unchanged
    items = instructions.mix(40, seed=3, held_out=True, exclude=seen)
    assert not any(instructions.operand(k, p) in seen[k] for k, p, _ in items)


def test_held_out_phrasings_are_new():
    for kind in instructions.KINDS:
        train, held = instructions.PHRASINGS[kind]
        assert not set(train) & set(held)
        for prompt, _ in instructions.problems(kind, 100, seed=1, held_out=True):
            assert not any(instructions._template_regex(p).match(prompt) for p in train)


def test_problems_come_from_the_tasks_module():
    x, y = tasks.reverse_task(5, 4, vocab_size=tasks.N_SPECIAL + 26, seed=instructions._mix(0, 4))
    ours = [a for (w, a) in instructions.operands("reverse", 50, seed=0) if len(w) == 4]
    assert ours[0] == "".join(chr(97 + s - 2) for s in y[0, 4:].tolist())
    dates = instructions.operands("date", 20, seed=3)
    assert dates == tasks.date_normalisation(20, seed=3)
    for x, a in instructions.operands("sort", 50, seed=2) + instructions.operands("reverse", 50, seed=2):
        assert instructions.LENGTHS[0] <= len(x) <= instructions.LENGTHS[1]
    for x, a in instructions.operands("add", 100, seed=0):
        p, q = map(int, x.split(" + "))
        assert 0 <= p <= instructions.MAX_TERM and 0 <= q <= instructions.MAX_TERM and int(a) == p + q


def test_known_answers():
    assert instructions.solve("reverse", "Write abc backwards.") == "cba"
    assert instructions.solve("sort", "Sort the digits: 3141") == "1134"
    assert instructions.solve("add", "What is 37 + 45?") == "82"
    assert instructions.solve("date", "ISO date: 05-Mar-49") == "2049-03-05"
    assert instructions.solve("date", "ISO date: 05-Mar-50") == "1950-03-05"
    assert instructions.solve("date", "ISO date: Tuesday, March 3, 1998") == "1998-03-03"
    assert instructions.solve("date", "ISO date: 3.4.1998") == "1998-04-03"  # day first
    with pytest.raises(ValueError, match="not an instruction of kind 'sort'"):
        instructions.solve("sort", "Reverse the letters: abc")


def test_format_check():
    assert instructions.follows_format("82<|end|>")
    assert not instructions.follows_format("82")  # never ended
    assert not instructions.follows_format("82<|end|>1")  # text after the end
    assert not instructions.follows_format("82<|end|><|end|>")
    assert not instructions.follows_format("<|end|>")  # empty answer
    assert not instructions.follows_format(" 82<|end|>")
    assert not instructions.follows_format("8<|user|>2<|end|>")


def test_few_shot_prompts_and_corpus():
    ((prompt, answer),) = instructions.few_shot("reverse", 2, 1, seed=0)
    lines = prompt.strip("\n").split("\n")
    assert len(lines) == 3 and prompt.startswith("\n\n") and prompt.endswith(" > ")
    for line in lines[:2]:
        x, y = line.split(" > ")
        assert y == x[::-1]
    assert answer == lines[2].removesuffix(" > ")[::-1]
    assert instructions.few_shot("sort", 0, 3, seed=1)[0][0].count(">") == 1
    text = instructions.corpus(5000, seed=0)
    assert len(text) == 5000 and text == instructions.corpus(5000, seed=0)
    blocks = [b for b in text.split("\n\n") if b][:-1]  # the last may be cut
    rules = set()
    for block in blocks:
        pairs = [line.split(" > ") for line in block.split("\n")]
        assert 2 <= len(pairs) <= 8
        fits = {r for r, f in instructions.RULES.items() if all(f(x) == y for x, y in pairs)}
        fits |= {
            k
            for k in instructions.KINDS
            if all(
                instructions.solve(k, instructions.PHRASINGS[k][0][0].format(x=x)) == y
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
        instructions.solve(kind, instructions.PHRASINGS[kind][0][0].format(x=x))
        return True
    except ValueError:
        return False


def test_mix_echo_pairs_and_logprobs():
    items = instructions.mix(3, seed=4)
    assert [k for k, _, _ in items] == [k for k in instructions.KINDS for _ in range(3)]
    assert all(instructions.solve(k, p) == a for k, p, a in items)
    pairs = instructions.echo_pairs(items)
    ops = [x for k in instructions.KINDS for x, _ in instructions.operands(k, 3, seed=4)]
    assert [p for p, _, _ in pairs] == [p for (_, p, a), x in zip(items, ops) if x != a]
    for (prompt, chosen, rejected), (kind, p, a), x in zip(pairs, items, ops):
        assert chosen == instructions.solve(kind, prompt) + chat.END
        assert rejected == instructions.operand(kind, prompt) + chat.END
        assert instructions.is_correct(kind, prompt, chosen)
        assert not instructions.is_correct(kind, prompt, rejected)
    palindrome = [("reverse", "Write abba backwards.", "abba")]
    assert instructions.echo_pairs(palindrome) == []                 # the echo would be right
    model = tiny()
    prompts, chosen, _ = zip(*pairs)
    got = chat.logprobs(model, list(prompts), list(chosen))
    ids, mask = chat.collate([chat.chat(p, c) for p, c in zip(prompts, chosen)])
    torch.testing.assert_close(got, chat.response_logprobs(model, ids, mask))
    one = chat.logprobs(model, [prompts[0]], [chosen[0]])
    torch.testing.assert_close(one, got[:1], atol=1e-5, rtol=1e-5)


def test_operand_reads_every_phrasing():
    for kind in instructions.KINDS:
        for held in (False, True):
            pairs = instructions.problems(kind, 20, seed=9, held_out=held)
            ops = instructions.operands(kind, 20, seed=9)
            assert [instructions.operand(kind, p) for p, _ in pairs] == [x for x, _ in ops]
    assert instructions.operand("add", "What is 37 + 45?") == "37 + 45"


def test_scores_answer_all_kinds_in_one_batch():
    model = tiny()
    items = instructions.mix(3, seed=2)
    got = instructions.scores(model, items, max_new=4)
    assert list(got) == list(instructions.KINDS)
    for kind in instructions.KINDS:
        pairs = [(p, a) for k, p, a in items if k == kind]
        assert got[kind] == instructions.accuracy(model, pairs, kind, max_new=4)
        responses = chat.respond(model, [p for p, _ in pairs], max_new=4)
        assert got[kind]["format"] == sum(map(instructions.follows_format, responses)) / 3
