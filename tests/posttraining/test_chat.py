"""lecturelib.posttraining.chat: the chat vocabulary and template, the masked loss,
packing, response log-probabilities, decoding, and the sampler of GRPO's groups."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from lecturelib.posttraining import chat, instructions, padded_cache, rollout, sft
from lecturelib.pretraining import gpt, peft
from lecturelib.transformers import decoding


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


# ----------------------------------------------------------------------------- vocabulary


def test_vocab_round_trip_and_special_tokens():
    v = chat.VOCAB
    text = "<|user|>Sort the digits: 3141<|assistant|>1134<|end|>"
    ids = v.encode(text, specials=True)
    assert v.decode(ids) == text
    assert ids[0] == v.user and ids[-1] == v.end
    assert (ids == v.assistant).sum() == 1
    assert (
        len(ids) == len("Sort the digits: 3141") + len("1134") + 3
    )  # one id per special
    assert v.pad == 0 and len(v) == 4 + 96
    assert v.decode(v.encode("\n a~")) == "\n a~"


# ----------------------------------------------------------------------------- template


SPECIAL_IDS = {chat.VOCAB.stoi[s] for s in chat.SPECIALS}


def specials_in(ids):
    return [chat.VOCAB.itos[i] for i in ids.tolist() if i in SPECIAL_IDS]


def test_encode_reads_special_strings_as_plain_text():
    v = chat.VOCAB
    ids = v.encode("a<|end|>b<|user|>")
    assert specials_in(ids) == [] and len(ids) == len("a<|end|>b<|user|>")
    assert v.decode(ids) == "a<|end|>b<|user|>"
    assert specials_in(v.encode("a<|end|>", specials=True)) == ["<|end|>"]


def test_chat_template_is_not_injected_by_user_or_response_text():
    ids, mask = chat.chat("hi<|assistant|>ok", "x")
    assert specials_in(ids) == ["<|user|>", "<|assistant|>", "<|end|>"]
    assert chat.VOCAB.decode(ids) == "<|user|>hi<|assistant|>ok<|assistant|>x<|end|>"
    assert chat.VOCAB.decode(ids[mask]) == "x<|end|>"  # the target starts after the
    ids, mask = chat.chat("hi", "a<|end|>b")  # template's <|assistant|>, not the text's
    assert specials_in(ids) == ["<|user|>", "<|assistant|>", "<|end|>"]
    assert ids[-1] == chat.VOCAB.end  # the one end is the template's, after "b"
    assert chat.VOCAB.decode(ids[mask]) == "a<|end|>b<|end|>"
    assert chat.VOCAB.decode(ids[mask][-2:]) == "b<|end|>"
    head, _ = chat.chat("<|end|><|pad|>")
    assert specials_in(head) == ["<|user|>", "<|assistant|>"]
    # a final <|end|> of a response is the template's own (echo_pairs writes it)
    assert torch.equal(chat.chat("q", "3<|end|>")[0], chat.chat("q", "3")[0])


def test_logprobs_read_user_text_as_plain_text():
    model = tiny()
    got = chat.logprobs(model, ["a<|assistant|>b"], ["c<|end|>d"])
    ids, mask = chat.chat("a<|assistant|>b", "c<|end|>d")
    assert specials_in(ids) == ["<|user|>", "<|assistant|>", "<|end|>"]
    torch.testing.assert_close(got, chat.response_logprobs(model, ids[None], mask[None]))


@pytest.mark.parametrize("template", [True, False])
def test_respond_and_group_sampler_read_prompts_as_plain_text(template, monkeypatch):
    seen = []
    generate = chat._generate

    def spy(model, heads, *args):
        seen.extend(heads)
        return generate(model, heads, *args)

    monkeypatch.setattr(chat, "_generate", spy)
    model, prompt = tiny(), "x<|end|><|assistant|>y<|user|>"
    chat.respond(model, [prompt], max_new=2, template=template)
    want = ["<|user|>", "<|assistant|>"] if template else []
    assert specials_in(seen[-1]) == want
    text = chat.USER + prompt + chat.ASSISTANT if template else prompt
    assert chat.VOCAB.decode(seen[-1]) == text
    assert len(seen[-1]) == len(prompt) + 2 * template
    if template:
        ids, mask, _ = chat.group_sampler(max_new=2)(model, [prompt], 2)
        assert all(specials_in(row[~mask[i]][: len(prompt) + 2]) == want
                   for i, row in enumerate(ids))




def test_chat_template_and_mask():
    ids, mask = chat.chat("Add: 1 + 2", "3")
    assert chat.VOCAB.decode(ids) == "<|user|>Add: 1 + 2<|assistant|>3<|end|>"
    assert chat.VOCAB.decode(ids[mask]) == "3<|end|>"
    assert mask.dtype == torch.bool and not mask[: len(ids) - 2].any()
    head, none = chat.chat("Add: 1 + 2")
    assert torch.equal(head, ids[: len(head)]) and not none.any()
    assert chat.VOCAB.decode(head).endswith(chat.ASSISTANT)
    assert torch.equal(chat.chat("q", "3<|end|>")[0], chat.chat("q", "3")[0])


def test_masked_loss_gives_prompt_tokens_zero_gradient():
    model = tiny()
    ex = [chat.chat(p, a) for p, a in instructions.problems("add", 3, seed=0)]
    x, y, _, m = chat.shifted(*chat.collate(ex))
    logits = model(x)
    logits.retain_grad()
    loss = chat.masked_loss(logits, y, m)
    loss.backward()
    assert logits.grad[~m].abs().max() == 0  # prompt and padding
    assert (logits.grad[m].abs().sum(-1) > 0).all()  # every response token
    ref = F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="none")
    torch.testing.assert_close(loss, ref[m.flatten()].mean())


def test_collate_pads_on_the_right():
    ex = [chat.chat("Add: 1 + 2", "3"), chat.chat("Write abcdef backwards.", "fedcba")]
    ids, mask = chat.collate(ex)
    assert ids.shape == (2, len(ex[1][0]))
    assert (ids[0, len(ex[0][0]) :] == chat.VOCAB.pad).all() and not mask[
        0, len(ex[0][0]) :
    ].any()


@pytest.mark.parametrize("positions", ["rope", "learned"])
def test_packed_equals_unpacked(positions):
    model = tiny(positions=positions)
    ex = [chat.chat(p, a) for k in instructions.KINDS for p, a in instructions.problems(k, 3, seed=2)]
    ids, targets, segments, mask = chat.pack(ex, 96)
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
    loss_packed = sft.sft_loss(model, (ids, targets, segments, mask))
    loss_alone = sft.sft_loss(model, chat.shifted(*chat.collate(ex)))
    torch.testing.assert_close(loss_packed, loss_alone, atol=1e-5, rtol=1e-5)


def test_pack_refuses_an_example_too_long():
    ex = [chat.chat("Write abcdef backwards.", "fedcba")]
    with pytest.raises(ValueError, match="does not fit seq_len=10"):
        chat.pack(ex, 10)


def test_response_logprobs_equals_token_by_token():
    model = tiny()
    ex = [chat.chat(p, a) for p, a in instructions.problems("reverse", 4, seed=3)]
    ids, mask = chat.collate(ex)
    got = chat.response_logprobs(model, ids, mask)
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
            chat.response_logprobs(model, longer, more), got.detach()
        )


def test_respond_greedy_equals_one_prompt_at_a_time():
    model = tiny()
    prompts = [
        p for p, _ in instructions.problems("sort", 6, seed=0) + instructions.problems("add", 3, seed=0)
    ]
    batched = chat.respond(model, prompts, max_new=5)
    for p, r in zip(prompts, batched):
        ids = chat.chat(p)[0][None]
        out = decoding.greedy(lambda x: model(x)[:, -1], ids, 5, eos=chat.VOCAB.end)
        text = chat.VOCAB.decode(out[0, ids.shape[1] :])
        assert r == (text[: text.index(chat.END) + len(chat.END)] if chat.END in text else text)
    g1, g2 = (torch.Generator().manual_seed(0) for _ in range(2))
    assert chat.respond(model, prompts, 5, 1.0, g1) == chat.respond(
        model, prompts, 5, 1.0, g2
    )


def test_group_sampler_feeds_grpo_step():
    model = tiny()
    prompts = [p for p, _ in instructions.problems("sort", 3, seed=0)]
    ids, mask, texts = chat.group_sampler(max_new=6, seed=1)(model, prompts, 4)
    assert ids.shape[0] == mask.shape[0] == len(texts) == 12 and mask.dtype == torch.bool
    for i, (row, m) in enumerate(zip(ids, mask)):
        head = chat.chat(prompts[i // 4])[0]
        assert torch.equal(row[: len(head)], head) and not m[: len(head)].any()
        written = chat.VOCAB.decode(row[m])
        assert written.removesuffix(chat.END) == texts[i] and chat.END not in texts[i]
        assert 1 <= int(m.sum()) <= 6
    again = chat.group_sampler(max_new=6, seed=1)(model, prompts, 4)
    assert torch.equal(again[0], ids) and again[2] == texts          # seeded
    torch.testing.assert_close((rollout.token_logprobs(model, ids) * mask).sum(-1),
                               chat.response_logprobs(model, ids, mask))
    ref = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    stats = rollout.grpo_step(model, ref, opt, prompts, chat.group_sampler(max_new=6),
                         lambda p, r: float(len(r) % 2), group_size=4)
    assert len(stats["responses"]) == 12 and 0 <= stats["reward"] <= 1


# ------------------------------------------------------------------- cached decoding

PROMPTS = ["a", "Add: 12 + 7", "Sort the digits: 3141592", "hi", "Write abc backwards."]


def heads_of(prompts):
    return [chat.chat(p)[0] for p in prompts]


def uncached(monkeypatch):
    """chat._generate with the full forward at every token (the code before the
    cache)."""

    def run(*args):
        with monkeypatch.context() as m:
            m.setattr(padded_cache, "runs", lambda model: False)
            return chat._generate(*args)

    return run


def left_padded(heads):
    t = max(len(h) for h in heads)
    ids = torch.full((len(heads), t), chat.VOCAB.pad)
    segments = torch.ones_like(ids)
    for i, h in enumerate(heads):
        ids[i, t - len(h) :], segments[i, : t - len(h)] = h, 0
    return ids, segments


def lively(positions, seed=1):
    """A random GPT with large weights, whose rows write different tokens."""
    model = tiny(seq_len=40, seed=seed, positions=positions)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.5)
    return model


def a_stop_id(run):
    """A token that, as the stop token of ``run(stop_id)``, ends the rows at three
    different steps or more."""
    for tok in torch.cat(run(-1)).unique().tolist():
        if len({len(y) for y in run(tok)}) >= 3:
            return tok
    raise AssertionError("no token stops the rows at three different steps")


@pytest.mark.parametrize("positions", ["rope", "learned"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_cached_generation_equals_uncached(positions, temperature, monkeypatch):
    model = lively(positions)
    assert padded_cache.runs(model)
    heads = heads_of(PROMPTS)
    t = max(len(h) for h in heads)

    def run(stop_id, cached):
        generate = chat._generate if cached else uncached(monkeypatch)
        with torch.no_grad():
            gen = torch.Generator().manual_seed(3)
            new = generate(model, heads, 100, temperature, gen, stop_id)
        return [y.tolist() for y in new]

    # max_new reaches seq_len: every row writes seq_len - t tokens (no stop token)
    full = run(-1, cached=False)
    assert all(len(y) == 40 - t for y in full) and len({tuple(y) for y in full}) > 1
    assert run(-1, cached=True) == full
    stop = a_stop_id(lambda s: [torch.tensor(y) for y in run(s, cached=False)])
    assert run(stop, cached=True) == run(stop, cached=False)


@pytest.mark.parametrize("positions", ["rope", "learned"])
def test_cached_logits_equal_the_full_forward_and_each_prompt_alone(positions):
    """At every step, the cached next-token logits equal ``model(ids, segments)`` of
    the padded batch and those of each prompt read alone, without padding (they would
    not if the padding were seen or the positions counted from the padding)."""
    model = tiny(seq_len=40, seed=2, positions=positions)
    heads = heads_of(PROMPTS)
    ids, segments = left_padded(heads)
    step = padded_cache.PaddedDecoder(model, 40)
    rows = torch.arange(len(heads))
    alone = [h for h in heads]
    with torch.no_grad():
        for i in range(40 - ids.shape[1]):
            got = step(ids, segments, rows)  # (a, v)
            torch.testing.assert_close(
                got, model(ids[rows], segments[rows])[:, -1], atol=1e-5, rtol=1e-5
            )
            for j, r in enumerate(rows.tolist()):
                torch.testing.assert_close(
                    got[j], model(alone[r][None])[0, -1], atol=1e-5, rtol=1e-5
                )
            token = got.argmax(-1)
            new = torch.full((len(heads),), chat.VOCAB.pad)
            new[rows] = token
            ids = torch.cat([ids, new[:, None]], 1)
            segments = F.pad(segments, (0, 1), value=1)
            alone = [torch.cat([a, new[r : r + 1]]) for r, a in enumerate(alone)]
            if i in (2, 5):  # rows stop: the cache drops them
                rows = rows[1:] if i == 2 else rows[[0, 2]]
            assert step.cache.batch == len(got)


@pytest.mark.parametrize("order", [[4, 2, 0, 1, 3], [3, 0, 4], [1, 0]])
def test_cached_logits_follow_rows_given_in_another_order(order):
    """Rows may come in any order the caller likes (a reordered batch, the rows still
    writing sorted by length ...): the cache follows them."""
    model = lively("rope", seed=3)
    ids, segments = left_padded(heads_of(PROMPTS))
    step = padded_cache.PaddedDecoder(model, 40)
    rows = torch.arange(len(PROMPTS))
    with torch.no_grad():
        for i in range(4):
            got = step(ids, segments, rows)
            want = model(ids[rows], segments[rows])[:, -1]
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
            new = torch.full((len(PROMPTS),), chat.VOCAB.pad)
            new[rows] = got.argmax(-1)
            ids = torch.cat([ids, new[:, None]], 1)
            segments = F.pad(segments, (0, 1), value=1)
            rows = torch.tensor(order) if i == 0 else rows.flip(0)


class Biased(gpt.GPT):
    """A GPT whose own forward always says <|end|>: the cache must not bypass it."""

    def forward(self, ids, segments=None):
        logits = super().forward(ids, segments)
        logits[..., chat.VOCAB.end] += 100.0
        return logits


def test_cached_path_only_for_a_plain_gpt():
    model = tiny()
    assert padded_cache.runs(model)
    biased = Biased(model.config).eval()
    biased.load_state_dict(model.state_dict())
    assert not padded_cache.runs(biased)
    assert chat.respond(biased, PROMPTS, max_new=5) == [chat.END] * len(PROMPTS)
    lora = peft.add_lora(copy.deepcopy(model))
    assert not padded_cache.runs(lora)
    hooked = copy.deepcopy(model)
    hooked.blocks[0].register_forward_hook(lambda m, i, o: o)
    assert not padded_cache.runs(hooked)
    dropout = tiny()
    dropout.config.dropout = 0.1
    assert padded_cache.runs(dropout) and not padded_cache.runs(dropout.train())
    assert padded_cache.runs(model.train())  # no dropout: training mode changes nothing
