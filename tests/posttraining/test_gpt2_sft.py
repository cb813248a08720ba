"""posttraining.gpt2_sft: GPT-2's plain-text chat template, SFT and greedy responses,
on a small random GPT-2 and a byte-level BPE tokenizer trained here (no download)."""

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from lecturelib.posttraining import gpt2_sft, weights
from lecturelib.pretraining import gpt

PAIRS = [("Sort 3141.", "1134"), ("Write abc backwards.", "cba"),
         ("Add: 2 + 40", "42"), ("ISO date: Jul 2 1999", "1999-07-02")]


@pytest.fixture(scope="module")
def tokenizer():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=[gpt2_sft.EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    text = [gpt2_sft.QUESTION.format(p) + gpt2_sft.ANSWER.format(r) for p, r in PAIRS]
    tok.train_from_iterator(text * 20, trainer)
    return tok


def small_gpt2(tokenizer, seed=0):
    torch.manual_seed(seed)
    config = weights.gpt2_config({"vocab_size": tokenizer.get_vocab_size(),
                                  "n_positions": 64, "n_embd": 48, "n_layer": 2,
                                  "n_head": 4, "activation_function": "gelu_new"})
    return gpt.GPT(config).eval()


def test_encode_masks_the_response_and_the_end(tokenizer):
    ids, mask = gpt2_sft.encode(tokenizer, "Sort 3141.", "1134")
    head, none = gpt2_sft.encode(tokenizer, "Sort 3141.")
    assert not none.any() and torch.equal(ids[: len(head)], head)
    assert not mask[: len(head)].any() and mask[len(head):].all()
    eos = tokenizer.token_to_id(gpt2_sft.EOS)
    assert ids[-1] == eos and (ids[:-1] != eos).all()
    assert tokenizer.decode(ids[mask][:-1].tolist()) == " 1134"
    assert tokenizer.decode(head.tolist()) == "Question: Sort 3141.\nAnswer:"


def test_batched_responses_equal_one_at_a_time(tokenizer):
    model = small_gpt2(tokenizer)
    prompts = [p for p, _ in PAIRS]       # of different lengths: left padding differs
    batched = gpt2_sft.respond(model, tokenizer, prompts, max_new=6)
    alone = [gpt2_sft.respond(model, tokenizer, [p], max_new=6)[0] for p in prompts]
    assert batched == alone


def test_finetuning_teaches_the_responses_and_where_to_stop(tokenizer):
    model = small_gpt2(tokenizer)
    before = gpt2_sft.respond(model, tokenizer, [p for p, _ in PAIRS], max_new=8)
    tuned, hist = gpt2_sft.finetune(model, tokenizer, PAIRS, steps=80, batch_size=4,
                                    lr=3e-3, progress=False)
    after = gpt2_sft.respond(tuned, tokenizer, [p for p, _ in PAIRS], max_new=8)
    assert after == [r for _, r in PAIRS] != before
    assert hist.train_loss[-1] < 0.1 * hist.train_loss[0]
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(),
                                                 small_gpt2(tokenizer).state_dict().values()))


# --------------------------------------------------- user text is plain text, never EOS


def test_encode_reads_a_typed_endoftext_as_plain_text(tokenizer):
    eos = tokenizer.token_to_id(gpt2_sft.EOS)
    ids, mask = gpt2_sft.encode(tokenizer, "a<|endoftext|>b", "c<|endoftext|>d")
    assert (ids == eos).sum() == 1 and ids[-1] == eos  # the template's end only
    head, _ = gpt2_sft.encode(tokenizer, "a<|endoftext|>b")
    assert eos not in head.tolist()
    text = tokenizer.decode(head.tolist(), skip_special_tokens=False)
    assert text == "Question: a<|endoftext|>b\nAnswer:"
    body = tokenizer.decode(ids[mask][:-1].tolist(), skip_special_tokens=False)
    assert body == " c<|endoftext|>d"
    assert not tokenizer.encode_special_tokens  # the tokenizer is left as it was
    assert tokenizer.encode("<|endoftext|>").ids == [eos]


def test_a_tokenizer_that_reads_endoftext_in_text_is_refused(tokenizer):
    class Reads:  # a tokenizer-like object without the switch
        def encode(self, text):
            return tokenizer.encode(text)

        def decode(self, ids):
            return tokenizer.decode(ids)

        def token_to_id(self, token):
            return tokenizer.token_to_id(token)

    assert gpt2_sft.encode(Reads(), "ab")[0].tolist() == gpt2_sft.encode(
        tokenizer, "ab")[0].tolist()
    with pytest.raises(ValueError, match=r"read <\|endoftext\|> in the text "
                                         r"'Question: a<\|endoftext\|>b\\nAnswer:' as "
                                         r"its special id"):
        gpt2_sft.encode(Reads(), "a<|endoftext|>b")


def first_inputs(model):
    """The ids of every forward pass of ``model``, in order."""
    seen = []
    model.register_forward_pre_hook(lambda m, args: seen.append(args[0].clone()))
    return seen


