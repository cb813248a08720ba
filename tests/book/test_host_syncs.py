"""Host-device syncs on the gpu path, counted on the CUDA stand-in: a training step reads
the device back only when it logs, and a forward pass never."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from cuda_standin import count_syncs, cuda_standin, real_cuda
from lecturelib import train
from lecturelib.efficiency import kvcache, moe
from lecturelib.long_context import retrieval, segment_memory
from lecturelib.posttraining import chat
from lecturelib.pretraining import bert, gpt
from lecturelib.recurrence import lstm_gru, rnn, seq2seq
from lecturelib.state_space import hybrid
from lecturelib.transformers import decoding
from lecturelib.transformers import positional_lm as plm

CUDA = torch.device("cuda")
pytestmark = pytest.mark.skipif(real_cuda(), reason="counts syncs on the stand-in")


@pytest.fixture(autouse=True)
def _standin():
    with cuda_standin():
        yield


def small_gpt(**kw) -> gpt.GPT:
    torch.manual_seed(0)
    config = gpt.GPTConfig(vocab_size=7, seq_len=16, d_model=16, n_layers=2, n_heads=2)
    return gpt.GPT(config, **kw)


OPTIMIZERS = {
    "sgd": lambda m: torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9),
    "adamw": lambda m: torch.optim.AdamW(m.parameters(), lr=3e-3),
    "adamw-decay-groups": lambda m: train.adamw(m, 3e-3),
    "muon+adamw": lambda m: train.optim.muon_adamw(m, 3e-3),
}


@pytest.mark.parametrize("clip", [None, 1.0])
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_a_step_syncs_once_when_it_logs_and_never_otherwise(name, clip):
    model = small_gpt().to(CUDA)
    batches = gpt.windows(torch.arange(400) % 7, 4, 16)
    steps, log_every = 7, 3  # logs after steps 3, 6 and 7
    syncs_per_step = []

    def loss_fn(net, batch):
        return F.cross_entropy(net(batch[0]).flatten(0, 1), batch[1].flatten())

    trainer = train.Trainer(
        model,
        loss_fn,
        train.batches.BatchSource(batches),
        OPTIMIZERS[name](model),
        None,
        train.Precision(CUDA, amp=False),  # fp16's GradScaler reads back every step
        steps,
        clip,
        log_every=log_every,
    )
    for _ in range(steps):
        with count_syncs() as syncs:
            loss, norm = trainer.train_step()
            trainer.record(loss, norm)
        syncs_per_step.append(syncs.n)
    assert syncs_per_step == [0, 0, 1, 0, 0, 1, 1], syncs.where
    assert trainer.history.steps == [3, 6, 7]


@pytest.mark.parametrize("name", ["fit's default", "adamw-decay-groups", "muon+adamw"])
def test_fp16_steps_with_a_fused_optimizer_read_nothing_back(name):
    """On a T4 (fp16) the gradient scaler must know whether a gradient overflowed: a fused
    optimizer (the book's AdamW on CUDA) takes that flag on the device, and so does
    `Combined`, which undoes Muon's step on the device where the flag is set; any other
    optimizer has GradScaler.step read it back (`.item()`) at every step."""
    model = small_gpt().to(CUDA)
    batches = gpt.windows(torch.arange(400) % 7, 4, 16)
    optimizer = None if name == "fit's default" else OPTIMIZERS[name](model)
    counts = []

    def loss_fn(net, batch):
        with count_syncs() as syncs:  # the forward pass, inside the step
            loss = F.cross_entropy(net(batch[0]).flatten(0, 1), batch[1].flatten())
        counts.append(syncs.n)
        return loss

    with count_syncs() as syncs:
        history = train.fit(
            model,
            batches,
            loss_fn,
            steps=6,
            optimizer=optimizer,
            progress=False,
            log_every=3,
        )
    assert history.steps == [3, 6] and counts == [0] * 6
    assert syncs.n == 2, syncs.where  # the two logging reads only


def test_fp16_steps_with_a_plain_adamw_read_the_flag_back():
    """The counter-example: torch's foreach AdamW has no scaler-aware step."""
    model = small_gpt().to(CUDA)
    batches = gpt.windows(torch.arange(400) % 7, 4, 16)
    with count_syncs() as syncs:
        train.fit(
            model,
            batches,
            lambda net, b: F.cross_entropy(net(b[0]).flatten(0, 1), b[1].flatten()),
            steps=6,
            optimizer=OPTIMIZERS["adamw"](model),
            progress=False,
            log_every=3,
        )
    assert syncs.n == 2 + 6, syncs.where  # the two logging reads, and one per step


def test_fit_records_the_same_history_on_the_stand_in_and_the_cpu():
    histories = []
    for device in ("cpu", CUDA):
        model = small_gpt().to(device)
        batches = gpt.windows(torch.arange(400) % 7, 4, 16)
        histories.append(
            train.fit(
                model,
                batches,
                lambda net, b: F.cross_entropy(net(b[0]).flatten(0, 1), b[1].flatten()),
                steps=5,
                # the same AdamW on both (fit's default is fused on CUDA: the same
                # update in another order of rounding)
                optimizer=torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False),
                clip=1.0,
                accumulate=2,
                amp=False,
                progress=False,
                log_every=2,
            )
        )
    cpu, cuda = histories
    assert cpu.steps == cuda.steps == [2, 4, 5]
    assert cpu.train_loss == cuda.train_loss and cpu.grad_norm == cuda.grad_norm


