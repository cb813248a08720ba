"""The library's GPU path without a GPU (issue 29): each chapter's public entry points,
called as the chapters call them with ``device=run.device`` or with a model moved to cuda,
run "on a T4" through the CUDA stand-in (tests/cuda_standin.py). The stand-in raises where
CUDA would (a cuda tensor meeting a CPU one, a CPU generator driving a cuda op, ``.numpy()``
of a cuda tensor), so each test passing means the code keeps its tensors on the model's
device; results are checked to be on cuda and, where the CPU run is cheap, equal to it. On a machine
with a real CUDA device every test runs there instead (marked ``gpu``), and the stand-in's
case skips.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from cuda_standin import cuda_standin, is_cuda, real_cuda
from lecturelib import tasks, train
from lecturelib.efficiency import diffusion_lm, attention_variants, kvcache, linear_attention
from lecturelib.efficiency import moe, mtp, paged, speculative
from lecturelib.efficiency.ngram_draft import NGramDraft
from lecturelib.long_context import eviction, segment_memory, retrieval, rope_scaling
from lecturelib.pretraining import bert, finetune, gpt, peft, pretrain, quant
from lecturelib.recurrence import attention, gradients, lm, lstm_gru, rnn, seq2seq
from lecturelib.recurrence import word2vec
from lecturelib.state_space import hippo, hybrid, mamba, s4d, scan, ssm
from lecturelib.transformers import decoding, sampling
from test_compose import CACHED_REFUSES, VARIANTS, plain, tokens
from translation_helpers import toy_corpus

CUDA = torch.device("cuda")
REAL_CUDA = real_cuda()  # a real device (the stand-in is not asked)
TOL = dict(atol=1e-5, rtol=1e-5)


@pytest.fixture(
    autouse=True, params=["t4-standin", pytest.param("cuda", marks=pytest.mark.gpu)]
)
def _on_a_gpu(request):
    """Every test on the stand-in's T4 on a machine without a CUDA device (whatever
    torch's build), and on the real device (marked ``gpu``) on a machine with one."""
    if request.param == "cuda":
        if not REAL_CUDA:
            pytest.skip("needs a CUDA device")
        yield
        return
    if REAL_CUDA:
        pytest.skip(
            "a real CUDA device is here: the test runs on it (its cuda case, marked "
            "gpu), not on the stand-in"
        )
    with cuda_standin():
        yield


def on_cuda(*xs) -> bool:
    return all(is_cuda(x) or (REAL_CUDA and x.device.type == "cuda") for x in xs)


def cpu_and_cuda(build):
    """The same model twice: on the CPU and moved to cuda."""
    torch.manual_seed(0)
    model = build()
    twin = build()
    twin.load_state_dict(model.state_dict())
    return model.eval(), twin.to(CUDA).eval()


# Chapter 14: the KV cache on every model variant -----------------------------------------


@pytest.mark.parametrize("name", VARIANTS)
def test_every_variant_runs_on_cuda_and_its_cache_gives_its_logits(name):
    model, ids = VARIANTS[name]().to(CUDA), tokens(12).to(CUDA)
    logits = model(ids)
    assert on_cuda(logits)
    if name in CACHED_REFUSES:
        return
    torch.testing.assert_close(kvcache.recompute_logits(model, ids), logits, **TOL)
    out, steps, _ = kvcache.generate(model, ids[:, :4], 5)
    assert on_cuda(out, steps) and out.shape == (2, 9)
    cached = kvcache.generate(model, ids[:, :4], 5)[0]
    assert torch.equal(
        cached, kvcache.generate(model, ids[:, :4], 5, use_cache=False)[0]
    )


@pytest.mark.parametrize("attention", ["gqa", "mla"])
def test_cache_gpt_trains_and_decodes_on_cuda(attention):
    torch.manual_seed(0)
    config = attention_variants.CacheGPTConfig(
        13,
        seq_len=24,
        d_model=16,
        n_layers=2,
        n_heads=4,
        attention=attention,
        n_kv_heads=2,
    )
    model = attention_variants.CacheGPT(config).to(CUDA)
    x = tokens(10).to(CUDA)
    loss = attention_variants.loss(model, (x[:, :-1], x[:, 1:]))
    loss.backward()
    assert on_cuda(loss) and all(on_cuda(p.grad) for p in model.parameters())
    cache = model.new_cache(2, 10)
    assert all(on_cuda(t) for layer in cache.layers for t in layer.values())
    assert on_cuda(model(x, cache))


def test_kvcache_rope_and_attention_follow_their_inputs():
    rope = kvcache.Rope(8, 16)
    x = torch.randn(2, 3, 5, 8, device=CUDA)
    assert on_cuda(rope(x, 2))
    q, k = torch.randn(1, 4, 3, 8, device=CUDA), torch.randn(1, 2, 7, 8, device=CUDA)
    ref = kvcache.attend_reference(q, k, k, 4)
    torch.testing.assert_close(kvcache.attend(q, k, k, 4), ref, **TOL)
    assert on_cuda(ref)