def test_respond_and_finetune_read_prompts_as_plain_text(tokenizer):
    eos = tokenizer.token_to_id(gpt2_sft.EOS)
    model = small_gpt2(tokenizer)
    prompt = "Sort <|endoftext|>3141."
    seen = first_inputs(model)
    gpt2_sft.respond(model, tokenizer, [prompt, "hi"], max_new=2)
    head = gpt2_sft.encode(tokenizer, prompt)[0]
    assert torch.equal(seen[0][0], head) and eos not in seen[0][0].tolist()
    tuned, _ = gpt2_sft.finetune(model, tokenizer, [(prompt, "1<|endoftext|>134")],
                                 steps=2, batch_size=1, progress=False)
    ids, _ = gpt2_sft.encode(tokenizer, prompt, "1<|endoftext|>134")
    assert torch.equal(seen[-1][0], ids[:-1]) and eos not in ids[:-1].tolist()


@pytest.mark.parametrize("steps", [1, 2, 25])
def test_finetune_takes_any_number_of_steps(tokenizer, steps):
    model = small_gpt2(tokenizer)
    tuned, hist = gpt2_sft.finetune(model, tokenizer, PAIRS[:1], steps=steps,
                                    batch_size=1, lr=1e-3, progress=False)
    assert len(hist.train_loss) == steps
    assert not torch.equal(tuned.embed.weight, model.embed.weight)


# ------------------------------------- the real-GPT-2 path, from a local copy, offline


def test_gpt2_from_a_local_copy_continues_finetunes_and_answers(tokenizer, tmp_path,
                                                                monkeypatch):
    """Chapter 21's real-GPT-2 path end to end without a download: a small random GPT-2
    written in the hub's file layout (config.json, model.safetensors without the
    ``transformer.`` prefix or a head, tokenizer.json) into a data folder is verified,
    loaded by ``weights.load_gpt2`` with logits equal to ``transformers``', continues
    plain prompts, is finetuned and answers in the template."""
    import dataclasses
    import hashlib
    import json

    from safetensors.torch import save_file
    from transformers import GPT2Config, GPT2LMHeadModel

    from lecturelib.data import registry, store

    torch.manual_seed(0)
    hf_config = GPT2Config(vocab_size=tokenizer.get_vocab_size(), n_positions=64,
                           n_embd=48, n_layer=2, n_head=4, bos_token_id=0,
                           eos_token_id=0)
    reference = GPT2LMHeadModel(hf_config).eval()
    folder = tmp_path / "data" / "gpt2"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(hf_config.to_dict()))
    state = {k.removeprefix("transformer."): v.contiguous()
             for k, v in reference.state_dict().items() if not k.startswith("lm_head")}
    save_file(state, str(folder / "model.safetensors"))
    tokenizer.save(str(folder / "tokenizer.json"))
    for name, (file, _, _) in registry._GPT2_FILES.items():
        blob = (folder / file).read_bytes()
        ds = registry.MODELS[name]
        local = registry.LocalForm(f"gpt2/{file}", hashlib.sha256(blob).hexdigest(),
                                   size=len(blob))
        monkeypatch.setitem(registry.MODELS, name, dataclasses.replace(ds, forms=(local,)))
    monkeypatch.setenv("LECTURELIB_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("LECTURELIB_CACHE", str(tmp_path / "cache"))

    def offline(url, timeout=60):
        raise AssertionError(f"no download expected: {url}")

    monkeypatch.setattr(store, "_urlopen", offline)

    model, tok = weights.load_gpt2("cpu")
    ids = torch.tensor([tok.encode("Sort 3141.").ids])
    with torch.no_grad():
        torch.testing.assert_close(model(ids), reference(ids).logits, atol=1e-4, rtol=0)
    prompts = [p for p, _ in PAIRS]
    plain = gpt2_sft.respond(model, tok, prompts, max_new=4, template=False)
    assert len(plain) == len(prompts) and all(isinstance(t, str) for t in plain)
    tuned, hist = gpt2_sft.finetune(model, tok, PAIRS, steps=80, batch_size=4, lr=3e-3,
                                    progress=False)
    assert hist.train_loss[-1] < 0.2 * hist.train_loss[0]
    after = gpt2_sft.respond(tuned, tok, prompts, max_new=8)
    assert sum(a == r for a, (_, r) in zip(after, PAIRS)) >= 3
    (folder / "model.safetensors").write_bytes(b"not the verified file")
    with pytest.raises(Exception, match="SHA-256|sha256|checksum"):
        weights.load_gpt2("cpu")


def test_a_plain_continuation_reads_the_prompt_without_the_template(tokenizer):
    model = small_gpt2(tokenizer)
    seen = first_inputs(model)
    gpt2_sft.respond(model, tokenizer, ["Sort 3141."], max_new=1, template=False)
    assert seen[0][0].tolist() == gpt2_sft.text_ids(tokenizer, "Sort 3141.")
