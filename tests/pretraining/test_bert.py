"""lecturelib.pretraining.bert (masking, the encoder), lecturelib.pretraining.finetune (GPT-style finetuning)
and lecturelib.pretraining.t5 (span corruption)."""

from __future__ import annotations

import math

import torch

from lecturelib import train
from lecturelib.pretraining import bert, finetune, gpt, t5

SP = bert.Specials(50)


def small(pool="mean", seed=0):
    torch.manual_seed(seed)
    return bert.BERT(bert.BERTConfig(vocab_size=SP.vocab_size, max_len=16, d_model=16,
                                     n_heads=2, n_layers=2, pool=pool)).eval()


def test_specials_follow_the_ordinary_ids():
    assert (SP.pad, SP.cls, SP.sep, SP.mask, SP.vocab_size) == (50, 51, 52, 53, 54)


def test_mask_rates_are_15_percent_and_80_10_10():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, SP.n_text, (400, 250), generator=g)       # 1e5 tokens
    ids[:, 0], ids[:, -20:] = SP.cls, SP.pad                          # never selected
    inputs, targets = bert.mask_tokens(ids, SP, generator=g)
    selected = targets != bert.IGNORE
    ordinary = ids < SP.n_text
    n, k = int(ordinary.sum()), int(selected.sum())
    assert not selected[~ordinary].any()
    assert torch.equal(inputs[~ordinary], ids[~ordinary])
    assert abs(k / n - 0.15) < 4 * math.sqrt(0.15 * 0.85 / n)
    assert torch.equal(targets[selected], ids[selected])
    masked = (inputs == SP.mask)[selected].float().mean().item()
    kept = (inputs == ids)[selected].float().mean().item()
    random = 1 - masked - kept                 # a random draw of the original is "kept"
    tol = 4 * math.sqrt(0.8 * 0.2 / k)
    assert abs(masked - 0.8) < tol
    assert abs(kept - (0.1 + 0.1 / SP.n_text)) < tol
    assert abs(random - (0.1 - 0.1 / SP.n_text)) < tol
    assert inputs.max() < SP.vocab_size


def test_dynamic_masks_change_and_static_masks_repeat():
    stream = torch.arange(40)  # distinct ids: a window is known by its first token
    patterns = {}
    for dynamic in (True, False):
        draw = bert.mlm_batches(stream, SP, 8, 8, seed=1, dynamic=dynamic)
        seen = {}
        for step in range(100):
            inputs, targets = draw(step)
            assert inputs.shape == (8, 8) and (inputs[:, 0] == SP.cls).all()
            original = torch.where(targets != bert.IGNORE, targets, inputs)
            for row, orig in zip(inputs.tolist(), original.tolist()):
                seen.setdefault(orig[1], set()).add(tuple(row))
        patterns[dynamic] = max(len(v) for v in seen.values())
    assert patterns[False] == 1 < patterns[True]


def test_encoder_is_bidirectional():
    model = small()
    ids = torch.randint(0, SP.n_text, (1, 12))
    changed = ids.clone()
    changed[0, 10] = (changed[0, 10] + 1) % SP.n_text
    with torch.no_grad():
        h, h2 = model.encode(ids), model.encode(changed)
    assert not torch.allclose(h[0, 2], h2[0, 2])                    # earlier position


def test_padding_does_not_change_the_real_positions():
    model = small()
    a, b = [SP.cls, 5, 6, 7, SP.sep], [SP.cls, 8, 9, 10, 11, 12, 13, SP.sep]
    ids, lengths = bert.pad([a, b], SP.pad)
    assert ids.shape == (2, 8) and lengths.tolist() == [5, 8]
    with torch.no_grad():
        alone = model.encode(torch.tensor([a]))
        batched = model.encode(ids, lengths)
        torch.testing.assert_close(batched[0, :5], alone[0], atol=1e-5, rtol=1e-5)
        logits = model(ids, lengths)
        torch.testing.assert_close(logits[0], model(torch.tensor([a]))[0], atol=1e-5,
                                   rtol=1e-5)
    assert logits.shape == (2, 2)


def test_mlm_head_is_tied_and_shapes():
    model = small("cls")
    assert model.mlm.embedding.weight is model.embed.tok.weight
    ids = torch.randint(0, SP.n_text, (3, 9))
    assert model.mlm_logits(ids).shape == (3, 9, SP.vocab_size)
    assert model.pooled(ids).shape == (3, 16)
    with torch.no_grad():
        torch.testing.assert_close(model.pooled(ids), model.encode(ids)[:, 0])