def test_paged_attention_on_cuda_equals_contiguous():
    config = paged.PagedConfig(
        capacity=32, block_size=4, n_kv_heads=2, d_head=8, device=CUDA
    )
    cache = paged.PagedKVCache(config)
    g = torch.Generator("cuda").manual_seed(0)
    keys = torch.randn(2, 2, 9, 8, device=CUDA, generator=g)
    cache.add_sequence(0)
    for t in range(6):
        cache.append(0, keys[0, :, t], keys[1, :, t])
    cache.fork(0, 1)
    for t in range(6, 9):
        cache.append(1, keys[0, :, t], keys[1, :, t])
    q = torch.randn(4, 8, device=CUDA, generator=g)
    out = paged.paged_attention(q, cache, 1)
    assert on_cuda(cache.k, out)
    torch.testing.assert_close(out, paged.contiguous_attention(q, keys[0], keys[1]))


# Chapter 17: faster generation -----------------------------------------------------------


def test_speculative_decoding_on_cuda_with_cpu_and_cuda_generators():
    target, draft = plain(0).to(CUDA), plain(1).to(CUDA)
    prompt = tokens(4, b=1).to(CUDA)
    greedy = kvcache.generate(target, prompt, 6)[0]
    ids, _ = speculative.speculative_generate(
        target, draft, prompt, 6, 3, temperature=0
    )
    assert torch.equal(ids.to(CUDA), greedy)
    draws = {}
    for where in ("cpu", "cuda"):
        g = torch.Generator(where).manual_seed(0)
        ids, stats = speculative.speculative_generate(
            target, draft, prompt, 6, 3, generator=g
        )
        draws[where] = ids.cpu()
        ref, _ = speculative.autoregressive_generate(target, prompt, 6, generator=g)
        assert ids.shape == ref.shape == (1, 10)
    # sampling on the generator's device: a CPU generator draws as on a CPU-only machine
    target.cpu(), draft.cpu()
    g = torch.Generator().manual_seed(0)
    ids, _ = speculative.speculative_generate(
        target, draft, prompt.cpu(), 6, 3, generator=g
    )
    assert torch.equal(ids, draws["cpu"])


def test_speculative_decoding_with_an_ngram_draft_on_cuda():
    target = plain(0).to(CUDA)
    draft = NGramDraft(tokens(200, b=1)[0], 3, 13)
    prompt = tokens(4, b=1).to(CUDA)
    g = torch.Generator().manual_seed(0)
    ids, stats = speculative.speculative_generate(
        target, draft, prompt, 6, 2, generator=g
    )
    assert ids.shape == (1, 10) and stats["target_calls"] >= 1
    greedy = kvcache.generate(target, prompt, 6)[0]
    ids, _ = speculative.speculative_generate(
        target, draft, prompt, 6, 2, temperature=0
    )
    assert torch.equal(ids.to(CUDA), greedy)


def test_multi_token_prediction_on_cuda():
    trunk = gpt.GPT(
        gpt.GPTConfig(vocab_size=7, seq_len=24, d_model=16, n_layers=2, n_heads=2)
    )
    heads = mtp.MTPHeads(trunk, 3).to(CUDA)
    ids = torch.randint(0, 7, (100,)).to(CUDA)
    x, y = ids[:-1].view(3, 33)[:, :24], ids[1:].view(3, 33)[:, :24]
    loss = mtp.mtp_loss(heads, (x, y))
    loss.backward()
    assert on_cuda(loss)
    acc = mtp.head_accuracy(heads, ids, 8)
    assert len(acc) == 3
    out, stats = mtp.self_speculative_generate(heads.eval(), x[:1, :4], 6)
    ref, _ = mtp.greedy_generate(trunk, x[:1, :4], 6)
    assert torch.equal(out.to(CUDA), ref)


# Chapter 16: mixture of experts ----------------------------------------------------------


@pytest.mark.parametrize("capacity_factor", [None, 1.0])
def test_moe_gpt_trains_on_cuda(capacity_factor):
    config = gpt.GPTConfig(vocab_size=13, seq_len=16, d_model=16, n_layers=2, n_heads=2)
    layer = moe.MoEConfig(16, 32, n_experts=4, top_k=2, capacity_factor=capacity_factor)
    torch.manual_seed(0)
    model = moe.MoEGPT(config, layer).to(CUDA)
    x = tokens(12).to(CUDA)
    loss = moe.moe_lm_loss(model, (x[:, :-1], x[:, 1:]))
    loss.backward()
    assert on_cuda(loss, model.aux_loss())


@pytest.mark.parametrize("k", [1, 2])
def test_moe_dispatches_on_cuda(k):
    torch.manual_seed(0)
    layer = moe.MoE(
        moe.MoEConfig(d_model=8, d_ff=16, n_experts=4, top_k=k, capacity_factor=1.0)
    ).to(CUDA)
    x = torch.randn(2, 6, 8, device=CUDA)
    assert on_cuda(layer(x))
    logits = torch.randn(12, 4, device=CUDA)
    weights, experts = moe.top_k_gating(logits, k)
    keep = moe.capacity_mask(experts, 4, moe.expert_capacity(12, 4, k, 1.0))
    assert on_cuda(weights, experts, keep)
    assert on_cuda(moe.load_balancing_loss(logits, experts), moe.router_z_loss(logits))


# Chapter 18: long context ----------------------------------------------------------------


def long_model(seq_len=16) -> gpt.GPT:
    torch.manual_seed(0)
    return gpt.GPT(
        gpt.GPTConfig(vocab_size=11, seq_len=seq_len, d_model=16, n_layers=2, n_heads=2)
    ).eval()


