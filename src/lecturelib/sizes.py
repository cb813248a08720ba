"""Each chapter's sizes per profile: `lecturelib.setup(PROFILE, SEED, chapter=11)` reads
the chapter's row, and `table` shows a chapter's sizes as a table (the page shows it
under its setup line).

A profile trades time for quality: `smoke` proves the code runs (seconds), `cpu` is what
the book is built with (minutes on two cores), `gpu` is for a Colab GPU. Step counts are
capped further when `$LECTURELIB_STEPS_CAP` is set (CI's check of the gpu configuration).
"""

from __future__ import annotations

from typing import Any

# Chapter 1 reads every novel of the data sets in the cpu and gpu profiles.
ALL_BOOKS = [
    "alice",
    "pride-and-prejudice",
    "great-expectations",
    "sherlock-holmes",
    "war-and-peace",
    "moby-dick",
    "frankenstein",
    "tale-of-two-cities",
]

# A table: one entry per chapter, one line per profile (kept as written).
# fmt: off
SIZES: dict[int, dict[str, dict[str, Any]]] = {
    # 1. Language models and word embeddings
    1: {
        "smoke": dict(n_chars=200_000, kn_orders=[2, 5], contexts=[1, 4],
                      window_steps=150, d_hidden=128,
                      books=["alice"], d_embed=32, sgns_window=2, sgns_epochs=3.0),
        "cpu": dict(n_chars=None, kn_orders=[2, 3, 4, 5, 6, 7],
                    contexts=[1, 2, 4, 8, 16], window_steps=3000,
                    d_hidden=384, books=ALL_BOOKS, d_embed=100, sgns_window=3,
                    sgns_epochs=1.0),
        "gpu": dict(n_chars=None, kn_orders=[2, 3, 4, 5, 6, 7],
                    contexts=[1, 2, 4, 8, 16, 32], window_steps=10000,
                    d_hidden=512, books=ALL_BOOKS, d_embed=200, sgns_window=5,
                    sgns_epochs=4.0),
    },
    # 2. Recurrent networks and backpropagation through time
    2: {
        "smoke": dict(n_chars=100_000, lm_d_emb=16, lm_d_model=64, lm_batch=16,
                      lm_seq_len=32, lm_steps=25, lm_lr=3e-3, clip_d_model=32,
                      clip_steps=20, cls_d_model=16, cls_steps=15, cls_folds=2,
                      sample_len=80),
        "cpu": dict(n_chars=None, lm_d_emb=64, lm_d_model=256, lm_batch=32,
                    lm_seq_len=100, lm_steps=800, lm_lr=3e-3, clip_d_model=128,
                    clip_steps=300, cls_d_model=64, cls_steps=300, cls_folds=5,
                    sample_len=300),
        "gpu": dict(n_chars=None, lm_d_emb=64, lm_d_model=512, lm_batch=128,
                    lm_seq_len=100, lm_steps=2500, lm_lr=2e-3, clip_d_model=128,
                    clip_steps=300, cls_d_model=128, cls_steps=600, cls_folds=5,
                    sample_len=500),
    },
    # 3. LSTM and GRU
    3: {
        "smoke": dict(mem_lengths=[5, 10], mem_d_model=16, mem_batch=32, mem_lr=3e-2,
                      mem_max_steps=20, mem_round_steps=10, n_chars=100_000, lm_d_emb=16,
                      lm_d_model=64, lm_batch=16, lm_seq_len=32, lm_steps=25,
                      lm_lr_rnn=3e-3, lm_lr_lstm=1e-2, sample_len=80),
        "cpu": dict(mem_lengths=[10, 25, 50, 100], mem_d_model=32, mem_batch=128,
                    mem_lr=3e-2, mem_max_steps=1000, mem_round_steps=100, n_chars=None,
                    lm_d_emb=64, lm_d_model=256, lm_batch=32, lm_seq_len=100,
                    lm_steps=800, lm_lr_rnn=3e-3, lm_lr_lstm=1e-2,
                    sample_len=300),
        "gpu": dict(mem_lengths=[10, 25, 50, 100, 200], mem_d_model=32, mem_batch=256,
                    mem_lr=3e-2, mem_max_steps=2000, mem_round_steps=100, n_chars=None,
                    lm_d_emb=64, lm_d_model=512, lm_batch=128, lm_seq_len=100,
                    lm_steps=2500, lm_lr_rnn=2e-3, lm_lr_lstm=5e-3,
                    sample_len=500),
    },
    # 4. Sequence-to-sequence models
    4: {
        "smoke": dict(max_len=12, n_words=1000, n_train=3000, n_test=300, d_emb=32,
                      d_model=32, batch_size=32, steps=40, lr=5e-3),
        "cpu": dict(max_len=12, n_words=1000, n_train=None, n_test=4000, d_emb=128,
                    d_model=128, batch_size=64, steps=800, lr=5e-3),
        "gpu": dict(max_len=16, n_words=2000, n_train=None, n_test=4000, d_emb=256,
                    d_model=256, batch_size=128, steps=6000, lr=3e-3),
    },
    # 6. Self-attention
    6: {
        "smoke": dict(n_trials=200, d_ks=[4, 16, 64, 256], d_model=32, steps=30,
                      batch_size=32, n_test=200, lengths=[32, 64, 128, 256]),
        "cpu": dict(n_trials=1000, d_ks=[1, 4, 16, 64, 256, 1024], d_model=64, steps=600,
                    batch_size=64, n_test=2000,
                    lengths=[32, 64, 128, 256, 512, 1024, 2048, 4096]),
        "gpu": dict(n_trials=2000, d_ks=[1, 4, 16, 64, 256, 1024, 4096], d_model=128,
                    steps=2000, batch_size=256, n_test=2000,
                    lengths=[64, 128, 256, 512, 1024, 2048, 4096, 8192]),
    },
    # 7. Positions
    7: {
        "smoke": dict(seq_len=16, d_model=32, n_heads=4, n_layers=2, max_distance=8,
                      batch_size=8, steps=15, lr=3e-3, n_eval_windows=32),
        "cpu": dict(seq_len=32, d_model=64, n_heads=4, n_layers=2, max_distance=16,
                    batch_size=32, steps=500, lr=3e-3, n_eval_windows=128),
        "gpu": dict(seq_len=128, d_model=128, n_heads=4, n_layers=4, max_distance=64,
                    batch_size=64, steps=3000, lr=2e-3, n_eval_windows=128),
    },
    # 8. The Transformer
    8: {
        "smoke": dict(grad_layers=6, ln_d_model=32, ln_layers=3, ln_steps=12, ln_lr=3e-3,
                      max_len=12, n_words=1000, n_train=3000, n_test=300, d_emb=32,
                      d_model=32, batch_size=32, steps=40, lr=5e-3,
                      tf_d_model=32, tf_heads=4, tf_layers=1, tf_lr=3e-3, vit_steps=20,
                      fractions=(0.3, 1.0)),
        "cpu": dict(grad_layers=24, ln_d_model=64, ln_layers=12, ln_steps=120, ln_lr=3e-3,
                    max_len=12, n_words=1000, n_train=None, n_test=4000, d_emb=128,
                    d_model=128, batch_size=64, steps=800, lr=5e-3,
                    tf_d_model=128, tf_heads=8, tf_layers=2, tf_lr=3e-3, vit_steps=250,
                    fractions=(0.1, 0.25, 0.5, 1.0)),
        "gpu": dict(grad_layers=32, ln_d_model=64, ln_layers=12, ln_steps=400, ln_lr=3e-3,
                    max_len=16, n_words=2000, n_train=None, n_test=4000, d_emb=256,
                    d_model=256, batch_size=128, steps=6000, lr=3e-3,
                    tf_d_model=256, tf_heads=8, tf_layers=3, tf_lr=1e-3, vit_steps=1000,
                    fractions=(0.05, 0.1, 0.25, 0.5, 1.0)),
    },
    # 9. Tokenization
    9: {
        "smoke": dict(n_chars=100_000, vocab_size=512, n_held_out=20_000,
                      check_chars=20_000, check_merges=40, plain_merges=3,
                      curve=[256, 320, 384, 448, 512], line_vocab_size=300,
                      n_round_trips=100, n_pairs=300, sub_chars=20_000, sub_vocab=300),
        "cpu": dict(n_chars=1_000_000, vocab_size=4096, n_held_out=200_000,
                    check_chars=50_000, check_merges=200, plain_merges=20,
                    curve=[256, 512, 1024, 2048, 4096], line_vocab_size=512,
                    n_round_trips=1000, n_pairs=3000, sub_chars=100_000, sub_vocab=1024),
        "gpu": dict(n_chars=2_000_000, vocab_size=8192, n_held_out=400_000,
                    check_chars=100_000, check_merges=300, plain_merges=20,
                    curve=[256, 512, 1024, 2048, 4096, 8192], line_vocab_size=768,
                    n_round_trips=3000, n_pairs=10000, sub_chars=200_000, sub_vocab=2048),
    },
    # 10. Decoding
    10: {
        "smoke": dict(books=["alice"], min_count=3, d_model=32, steps=30, batch=16,
                      seq_len=20, lr=1e-2, n_eval_prompts=8, n_new=12,
                      n_eval_beam_prompts=4, beam_sizes=[1, 2, 4], max_sentence=12,
                      n_eval_draws=5000, n_eval_trees=50),
        "cpu": dict(books=["pride-and-prejudice", "sherlock-holmes"], min_count=5,
                    d_model=192, steps=400, batch=32, seq_len=35, lr=5e-3,
                    n_eval_prompts=40, n_new=40, n_eval_beam_prompts=20,
                    beam_sizes=[1, 2, 4, 8, 16], max_sentence=30, n_eval_draws=20000,
                    n_eval_trees=200),
        "gpu": dict(books=["pride-and-prejudice", "sherlock-holmes", "great-expectations",
                           "tale-of-two-cities"], min_count=5, d_model=512, steps=3000,
                    batch=64, seq_len=35, lr=3e-3, n_eval_prompts=100, n_new=60,
                    n_eval_beam_prompts=40, beam_sizes=[1, 2, 4, 8, 16, 32],
                    max_sentence=30, n_eval_draws=100000, n_eval_trees=500),
    },
    # 11. Pretraining a GPT
    11: {
        "smoke": dict(eval_tokens=2048, gpt_evals=5, compare_at_eval=1,
                      scale_widths=[8, 16, 24, 32, 48],
                      scale_predict=64, scale_steps=10, scale_batch=8, probe_sentences=200,
                      n_sample=100),
        "cpu": dict(eval_tokens=16384, gpt_evals=18, compare_at_eval=1,
                    scale_widths=[16, 24, 32, 48, 64], scale_predict=96, scale_steps=100,
                    scale_batch=16, probe_sentences=1000, n_sample=300),
        "gpu": dict(eval_tokens=None, gpt_evals=20, compare_at_eval=4,
                    scale_widths=[64, 96, 128, 192, 256],
                    scale_predict=384, scale_steps=1500, scale_batch=64,
                    probe_sentences=3000,
                    n_sample=800),
    },
    # 12. BERT and finetuning
    12: {
        "smoke": dict(bpe_vocab=300, n_layers=1, mlm_steps=20, mlm_batch=16,
                      budgets=[10, 20, 40, 80], seeds=2, ft_steps=3, n_test=100,
                      gpt_train=32, gpt_test=50, gpt_steps=3, gpt_batch=8),
        "cpu": dict(bpe_vocab=4096, n_layers=1, mlm_steps=500, mlm_batch=128,
                    budgets=[50, 100, 300, 1000], seeds=4, ft_steps=150, n_test=1000,
                    gpt_train=1000, gpt_test=500, gpt_steps=60, gpt_batch=32),
        "gpu": dict(bpe_vocab=4096, n_layers=4, mlm_steps=6000, mlm_batch=256,
                    budgets=[50, 100, 300, 1000], seeds=5, ft_steps=150, n_test=1000,
                    gpt_train=2000, gpt_test=1000, gpt_steps=400, gpt_batch=32),
    },
    # 13. Parameter-efficient finetuning, quantization and interpretability
    13: {
        "smoke": dict(ft_steps=4, ft_batch=4, eval_tokens=1024, calib_windows=8,
                      n_sample=60, n_virtual=4),
        "cpu": dict(ft_steps=200, ft_batch=8, eval_tokens=8192, calib_windows=64,
                    n_sample=240, n_virtual=8),
        "gpu": dict(ft_steps=400, ft_batch=32, eval_tokens=None, calib_windows=128,
                    n_sample=400, n_virtual=16),
    },
    # 14. KV cache and attention variants for inference
    14: {
        "smoke": dict(n_new=48, variant_model=dict(d_model=32, n_layers=2, n_heads=4),
                      variant_steps=15, variant_batch=8, eval_tokens=2048),
        "cpu": dict(n_new=512, variant_model=dict(d_model=64, n_layers=2, n_heads=4),
                    variant_steps=300, variant_batch=16, eval_tokens=16384),
        "gpu": dict(n_new=1024, variant_model=dict(d_model=128, n_layers=4, n_heads=8),
                    variant_steps=2000, variant_batch=64, eval_tokens=None),
    },
    # 15. FlashAttention and efficient attention
    15: {
        "smoke": dict(lengths=[128, 256, 512], naive_max=512, repeats=1, n_items=16,
                      recall_steps=20, recall_batch=32, cost_len=512),
        "cpu": dict(lengths=[256, 512, 1024, 2048], naive_max=2048, repeats=2, n_items=64,
                    recall_steps=200, recall_batch=64, cost_len=2048),
        "gpu": dict(lengths=[256, 512, 1024, 2048, 4096], naive_max=4096, repeats=3,
                    n_items=128, recall_steps=600, recall_batch=64, cost_len=4096),
    },
    # 16. Mixture of experts
    16: {
        "smoke": dict(d_model=32, n_layers=2, n_heads=2, seq_len=32,
                      n_experts=4, top_k=2, batch_size=8, steps=12, lr=3e-3,
                      warmup_steps=2, evals=3, eval_tokens=2048, loop_tokens=12,
                      time_tokens=64),
        "cpu": dict(d_model=64, n_layers=2, n_heads=4, seq_len=64,
                    n_experts=8, top_k=2, batch_size=32, steps=250, lr=3e-3,
                    warmup_steps=20, evals=5, eval_tokens=16384, loop_tokens=48,
                    time_tokens=512),
        "gpu": dict(d_model=256, n_layers=4, n_heads=4, seq_len=256,
                    n_experts=8, top_k=2, batch_size=64, steps=2000, lr=2e-3,
                    warmup_steps=100, evals=10, eval_tokens=None, loop_tokens=64,
                    time_tokens=512),
    },
    # 17. Faster generation
    17: {
        "smoke": dict(batches=[1, 4], tps_new=8, chi_draws=2000, draft_steps=10,
                      drafts={"1 layer, d 16": (1, 16)}, Ks=[1, 2], n_prompts=1,
                      prompt_len=8, n_new=12, mtp_heads=3, mtp_steps=10, mtp_batch=8,
                      eval_tokens=2048, iaf_steps=30, iaf_batch=128, diff_len=4,
                      diff_steps=20, diff_batch=32, diff_d=32, diff_test=100,
                      unmask_steps=[1, 2, 4]),
        "cpu": dict(batches=[1, 2, 4, 8, 16, 32, 64], tps_new=32, chi_draws=10000,
                    draft_steps=300, drafts={"1 layer, d 32": (1, 32),
                                             "2 layers, d 48": (2, 48)},
                    Ks=[1, 2, 3, 4, 6], n_prompts=3, prompt_len=16, n_new=40,
                    mtp_heads=4, mtp_steps=150, mtp_batch=32, eval_tokens=16384,
                    iaf_steps=600, iaf_batch=256, diff_len=4, diff_steps=600,
                    diff_batch=64, diff_d=64, diff_test=500, unmask_steps=[1, 2, 3, 4]),
        "gpu": dict(batches=[1, 2, 4, 8, 16, 32, 64, 128], tps_new=64, chi_draws=40000,
                    draft_steps=800, drafts={"1 layer, d 64": (1, 64),
                                             "2 layers, d 128": (2, 128)},
                    Ks=[1, 2, 3, 4, 6, 8], n_prompts=5, prompt_len=32, n_new=128,
                    mtp_heads=4, mtp_steps=400, mtp_batch=32, eval_tokens=32768,
                    iaf_steps=1500, iaf_batch=512, diff_len=6, diff_steps=2000,
                    diff_batch=64, diff_d=64, diff_test=1000, unmask_steps=[1, 2, 3, 6]),
    },
    # 18. Extending the context
    18: {
        "smoke": dict(train_len=16, d_model=32, n_layers=2, n_heads=2, steps=40, batch=16,
                      finetune_steps=4, finetune_batch=4, eval_windows=4, segment=16,
                      xl_tokens=129, long_tokens=40, long_batch=2, budgets=[8, 16],
                      n_sinks=2, memory_tokens=512, n_cells=8, recall_segment=8,
                      recall_segments=4, recall_d=32, recall_steps=8, recall_batch=16,
                      recall_eval=200, pk_len=14, pk_steps=10, pk_batch=16,
                      pk_windows=[1, 4], pk_eval=16, pk_top=4),
        "cpu": dict(train_len=32, d_model=64, n_layers=2, n_heads=2, steps=400, batch=32,
                    finetune_steps=40, finetune_batch=8, eval_windows=32, segment=32,
                    xl_tokens=1025, long_tokens=256, long_batch=8, budgets=[8, 16, 32],
                    n_sinks=4, memory_tokens=4096, n_cells=32, recall_segment=16,
                    recall_segments=4, recall_d=64, recall_steps=250, recall_batch=64,
                    recall_eval=2000, pk_len=14, pk_steps=300, pk_batch=64,
                    pk_windows=[1, 4, 8, 16, 32], pk_eval=64, pk_top=4),
        "gpu": dict(train_len=64, d_model=128, n_layers=4, n_heads=4, steps=1500, batch=64,
                    finetune_steps=200, finetune_batch=16, eval_windows=64, segment=128,
                    xl_tokens=4097, long_tokens=1024, long_batch=16, budgets=[32, 64, 128],
                    n_sinks=4, memory_tokens=16384, n_cells=64, recall_segment=32,
                    recall_segments=4, recall_d=64, recall_steps=800, recall_batch=64,
                    recall_eval=4000, pk_len=30, pk_steps=1500, pk_batch=64,
                    pk_windows=[1, 4, 8, 16, 32], pk_eval=128, pk_top=8),
    },
    # 19. State-space models
    19: {
        "smoke": dict(hippo_L=400, fft_L=512, lengths=[4, 8], steps=10, batch=16,
                      d_model=16, n_eval=64, time_lengths=[64, 256], time_repeats=1),
        "cpu": dict(hippo_L=2000, fft_L=4096, lengths=[8, 16, 32], steps=250, batch=16,
                    d_model=32, n_eval=256, time_lengths=[256, 1024, 2048],
                    time_repeats=3),
        "gpu": dict(hippo_L=4000, fft_L=16384, lengths=[16, 64, 256], steps=2000,
                    batch=32, d_model=64, n_eval=1024,
                    time_lengths=[256, 1024, 4096, 16384], time_repeats=5),
    },
    # 20. Mamba and hybrids
    20: {
        "smoke": dict(scan_lengths=[32, 64], lm_steps=3, lm_batch=8, lm_seq=32,
                      task_steps=3, task_batch=8, task_len=8, n_pairs=3, test_n=50,
                      cost_lengths=[32, 64]),
        "cpu": dict(scan_lengths=[64, 128, 256], lm_steps=120, lm_batch=16, lm_seq=64,
                    task_steps=500, task_batch=32, task_len=16, n_pairs=4, test_n=500,
                    cost_lengths=[64, 256, 1024]),
        "gpu": dict(scan_lengths=[64, 128, 256, 512], lm_steps=1500, lm_batch=32,
                    lm_seq=128, task_steps=1500, task_batch=64, task_len=32, n_pairs=8,
                    test_n=2000, cost_lengths=[64, 256, 1024, 4096]),
    },
    # 21. From a language model to an assistant
    21: {
        "smoke": dict(n_eval=4, n_eval_icl=4, shots=[0, 1], n_eval_pairs=4, dpo_steps=2,
                      dpo_batch=4, dpo_lr=1e-5, dpo_beta=0.5, dpo_every=1, grpo_steps=2,
                      hack_steps=2, grpo_prompts=2, group=4, grpo_lr=1e-4, grpo_every=1,
                      n_eval_pass=2, pass_samples=4, gpt2_pairs=8, gpt2_steps=2,
                      gpt2_batch=2, gpt2_lr=5e-5, gpt2_eval=2, rm_steps=2, rm_lr=3e-4),
        "cpu": dict(n_eval=48, n_eval_icl=48, shots=[0, 1, 2, 3], n_eval_pairs=64,
                    dpo_steps=30, dpo_batch=32, dpo_lr=1e-5, dpo_beta=0.5, dpo_every=5,
                    grpo_steps=30, hack_steps=25, grpo_prompts=8, group=8, grpo_lr=1e-4,
                    grpo_every=5, n_eval_pass=32, pass_samples=16, gpt2_pairs=100,
                    gpt2_steps=12, gpt2_batch=4, gpt2_lr=5e-5, gpt2_eval=8, rm_steps=30,
                    rm_lr=3e-4),
        "gpu": dict(n_eval=200, n_eval_icl=200, shots=[0, 1, 2, 3, 4], n_eval_pairs=256,
                    dpo_steps=100, dpo_batch=64, dpo_lr=1e-5, dpo_beta=0.5, dpo_every=10,
                    grpo_steps=60, hack_steps=60, grpo_prompts=16, group=16,
                    grpo_lr=1e-4, grpo_every=10, n_eval_pass=200, pass_samples=32,
                    gpt2_pairs=2000, gpt2_steps=300, gpt2_batch=16, gpt2_lr=5e-5, gpt2_eval=50,
                    rm_steps=60, rm_lr=3e-4),
    },
}
# fmt: on
SIZES[5] = SIZES[4]  # chapter 5's models train on chapter 4's data, at its sizes


def chapter_sizes(chapter: int) -> dict[str, dict[str, Any]]:
    """Chapter `chapter`'s sizes, per profile."""
    if not isinstance(chapter, int) or isinstance(chapter, bool):
        raise TypeError(
            f"chapter must be an int, a chapter number; got {type(chapter).__name__} "
            f"{chapter!r}"
        )
    if chapter not in SIZES:
        raise ValueError(
            f"chapter must be a chapter number, one of 1..{max(SIZES)}; got "
            f"{type(chapter).__name__} {chapter!r}"
        )
    return SIZES[chapter]


def table(chapter: int):
    """Chapter `chapter`'s sizes as a table: one row per size, one column per profile."""
    import pandas as pd

    rows = chapter_sizes(chapter)
    return pd.DataFrame(
        {p: {k: _show(v) for k, v in rows[p].items()} for p in ("smoke", "cpu", "gpu")}
    ).rename_axis("size")


def _show(value) -> str:
    if value is None:
        return "all"
    if value is ALL_BOOKS:
        return "all novels"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1000:
        return f"{value:,}"
    return str(value)
