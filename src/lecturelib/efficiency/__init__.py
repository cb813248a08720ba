"""Part IV. Efficiency: chapters 14–17.

- chapter 14, KV cache and attention variants: ``kvcache``, ``kvattention`` and ``paged``;
- chapter 15, FlashAttention and efficient attention: ``flash``, ``flash_triton`` (the Triton
  kernels, imported only to run them) and ``linear_attention``;
- chapter 16, mixture of experts: ``moe``;
- chapter 17, faster generation: ``speculative``, ``mtp`` and ``diffusion_lm``.
"""