@pytest.mark.parametrize("method", ["none", "pi", "ntk", "yarn"])
def test_rope_scaling_extends_a_cuda_model(method):
    model = long_model(8).to(CUDA)
    longer = rope_scaling.extend(model, 16, method)
    ids = torch.randint(0, 11, (2, 16), device=CUDA)
    assert on_cuda(longer(ids), *longer.buffers())
    losses = rope_scaling.loss_by_position(longer, torch.randint(0, 11, (64,)), 16)
    assert len(losses) == 16


@pytest.mark.parametrize("memory", [False, True])
def test_segment_losses_on_cuda(memory):
    model = long_model().to(CUDA)
    ids = torch.randint(0, 11, (2, 33), device=CUDA)
    assert on_cuda(segment_memory.segment_losses(model, ids, 8, memory))


@pytest.mark.parametrize("kind", segment_memory.KINDS)
def test_segment_models_train_and_score_on_cuda(kind):
    model = segment_memory.SegmentModel(kind, 4, 12, 16, 2, 2, n_memory=2).to(CUDA)
    seen = []
    hook = model.register_forward_hook(lambda m, i, out: seen.append(out.dtype))
    losses = segment_memory.train_recall(model, 3, 4, 3)
    hook.remove()
    assert len(losses) == 3 and set(seen) == {torch.float16}  # fp16 autocast, as on a T4
    x, answer, distance = segment_memory.recall_task(16, 3, 4, vocab_size=12)
    assert len(segment_memory.recall_accuracy(model, x, answer, distance)) == 3


@pytest.mark.parametrize("policy", ["full", "window", "sinks", "h2o", "knn"])
def test_eviction_streams_on_cuda(policy):
    model = long_model(64).to(CUDA)
    ids = torch.randint(0, 11, (2, 20), device=CUDA)
    losses, last = eviction.stream(model, ids, policy, 8, n_sinks=2, attention=True)
    assert on_cuda(losses, *last) and losses.shape == (2, 19)


def test_eviction_keep_and_retrieve_follow_their_inputs():
    scores = torch.rand(2, 2, 10, device=CUDA)
    for policy in ("full", "window", "sinks", "h2o"):
        assert on_cuda(eviction.keep(policy, scores, 6, 2, 2))
    q, k = torch.randn(1, 2, 1, 4, device=CUDA), torch.randn(1, 2, 9, 4, device=CUDA)
    assert on_cuda(
        eviction.retrieve(q, k, 2, 3), eviction.retrieve(q, k[:, :, :3], 2, 3)
    )


def test_retrieval_memory_on_cuda():
    model = long_model(8).to(CUDA)
    ids = torch.randint(0, 11, (2, 32), device=CUDA)
    plain_logits = retrieval.memory_logits(model, ids)
    assert on_cuda(plain_logits)
    exact = retrieval.memory_logits(model, ids, top=4)
    probed = retrieval.memory_logits(model, ids, top=4, n_cells=4, n_probe=4)
    torch.testing.assert_close(probed, exact, **TOL)
    keys = torch.randn(40, 8, device=CUDA)
    index = retrieval.IVFIndex(keys, 4, 2)
    q = torch.randn(3, 8, device=CUDA)
    assert on_cuda(index.search(q, 2), index.scanned(q))
    assert on_cuda(retrieval.knn_attention(q, keys, keys, 3, index))


# Chapter 13: parameter-efficient fine-tuning and quantization ----------------------------


def test_lora_on_a_cuda_model_trains_its_adapters_and_merges():
    model = peft.add_lora(plain().to(CUDA), r=2)
    lora = model.blocks[0].attn.qkv
    assert on_cuda(lora.A, lora.B, lora.rows)
    ids = tokens(10).to(CUDA)
    F.cross_entropy(model(ids).flatten(0, 1), ids.flatten()).backward()
    assert on_cuda(lora.A.grad, lora.B.grad)
    with torch.no_grad():
        lora.B.normal_()
    before = model(ids)
    merged = peft.merge_lora(model)
    torch.testing.assert_close(merged(ids), before, atol=1e-4, rtol=1e-4)


def test_a_lora_linear_is_made_on_its_layers_device():
    base = torch.nn.Linear(6, 6).to(CUDA)
    layer = peft.LoRALinear(base, 2, 4.0, rows=[[0, 1], [4, 5]])
    assert on_cuda(layer.A, layer.B, layer.rows, layer(torch.randn(3, 6, device=CUDA)))
    assert on_cuda(layer.delta_weight(), layer.merged().weight)


@pytest.mark.parametrize("method", ["adapters", "prompt", "prefix"])
def test_other_peft_methods_on_cuda(method):
    model = plain().to(CUDA)
    init = torch.tensor([1, 2, 3], device=CUDA)
    tuned = {
        "adapters": lambda: peft.add_adapters(model, 4),
        "prompt": lambda: peft.PromptTuned(model, init),
        "prefix": lambda: peft.PrefixTuned(model, init),
    }[method]()
    ids = tokens(10).to(CUDA)
    out = tuned(ids)
    F.cross_entropy(out.flatten(0, 1), ids.flatten()).backward()
    assert on_cuda(out)