def test_mlm_loss_counts_selected_positions_only_and_overfits_one_batch():
    model = small().train()
    stream = bert.token_stream([[1, 2, 3, 4, 5, 6, 7]] * 20, SP)
    assert stream[:8].tolist() == [1, 2, 3, 4, 5, 6, 7, SP.sep]
    batch = bert.mlm_batches(stream, SP, 16, 12, seed=0)(0)
    first = bert.mlm_loss(model, batch).item()
    assert abs(first - math.log(SP.vocab_size)) < 0.5       # near uniform at init
    hist = train.fit(model, [batch], bert.mlm_loss, steps=60, lr=1e-2, progress=False)
    assert hist.train_loss[-1] < 0.3 * first


def test_encode_sentence_and_accuracy():
    assert bert.encode_sentence([1, 2, 3, 4], SP, 5) == [SP.cls, 1, 2, 3, SP.sep]
    model = small()
    ids, lengths = bert.pad([[SP.cls, 1, SP.sep], [SP.cls, 2, 3, SP.sep]], SP.pad)
    labels = model(ids, lengths).argmax(-1)
    assert bert.accuracy(model, ids, lengths, labels) == 1.0
    assert bert.accuracy(model, ids, lengths, 1 - labels) == 0.0


def test_format_input():
    f = dict(start=100, delim=101, extract=102)
    pair = finetune.format_input([1, 2], [3], max_len=10, **f)
    assert pair == [100, 1, 2, 101, 3, 102]
    assert finetune.format_input([1, 2], None, max_len=10, **f) == [100, 1, 2, 102]
    cut = finetune.format_input([1, 2, 3, 4], [5, 6, 7, 8, 9, 10], max_len=9, **f)
    assert cut == [100, 1, 2, 3, 101, 5, 6, 7, 102] and len(cut) == 9


def tiny_gpt():
    torch.manual_seed(0)
    return gpt.GPT(gpt.GPTConfig(vocab_size=11, seq_len=16, d_model=16, n_layers=1,
                                 n_heads=2)).eval()


def test_extend_vocab_keeps_the_pretrained_model():
    model = tiny_gpt()
    bigger = finetune.extend_vocab(model, 3, generator=torch.Generator().manual_seed(0))
    assert bigger.config.vocab_size == 14
    assert bigger.embed.weight.shape == (14, 16)
    ids = torch.randint(0, 11, (2, 7))
    with torch.no_grad():
        torch.testing.assert_close(bigger.eval()(ids)[..., :11], model(ids))


def test_classifier_reads_the_extract_position():
    clf = finetune.GPTClassifier(finetune.extend_vocab(tiny_gpt(), 3), 2).eval()
    ids = torch.tensor([[11, 1, 2, 13, 0, 0], [11, 3, 4, 5, 6, 13]])
    lengths = torch.tensor([4, 6])
    with torch.no_grad():
        logits = clf(ids, lengths)
        alone = clf(ids[:1, :4], torch.tensor([4]))
    # causal: the padding comes after [EXTRACT] and cannot change it
    torch.testing.assert_close(logits[:1], alone, atol=1e-5, rtol=1e-5)
    labels = torch.tensor([0, 1])
    base = finetune.classifier_loss(clf, (ids, lengths, labels))
    with_lm = finetune.classifier_loss(clf, (ids, lengths, labels), lm_weight=0.5)
    assert with_lm > base


def test_span_corruption_reconstructs_and_rates():
    sentinels = list(range(1000, 1100))
    g = torch.Generator().manual_seed(0)
    corrupted, spans = 0, []
    total = 0
    for _ in range(200):
        ids = torch.randint(0, 500, (100,), generator=g).tolist()
        inputs, targets = t5.span_corrupt(ids, sentinels, generator=g)
        assert t5.span_restore(inputs, targets, sentinels) == ids
        n_spans = sum(1 for i in inputs if i >= 1000)
        assert targets[0] == 1000 and targets[-1] == 1000 + n_spans
        corrupted += len(targets) - n_spans - 1
        spans.append(n_spans)
        total += len(ids)
    assert corrupted / total == 0.15
    assert abs(corrupted / sum(spans) - 3.0) < 0.3                 # mean span length


def test_span_corruption_example():
    corrupt = [False, True, True, False, True, False]
    inputs, targets = t5.split_spans([1, 2, 3, 4, 5, 6], corrupt, [90, 91, 92])
    assert inputs == [1, 90, 4, 91, 6] and targets == [90, 2, 3, 91, 5, 92]