def ids(b=2, t=8, v=7):
    return torch.randint(0, v, (b, t), generator=torch.Generator().manual_seed(0))


def forward_gpt():
    return small_gpt().to(CUDA), (ids().to(CUDA),)


def forward_bert():
    config = bert.BERTConfig(
        vocab_size=11, max_len=16, d_model=16, n_heads=2, n_layers=2
    )
    return bert.BERT(config).to(CUDA), (ids(v=11).to(CUDA),)


def forward_char_rnn():
    return rnn.CharRNN(9, 8, 16).to(CUDA), (ids(v=9).to(CUDA),)


def forward_char_lstm():
    return lstm_gru.CharLSTM(9, 8, 16).to(CUDA), (ids(v=9).to(CUDA),)


def forward_translator():
    config = seq2seq.Seq2SeqConfig(
        src_vocab_size=9, tgt_vocab_size=9, d_emb=8, d_model=8
    )
    src = ids(v=9).to(CUDA)
    src_len = torch.tensor([8, 5])  # lengths stay on the CPU, as packing wants them
    return seq2seq.make_model(config).to(CUDA), (src, src_len, ids(v=9).to(CUDA))


def forward_positional_lm():
    config = plm.PositionalLMConfig(vocab_size=7, scheme="rope", d_model=16, n_heads=2)
    return plm.PositionalLM(config).to(CUDA), (ids().to(CUDA),)


def forward_moe_gpt():
    config = gpt.GPTConfig(vocab_size=7, seq_len=16, d_model=16, n_layers=2, n_heads=2)
    layer = moe.MoEConfig(
        16, 32, n_experts=4, top_k=2, capacity_factor=1.25, dispatch="slots"
    )  # fixed shapes, as chapter 16 trains it
    return moe.MoEGPT(config, layer).to(CUDA), (ids().to(CUDA),)


def forward_hybrid(kind):
    def build():
        model = hybrid.build(
            kind, 12, d_model=16, n_layers=2, seq_len=16, d_state=4, n_heads=2
        )
        return model.to(CUDA), (ids(v=12).to(CUDA),)

    return build


FAMILIES = {
    "gpt": forward_gpt,
    "bert": forward_bert,
    "char-rnn": forward_char_rnn,
    "char-lstm": forward_char_lstm,
    "translator": forward_translator,
    "positional-lm": forward_positional_lm,
    "moe-gpt": forward_moe_gpt,
} | {f"hybrid-{kind}": forward_hybrid(kind) for kind in hybrid.KINDS}