@pytest.mark.parametrize("method", ["rtn", "gptq"])
@pytest.mark.parametrize("bits", [4, 16])
def test_quantize_a_cuda_model(method, bits):
    model, twin = cpu_and_cuda(plain)
    calib = tokens(16, b=4)
    q = quant.quantize_model(twin, bits, 8, method, calib.to(CUDA))
    assert all(on_cuda(p) for p in q.parameters())
    ref = quant.quantize_model(model, bits, 8, method, calib)
    torch.testing.assert_close(q(tokens(8).to(CUDA)).cpu(), ref(tokens(8)), **TOL)


def test_gptq_follows_its_inputs(monkeypatch):
    w, x = torch.randn(6, 8, device=CUDA), torch.randn(32, 8, device=CUDA)
    factored = []
    cholesky = torch.linalg.cholesky
    monkeypatch.setattr(torch.linalg, "cholesky",
                        lambda a, **kw: factored.append(a.dtype) or cholesky(a, **kw))
    h = quant.hessian(x)
    assert on_cuda(quant.gptq(w, h, 4, 4), quant.fake_quantize(w, 4, 4))
    # float32 on the device, as GPTQ's reference code (a GPU's float64 is slow)
    assert h.dtype == torch.float32 and set(factored) == {torch.float32}


# Chapter 12: fine-tuning a GPT -----------------------------------------------------------


def test_extend_vocab_and_classifier_on_cuda():
    model = plain().to(CUDA)
    g = torch.Generator().manual_seed(0)
    bigger = finetune.extend_vocab(model, 3, generator=g)
    assert all(on_cuda(p) for p in bigger.parameters())
    clf = finetune.GPTClassifier(bigger, 2).to(CUDA)
    ids, lengths = tokens(10).to(CUDA), torch.tensor([10, 6])
    labels = torch.tensor([0, 1], device=CUDA)
    loss = finetune.classifier_loss(clf, (ids, lengths, labels), lm_weight=0.5)
    loss.backward()
    assert on_cuda(loss)


# Chapters 19-20: state-space models and hybrids ------------------------------------------


@pytest.mark.parametrize("kind", hybrid.KINDS)
def test_every_family_trains_and_scores_on_cuda(kind):
    torch.manual_seed(0)
    model = hybrid.build(
        kind, 12, d_model=16, n_layers=2, seq_len=16, d_state=4, n_heads=2
    ).to(CUDA)
    x, y = tasks.copy_task(8, 6, vocab_size=8)
    seen = []
    hook = model.register_forward_hook(lambda m, i, out: seen.append(out.dtype))
    losses, seconds = hybrid.train_task(model, lambda step: (x, y), 3)
    hook.remove()
    assert len(losses) == 3 and seconds > 0
    assert set(seen) == {torch.float16}  # trained in fp16 with a gradient scaler
    acc = hybrid.accuracy(model, x, y)  # CPU batches, as the tasks make them
    assert 0 <= acc <= 1 and acc == hybrid.accuracy(model, x.to(CUDA), y.to(CUDA))
    assert hybrid.state_bytes(model, 16) > 0


@pytest.mark.parametrize("scan_method", ["loop", "parallel", "chunked"])
def test_mamba_generates_on_cuda(scan_method):
    torch.manual_seed(0)
    config = mamba.MambaConfig(
        d_model=16, n_layers=2, vocab_size=11, d_state=4, scan=scan_method
    )
    model = mamba.MambaLM(config).to(CUDA)
    prompt = torch.randint(0, 11, (2, 5), device=CUDA)
    out = mamba.generate(model, prompt, 4)
    assert on_cuda(out) and out.shape == (2, 9)
    logits = model(out)  # the parallel forward agrees with the steps
    assert torch.equal(logits[:, 4:-1].argmax(-1), out[:, 5:])


def test_scans_follow_their_inputs():
    g = torch.Generator("cuda").manual_seed(0)
    b, t, d, n = 2, 37, 3, 4
    u, delta = (
        torch.randn(b, t, d, device=CUDA, generator=g),
        torch.rand(b, t, d, device=CUDA, generator=g),
    )
    A = -torch.rand(d, n, device=CUDA, generator=g)
    B, C = (
        torch.randn(b, t, n, device=CUDA, generator=g),
        torch.randn(b, t, n, device=CUDA, generator=g),
    )
    ref = scan.selective_scan_ref(u, delta, A, B, C)
    for method in ("loop", "parallel", "chunked"):
        out = scan.selective_scan(u, delta, A, B, C, method=method)
        assert on_cuda(out)
        torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)
    a, x = (
        torch.rand(b, t, d, n, device=CUDA, generator=g),
        torch.randn(b, t, d, n, device=CUDA, generator=g),
    )
    h = scan.linear_scan_loop(a, x)
    for fn in (scan.linear_scan_parallel, scan.linear_scan_chunked):
        torch.testing.assert_close(fn(a, x), h, atol=1e-4, rtol=1e-4)


def test_s4d_convolution_and_recurrence_agree_on_cuda():
    torch.manual_seed(0)
    layer = s4d.S4D(s4d.S4DConfig(d_model=4, d_state=8)).to(CUDA)
    u = torch.randn(2, 20, 4, device=CUDA)
    y = layer(u)
    assert on_cuda(y, layer.kernel(20))
    torch.testing.assert_close(layer.recurrent(u), y, atol=1e-4, rtol=1e-4)
    config = s4d.S4DNetConfig(d_out=5, d_model=8, n_layers=2, d_state=8, vocab_size=7)
    net = s4d.S4DNet(config).to(CUDA)
    assert on_cuda(net(torch.randint(0, 7, (2, 12), device=CUDA)))


