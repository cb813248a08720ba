"""Part IV. Efficiency: chapters 14–17.

- chapter 14, KV cache and attention variants: `kvcache` (with `served_model`, the model's
  own RoPE tables and the variants a cache can serve), `attention_variants` and `paged`;
- chapter 15, FlashAttention and efficient attention: `flash`, `flash_triton` (the Triton
  kernel, defined on first use by `flash_triton.triton_kernel`) and `linear_attention`;
- chapter 16, mixture of experts: `moe`;
- chapter 17, faster generation: `speculative` (with its n-gram draft,
  `ngram_draft`), `mtp` and `diffusion_lm`.
"""