@pytest.mark.parametrize("family", FAMILIES)
def test_a_forward_pass_never_syncs(family):
    torch.manual_seed(0)
    model, inputs = FAMILIES[family]()
    with count_syncs() as syncs:
        model(*inputs)
    assert syncs.n == 0, syncs.where


def test_a_kv_cached_decode_step_never_syncs():
    """The next token stays on the device: the greedy loop feeds it back as the next
    step's input without reading it."""
    model = small_gpt().to(CUDA).eval()
    prompt = ids(t=5).to(CUDA)
    with torch.no_grad():
        cache = kvcache.new_cache(model, 2, 9)
        new = kvcache.cached_forward(model, prompt, cache)[:, -1].argmax(
            -1, keepdim=True
        )
        for _ in range(3):
            with count_syncs() as syncs:
                last = kvcache.cached_forward(model, new, cache)[:, -1]
                new = last.argmax(-1, keepdim=True)
            assert syncs.n == 0, syncs.where
    counts = []
    for n_new in (2, 4):  # the cache's setup reads the model, once per call
        with count_syncs() as syncs:
            out, _, _ = kvcache.generate(model, prompt, n_new)
        counts.append(syncs.n)
    assert counts[0] == counts[1] and out.shape == (2, 9), counts


@pytest.mark.parametrize("eos", [None, 3])
def test_generation_reads_back_once_per_token_only_to_stop_at_eos(eos):
    model = small_gpt().to(CUDA).eval()
    prompt = ids(t=5).to(CUDA)
    with count_syncs() as syncs:
        out = decoding.greedy(model.step, prompt, 4, eos=eos)
    new = out.shape[1] - prompt.shape[1]
    assert syncs.n == (0 if eos is None else new), syncs.where


def test_bad_ids_on_the_device_are_still_refused():
    model = small_gpt().to(CUDA)
    with pytest.raises(RuntimeError, match=r"ids must hold token ids in 0\.\.6"):
        model(torch.tensor([[1, 7]], device=CUDA))
    with pytest.raises(RuntimeError, match="must not hold nan"):
        decoding.check_logits(torch.full((2, 3), float("nan"), device=CUDA))
    with pytest.raises(RuntimeError, match="prompts must hold token ids >= 0"):
        decoding.greedy(model.step, torch.tensor([[1, -1]], device=CUDA), 2)


def old_kmeans(keys, n_cells, iters=10, seed=0):
    """Chapter 18's k-means as it was, one read-back per cell per iteration."""
    g = torch.Generator().manual_seed(seed)
    centres = keys[torch.randperm(keys.shape[0], generator=g)[:n_cells]].clone()
    for _ in range(iters):
        cell = torch.cdist(keys, centres).argmin(1)
        for c in range(n_cells):
            if (cell == c).any():
                centres[c] = keys[cell == c].mean(0)
    return centres


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_ivf_index_builds_without_syncs_and_finds_what_it_found(seed):
    keys = torch.randn(1024, 16, generator=torch.Generator().manual_seed(seed))
    queries = torch.randn(32, 16, generator=torch.Generator().manual_seed(seed + 10))
    cpu = retrieval.IVFIndex(keys, 16, 2, seed=seed)
    assert torch.equal(cpu.centres, old_kmeans(keys, 16, seed=seed))  # the CPU: exact
    with count_syncs() as syncs:
        cuda = retrieval.IVFIndex(keys.to(CUDA), 16, 2, seed=seed)
    assert syncs.where == [] or all("check_" in w for w in syncs.where), syncs.where
    torch.testing.assert_close(cuda.centres.cpu(), cpu.centres, atol=1e-5, rtol=1e-5)
    assert torch.equal(cuda.cell.cpu(), cpu.cell)
    found = cuda.search(queries.to(CUDA), 8)
    assert torch.equal(found.cpu(), cpu.search(queries, 8))