def test_ssm_functions_follow_their_inputs():
    A, B = hippo.legs_matrices(4)
    A, B = A.to(CUDA), B.to(CUDA)
    for discretize in (ssm.discretize_zoh, ssm.discretize_bilinear):
        Abar, Bbar = discretize(A, B, 0.1)
        assert on_cuda(Abar, Bbar)
    C = torch.randn(4, dtype=torch.float64, device=CUDA)
    x = torch.randn(2, 16, dtype=torch.float64, device=CUDA)
    K = ssm.ssm_kernel(Abar, Bbar, C, 16)
    y = ssm.ssm_recurrent(Abar, Bbar, C, x)
    for method in ("fft", "direct"):
        torch.testing.assert_close(ssm.ssm_convolve(x, K, method=method), y)
    c = hippo.legs_scan(torch.randn(20, device=CUDA), 4)  # (L, N)
    s = torch.linspace(0, 1, 5, device=CUDA)
    assert on_cuda(c, hippo.legs_reconstruct(c[-1], s))


# Chapters 1-5: recurrent networks --------------------------------------------------------


def test_char_models_train_sample_and_score_on_cuda():
    ids = torch.randint(0, 9, (400,))
    for model in (rnn.CharRNN(9, 8, 16), lstm_gru.CharLSTM(9, 8, 16)):
        model = model.to(CUDA)
        tb = rnn.TruncatedBPTT(ids, batch_size=4, seq_len=10)
        train.fit(model, tb.batch, tb.loss, steps=3, progress=False)
        assert rnn.stream_nll(model, ids, 4, 20) > 0
        for where in ("cpu", "cuda"):
            g = torch.Generator(where).manual_seed(0)
            out = rnn.sample(model, ids[:5], 6, generator=g)
            assert len(out) == 11
        step = decoding.RecurrentStep(model.eval(), batch_dim=-2)
        assert decoding.greedy(step, ids[None, :3], 4).shape == (1, 7)


def test_classifier_and_window_lm_on_cuda():
    x, mask = rnn.pad_sequences([torch.tensor([1, 2, 3]), torch.tensor([4, 5])], 0)
    config = rnn.ClassifierConfig(vocab_size=10, d_emb=4, d_model=6, n_classes=3)
    for how in ("last", "mean", "max"):
        clf = rnn.RNNClassifier(config, pooling=how).to(CUDA)
        assert on_cuda(clf(x.to(CUDA), mask.to(CUDA)))
    window = lm.WindowLM(9, 3, 8, 16).to(CUDA)
    xw, yw = lm.context_windows(torch.randint(0, 9, (50,)), 3)
    loss = F.cross_entropy(window(xw.to(CUDA)), yw.to(CUDA))
    assert on_cuda(loss)


def test_lstm_gru_cells_run_on_cuda():
    for module in (
        torch.nn.LSTM(3, 5, batch_first=True),
        torch.nn.GRU(3, 5, batch_first=True),
    ):
        ours = lstm_gru.from_torch(module).to(CUDA)
        x = torch.randn(2, 7, 3, device=CUDA)
        out, _ = ours(x)
        torch.testing.assert_close(out, module.to(CUDA)(x)[0], **TOL)
        cell = ours.cells[0]
        assert all(on_cuda(v) for v in lstm_gru.trace_gates(cell, x).values())


def test_elman_gradients_on_cuda():
    elman = rnn.ElmanRNN(3, 4).to(CUDA)
    x = torch.randn(2, 6, 3, device=CUDA)
    out, h = elman(x)
    assert on_cuda(out, h)
    cell = elman.cells[0]
    assert on_cuda(gradients.jacobian_norms(cell, x[0]))
    grads = [torch.randn(3, 3, device=CUDA), torch.randn(4, device=CUDA)]
    assert gradients.clip_grad_norm(grads, 1.0) > 0


@pytest.mark.parametrize("attention_kind", [None, "additive", "bilinear"])
def test_translators_train_translate_and_evaluate_on_cuda(attention_kind):
    corpus = toy_corpus()
    v = len(corpus.src_vocab)
    if attention_kind is None:
        config = seq2seq.Seq2SeqConfig(
            src_vocab_size=v, tgt_vocab_size=v, d_emb=8, d_model=8
        )
        model = seq2seq.make_model(config)
    else:
        config = attention.AttentionConfig(
            src_vocab_size=v, tgt_vocab_size=v, d_emb=8, d_model=8, score=attention_kind
        )
        model = attention.make_model(config)
    model = model.to(CUDA)
    hist = seq2seq.train_translator(
        model, corpus, steps=3, lr=1e-2, batch_size=8, seed=0, desc="test"
    )
    assert len(hist.train_loss) == 3 and hist.evals["loss"]
    report = seq2seq.evaluate(model, corpus, corpus.test[:4], max_len=6)
    assert len(report.hypotheses) == 4


def test_word2vec_on_cuda():
    ids = torch.randint(0, 20, (300,))
    pairs = word2vec.skipgram_pairs(ids, 2)
    noise = word2vec.noise_distribution(torch.bincount(ids, minlength=20).float())
    model = word2vec.SkipGram(20, 8).to(CUDA)
    center, context = pairs[:16, 0].to(CUDA), pairs[:16, 1].to(CUDA)
    negatives = torch.multinomial(noise, 16 * 3, replacement=True).view(16, 3).to(CUDA)
    loss = model(center, context, negatives)
    loss.backward()
    assert on_cuda(loss)
    assert len(word2vec.nearest(model.center.weight.detach(), 3, 2)) == 2


# Chapter 10: decoding and sampling from a model on cuda ----------------------------------


def gpt_step():
    """A small GPT on cuda and its step (prefixes on cuda → logits on cuda)."""
    return plain().to(CUDA).step


def test_search_and_sampling_run_a_cuda_step():
    step = gpt_step()
    prompt = tokens(3, b=1).to(CUDA)
    greedy = decoding.greedy(step, prompt, 5, eos=0)
    assert on_cuda(greedy)
    best = decoding.beam_search(step, prompt[0], 3, 4, eos=0)[0]
    assert decoding.exhaustive_search(step, prompt[0, :2], 2, limit=10_000)
    assert len(best.tokens) <= 4
    assert on_cuda(decoding.sequence_logprobs(step, greedy, 3))
    processed = decoding.pipe(
        step,
        lambda z: sampling.temperature(z, 0.8),
        lambda z: sampling.top_k(z, 5),
        lambda z: sampling.top_p(z, 0.9),
    )
    draws = {}
    for where in ("cpu", "cuda"):
        g = torch.Generator(where).manual_seed(0)
        draws[where] = sampling.sample(processed, prompt, 6, generator=g)
        assert on_cuda(draws[where])
    # a CPU generator draws what it draws on a CPU-only machine
    cpu_step = plain().step
    ids = sampling.sample(
        decoding.pipe(
            cpu_step,
            lambda z: sampling.temperature(z, 0.8),
            lambda z: sampling.top_k(z, 5),
            lambda z: sampling.top_p(z, 0.9),
        ),
        prompt.cpu(),
        6,
        generator=torch.Generator().manual_seed(0),
    )
    assert torch.equal(ids, draws["cpu"].cpu())


def test_contrastive_and_constrained_steps_on_cuda():
    strong, weak = gpt_step(), plain(1).to(CUDA).step
    prompt = tokens(3, b=2).to(CUDA)
    assert on_cuda(decoding.greedy(sampling.contrastive_step(strong, weak), prompt, 3))
    chars = [str(i) for i in range(12)] + ["</s>"]
    rule = sampling.regex_allowed(r"[0-9]+", chars, eos=12, n_prompt=3)
    out = decoding.greedy(sampling.constrain(strong, rule), prompt, 3, eos=12)
    assert on_cuda(out) and (out[:, 3:] <= 12).all()


def test_multinomial_draws_on_the_generators_device():
    probs = torch.tensor([[0.1, 0.2, 0.7], [0.5, 0.5, 0.0]], device=CUDA)
    for where in ("cpu", "cuda"):
        g = torch.Generator(where).manual_seed(0)
        out = sampling.multinomial(probs, 2, g)
        assert on_cuda(out) and out.shape == (2, 2) and (out[1] < 2).all()
    a = sampling.multinomial(probs.cpu(), 2, torch.Generator().manual_seed(1))
    b = sampling.multinomial(probs, 2, torch.Generator().manual_seed(1))
    assert torch.equal(a, b.cpu())


@pytest.mark.parametrize(
    "call, error, message",
    [
        (
            lambda: sampling.multinomial([0.5, 0.5]),
            TypeError,
            r"probs must be a float tensor \(v,\) or \(b, v\); got list",
        ),
        (
            lambda: sampling.multinomial(torch.ones(2, 2, 2)),
            ValueError,
            r"probs must be a float tensor \(v,\) or \(b, v\); got torch.float32",
        ),
        (
            lambda: sampling.multinomial(torch.ones(2), 0),
            ValueError,
            r"n must be an int",
        ),
        (
            lambda: sampling.multinomial(torch.ones(2), 1, 0),
            TypeError,
            r"generator must be a torch.Generator or None; got int 0",
        ),
    ],
)
def test_multinomial_refuses_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()


# Training: the fit loop on a T4 (fp16 autocast + GradScaler), checkpoints, pretraining ---


OPTIMIZERS = {
    "adamw": lambda m: torch.optim.AdamW(m.parameters(), lr=3e-3),
    "adamw-fused": lambda m: train.adamw(m, 3e-3),
    "sgd": lambda m: torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9),
    "muon+adamw": lambda m: train.optim.muon_adamw(m, 3e-3),
}


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_fit_trains_in_fp16_with_a_grad_scaler_for_each_optimizer(name, tmp_path):
    torch.manual_seed(0)
    model = gpt.GPT(
        gpt.GPTConfig(vocab_size=7, seq_len=16, d_model=16, n_layers=2, n_heads=2)
    ).to(CUDA)
    ids = torch.arange(400) % 7
    batches = gpt.windows(ids, 8, 16)
    precision = train.Precision(CUDA)
    assert precision.dtype == torch.float16 and precision.scaler is not None
    seen = []

    def loss_fn(net, batch):
        logits = net(batch[0])
        seen.append(logits.dtype)
        return F.cross_entropy(logits.float().flatten(0, 1), batch[1].flatten())

    hist = train.fit(
        model,
        batches,
        loss_fn,
        steps=40,
        optimizer=OPTIMIZERS[name](model),
        clip=1.0,
        progress=False,
        checkpointing=train.Checkpointing(tmp_path / "ckpt.pt"),
    )
    assert set(seen) == {torch.float16}
    assert hist.train_loss[-1] < 0.7 * hist.train_loss[0]
    assert all(on_cuda(p) for p in model.parameters())
    state = train.checkpoint.load(tmp_path / "ckpt.pt", map_location=CUDA)
    assert on_cuda(state["model"]["embed.weight"]) and state["precision"]["scale"] > 0