def test_the_stand_in_counts_each_kind_of_read_back():
    x = torch.randn(4, device=CUDA)
    with count_syncs() as syncs:
        y = (x * 2).sum()  # queued work: no sync
        torch.isnan(x).any()  # a tensor that stays on the device: no sync
    assert syncs.n == 0
    reads = [
        lambda: y.item(),
        lambda: bool(y > 0),
        lambda: float(y),
        lambda: int(y),
        lambda: x.tolist(),
        lambda: x.cpu(),
        lambda: x.to("cpu"),
        lambda: x[x > 0],
        lambda: x.nonzero(),
        lambda: torch.equal(x, x),
        lambda: f"{y:.3f}",
        lambda: repr(x),
    ]
    for read in reads:
        with count_syncs() as syncs:
            read()
        assert syncs.n == 1 and "test_host_syncs.py" in syncs.where[0], syncs.where
    with count_syncs() as syncs:
        x.to(torch.float64), x.to("cuda"), x[1:], x[torch.tensor([0, 2])]
    assert syncs.n == 0, syncs.where


def test_the_sorted_moe_dispatch_reads_its_counts_back_and_the_slots_do_not():
    """Why chapter 16 trains with fixed shapes: the sorted dispatch splits by counts that
    the host must read, once per MoE layer."""
    x = torch.randn(24, 8, device=CUDA)
    experts = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(4)).to(CUDA)
    weights, chosen = moe.top_k_gating(torch.randn(24, 4, device=CUDA), 2)
    cap = moe.expert_capacity(24, 4, 2, 1.25)
    with count_syncs() as syncs:
        moe.dispatch_slots(x, weights, chosen, experts, cap)
    assert syncs.n == 0, syncs.where
    keep = moe.capacity_mask(chosen, 4, cap)
    with count_syncs() as syncs:
        moe.dispatch_sorted(x, weights, chosen, keep, experts)
    assert syncs.n > 0 and all("dispatch_sorted" in w for w in syncs.where)


@pytest.mark.parametrize("kind", ["rnn", "attention", "transformer"])
def test_a_translation_step_reads_nothing_back(kind):
    """The batches keep the source lengths on the CPU (train.to_device leaves a Batch's
    host_fields), where packing reads them; the step's forward and backward wait for
    nothing."""
    from lecturelib.recurrence import attention, translation
    from lecturelib.transformers import transformer

    torch.manual_seed(0)
    sizes = dict(src_vocab_size=9, tgt_vocab_size=9, d_emb=8, d_model=8)
    if kind == "rnn":
        model = seq2seq.make_model(seq2seq.Seq2SeqConfig(**sizes))
    elif kind == "attention":
        model = attention.make_model(attention.AttentionConfig(**sizes))
    else:
        config = transformer.TransformerConfig(
            vocab_size=9, d_model=8, n_heads=2, n_layers=1, max_len=16
        )
        model = transformer.make_seq2seq(config, src_vocab_size=9)
    model = model.to(CUDA)
    src = torch.tensor([[1, 5, 6, 2, 0], [1, 7, 2, 0, 0]])
    tgt = torch.tensor([[1, 5, 6], [1, 7, 0]])
    batch = translation.Batch(src, torch.tensor([4, 3]), tgt, tgt.roll(-1, 1))
    moved = train.to_device(batch, CUDA)
    assert moved.src.device.type == "cuda" and moved.src_len.device.type == "cpu"
    with count_syncs() as syncs:
        seq2seq.loss(model, moved).backward()
    assert syncs.n == 0, syncs.where


def test_the_mlm_loss_reads_nothing_back_and_equals_the_cpus():
    """On an accelerator the MLM head runs at every position (a boolean index would read
    its size back); the loss equals the CPU's, which runs it at the selected ones."""
    model, (inputs,) = forward_bert()
    torch.manual_seed(0)
    targets = torch.where(torch.rand(inputs.shape) < 0.3, inputs.cpu(), bert.IGNORE)
    targets[0, 0] = inputs[0, 0].cpu()  # at least one selected position
    with count_syncs() as syncs:
        on_device = bert.mlm_loss(model, (inputs, targets.to(CUDA)))
        on_device.backward()
    assert syncs.n == 0, syncs.where
    on_cpu = bert.mlm_loss(model.cpu(), (inputs.cpu(), targets))
    torch.testing.assert_close(on_device.cpu(), on_cpu)