def test_fit_resumes_a_cuda_run_exactly(tmp_path):
    def run(steps, ckpt=None, resume=False):
        torch.manual_seed(0)
        model = torch.nn.Sequential(
            torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)
        ).to(CUDA)

        def batch(step):
            g = torch.Generator().manual_seed(step)
            x = torch.randn(16, 3, generator=g)
            return x, x.sum(1, keepdim=True)

        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        keep = train.Checkpointing(ckpt, resume=resume) if ckpt else None
        train.fit(
            model,
            batch,
            lambda m, b: F.mse_loss(m(b[0]).float(), b[1]),
            steps=steps,
            optimizer=opt,
            progress=False,
            checkpointing=keep,
        )
        return model

    straight = run(8)
    run(5, tmp_path / "c.pt")
    resumed = run(8, tmp_path / "c.pt", resume=True)
    for p, q in zip(straight.parameters(), resumed.parameters()):
        assert torch.equal(p, q)


def test_pretrained_trains_on_the_given_device_and_says_so(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("LECTURELIB_CACHE", str(tmp_path))
    monkeypatch.setitem(
        pretrain.RECIPES, "smoke", pretrain.with_steps(pretrain.RECIPES["smoke"], 3)
    )
    text = "abcdefgh" * 400
    vocab = lm.Vocab(text)
    ids = vocab.encode(text)
    monkeypatch.setattr(
        pretrain, "shakespeare", lambda: (vocab, ids[:3000], ids[3000:])
    )
    where = []
    train_gpt = pretrain.train_gpt

    def spy(*args, **kwargs):
        model, hist = train_gpt(*args, **kwargs)
        where.append(next(model.parameters()).device.type)
        return model, hist

    monkeypatch.setattr(pretrain, "train_gpt", spy)
    model, _ = pretrain.pretrained("smoke", CUDA, progress=False)
    said = capsys.readouterr().out
    assert where == ["cuda"] and all(on_cuda(p) for p in model.parameters())
    assert "No cached smoke GPT" in said and "pretraining it on cuda" in said
    assert "3 steps" in said and "about" in said
    again, _ = pretrain.pretrained("smoke", CUDA, progress=False)  # loaded: no training
    assert where == ["cuda"] and capsys.readouterr().out == ""
    assert all(on_cuda(p) for p in again.parameters())


# Chapters 12, 15, 17: BERT, efficient attention, diffusion LMs ---------------------------


def test_bert_masks_and_trains_on_cuda():
    specials = bert.Specials(10)
    model = bert.BERT(
        bert.BERTConfig(
            vocab_size=specials.vocab_size,
            max_len=16,
            d_model=16,
            n_heads=2,
            n_layers=2,
        )
    ).to(CUDA)
    ids = torch.randint(0, 10, (4, 12), device=CUDA)
    for where in ("cpu", "cuda"):
        g = torch.Generator(where).manual_seed(0)
        inputs, targets = bert.mask_tokens(ids, specials, p=0.5, generator=g)
        assert on_cuda(inputs, targets)
    cpu_masks = bert.mask_tokens(
        ids.cpu(), specials, p=0.5, generator=torch.Generator().manual_seed(0)
    )
    again = bert.mask_tokens(
        ids, specials, p=0.5, generator=torch.Generator().manual_seed(0)
    )
    assert torch.equal(cpu_masks[0], again[0].cpu())
    loss = bert.mlm_loss(model, (inputs, targets))
    loss.backward()
    assert on_cuda(loss)
    lengths, labels = torch.tensor([12, 5, 7, 9]), torch.tensor([0, 1, 1, 0])
    assert on_cuda(bert.classify_loss(model, (ids, lengths.to(CUDA), labels.to(CUDA))))
    assert 0 <= bert.accuracy(model, ids.cpu(), lengths, labels) <= 1


@pytest.mark.parametrize("variant", linear_attention.VARIANTS)
def test_recall_models_on_cuda(variant):
    model = linear_attention.RecallModel(
        variant, 8, 12, 5, d_model=16, window=4, n_features=8, rank=4
    ).to(CUDA)
    items, query, answer = linear_attention.recall_batch(6, 8, 12, 5)
    loss = F.cross_entropy(model(items.to(CUDA), query.to(CUDA)), answer.to(CUDA))
    loss.backward()
    assert on_cuda(loss)


def test_linear_attention_functions_follow_their_inputs():
    q, k, v = (torch.randn(2, 10, 8, device=CUDA) for _ in range(3))
    causal = linear_attention.linear_attention(q, k, v, causal=True)
    torch.testing.assert_close(
        causal,
        linear_attention.linear_attention_recurrent(q, k, v),
        atol=1e-4,
        rtol=1e-4,
    )
    w = linear_attention.random_features(8, 16).to(CUDA)
    e = torch.randn(4, 10, device=CUDA)
    assert on_cuda(
        linear_attention.performer_attention(q, k, v, w, causal=True),
        linear_attention.linformer_attention(q, k, v, e),
    )


def test_diffusion_lm_on_cuda():
    specials_v = 12
    model = bert.BERT(
        bert.BERTConfig(
            vocab_size=specials_v, max_len=16, d_model=16, n_heads=2, n_layers=1
        )
    ).to(CUDA)
    prompt, answer = diffusion_lm.sorting_pairs(4, 5, vocab_size=10)
    batch = (prompt.to(CUDA), answer.to(CUDA))
    g = torch.Generator().manual_seed(0)
    assert on_cuda(diffusion_lm.diffusion_loss(model, batch, generator=g))
    out, history = diffusion_lm.unmask(
        model, prompt.to(CUDA), 5, 3, order="random", generator=g
    )
    assert on_cuda(out, *history)


# fp16: what float16 overflows or rounds away (issue 29's audit) --------------------------


def rel_err(a, ref) -> float:
    a, ref = a.double().cpu(), ref.double().cpu()
    return ((a - ref).norm() / ref.norm()).item()


AUTOCASTS = {
    "cpu": (torch.device("cpu"), lambda: torch.autocast("cpu", dtype=torch.float16)),
    "cuda": (CUDA, lambda: torch.autocast("cuda")),  # a T4's: float16, CUDA's op lists
}


@pytest.mark.parametrize("where", AUTOCASTS)
@pytest.mark.parametrize("causal", [False, True])
def test_performer_attention_does_not_overflow_under_autocast(where, causal):
    device, autocast = AUTOCASTS[where]
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 1024, 16, generator=g) for _ in range(3))
    w = linear_attention.random_features(16, 32)
    ref = linear_attention.performer_attention(3 * q, 3 * k, v, w, causal)
    q, k, v, w = (x.to(device) for x in (q, k, v, w))
    with autocast():  # the features' running sums passed 65504: inf, then nan
        out = linear_attention.performer_attention(3 * q, 3 * k, v, w, causal)
    assert torch.isfinite(out).all() and rel_err(out, ref) < 1e-3


@pytest.mark.parametrize("fn", ["causal", "recurrent"])
def test_linear_attention_sums_in_float32_for_float16_inputs(fn):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 1024, 16, generator=g) for _ in range(3))
    k = 100 * k  # features near 100: their running sums pass float16's 65504
    run = {
        "causal": lambda *x: linear_attention.linear_attention(*x, causal=True),
        "recurrent": linear_attention.linear_attention_recurrent,
    }[fn]
    out = run(q.half(), k.half(), v.half())  # was nan
    assert out.dtype == torch.float16 and rel_err(out, run(q, k, v)) < 1e-3


@pytest.mark.parametrize("method", ["ref", *scan.SCANS])
def test_the_selective_scan_keeps_a_float32_state_for_float16_inputs(method):
    g = torch.Generator().manual_seed(0)
    t, d, n = 2048, 4, 4
    u, B, C = (torch.randn(1, t, k, generator=g) for k in (d, n, n))
    delta = torch.full((1, t, d), 1e-3)  # slow decays: float16 rounds e^-0.001 to 0.999
    A = -torch.linspace(0.5, 1, n).repeat(d, 1)

    def run(*x):
        if method == "ref":
            return scan.selective_scan_ref(*x)
        return scan.selective_scan(*x, method=method)

    out = run(*(x.half() for x in (u, delta, A, B, C)))  # was 6.9% off
    assert out.dtype == torch.float16
    assert rel_err(out, run(u, delta, A, B, C)) < 2e-3


def test_mamba_trains_under_fp16_autocast_as_in_fp32():
    torch.manual_seed(0)
    config = mamba.MambaConfig(d_model=16, n_layers=2, vocab_size=11, d_state=4)
    model = mamba.MambaLM(config)
    ids = torch.randint(0, 11, (2, 256))
    ref = model(ids)
    model.to(CUDA)
    with torch.autocast("cuda"):
        out = model(ids.to(CUDA))
    assert rel_err(out, ref) < 5e-3


def test_top_p_sums_probabilities_in_float32():
    g = torch.Generator().manual_seed(0)
    logits = (torch.randn(4, 50_000, generator=g) * 3).half()
    kept16 = ~sampling.top_p(logits, 0.9).isinf()
    kept32 = ~sampling.top_p(logits.float(), 0.9).isinf()  # was 42 tokens apart
    assert torch.equal(kept16, kept32)


def test_ssm_convolve_of_float16_input_is_not_a_float16_fft():
    g = torch.Generator().manual_seed(0)
    x, K = torch.randn(2, 8, 300, generator=g), torch.randn(8, 300, generator=g) / 10
    ref = ssm.ssm_convolve(x, K)
    with pytest.raises(RuntimeError, match="powers of two"):  # what a T4 says
        torch.fft.rfft(x.half().to(CUDA), n=600)
    out = ssm.ssm_convolve(x.half().to(CUDA), K.to(CUDA))
    assert on_cuda(out) and rel_err(out, ref) < 1e-3