def test_bad_mlm_targets_on_the_device_are_still_refused():
    model, (inputs,) = forward_bert()
    for targets, message in [
        (torch.full(inputs.shape, bert.IGNORE), "the batch selects no position"),
        (torch.full(inputs.shape, 11), r"targets must be token ids in 0..10"),
    ]:
        with pytest.raises(RuntimeError, match=message):
            bert.mlm_loss(model, (inputs, targets.to(CUDA)))


def test_the_sft_loss_reads_nothing_back_and_equals_the_selected_mean():
    """The response-only loss with fixed shapes: ignored targets, not a boolean index."""
    torch.manual_seed(0)
    logits = torch.randn(2, 5, 7, requires_grad=True)
    targets = torch.randint(0, 7, (2, 5))
    mask = torch.tensor([[0, 0, 1, 1, 0], [0, 1, 1, 1, 1]], dtype=torch.bool)
    on_device = logits.detach().to(CUDA).requires_grad_()
    with count_syncs() as syncs:
        loss = chat.masked_loss(on_device, targets.to(CUDA), mask.to(CUDA))
        loss.backward()
    assert syncs.n == 0, syncs.where
    selected = F.cross_entropy(logits[mask], targets[mask])
    torch.testing.assert_close(loss.cpu(), selected)
    with pytest.raises(RuntimeError, match="mask marks no token"):
        chat.masked_loss(on_device, targets.to(CUDA), torch.zeros_like(mask).to(CUDA))


def test_a_classification_step_reads_nothing_back():
    """BERT fine-tuning: the padding mask's and the labels' checks run on the device."""
    model, (ids,) = forward_bert()
    lengths = torch.tensor([8, 5]).to(CUDA)
    with count_syncs() as syncs:
        bert.classify_loss(model, (ids, lengths, torch.tensor([0, 1]).to(CUDA))).backward()
    assert syncs.n == 0, syncs.where
    with pytest.raises(RuntimeError, match=r"labels must be class ids in 0\.\.1"):
        bert.classify_loss(model, (ids, lengths, torch.tensor([0, 2]).to(CUDA)))
    with pytest.raises(RuntimeError, match=r"integer lengths in 1\.\.8"):
        bert.classify_loss(model, (ids, torch.tensor([8, 0]).to(CUDA),
                                   torch.tensor([0, 1]).to(CUDA)))


@pytest.mark.parametrize("kind", ["window", "xl", "rmt"])
def test_segment_models_train_with_only_the_logging_reads(kind):
    """Transformer-XL's cache per segment checked its RoPE tables with torch.equal, a
    read-back per segment and step: now compared on the device, or not at all where the
    model's own tables cover the cache."""
    model = segment_memory.SegmentModel(kind, 4, 12, 16, 2, 2, n_memory=2).to(CUDA)
    with count_syncs() as syncs:
        segment_memory.train_recall(model, 2, 4, 3)
    assert syncs.n == 2, syncs.where  # one logging read per step (log_every=1)


def test_a_packed_sft_step_reads_nothing_back():
    """The segments' order check runs on the device (it read back once per step)."""
    from lecturelib.posttraining import instructions, sft

    torch.manual_seed(0)
    config = gpt.GPTConfig(vocab_size=len(chat.VOCAB), seq_len=64, d_model=16,
                           n_layers=1, n_heads=2)
    model = gpt.GPT(config).to(CUDA)
    examples = [chat.chat(p, a) for p, a in instructions.problems("add", 6, seed=0)]
    batch = tuple(t.to(CUDA) for t in chat.pack(examples, 64))
    with count_syncs() as syncs:
        sft.sft_loss(model, batch).backward()
    assert syncs.n == 0, syncs.where
    ids, targets, segments, mask = batch
    with pytest.raises(RuntimeError, match="segments must be non-decreasing"):
        model(ids, segments.flip(1))
