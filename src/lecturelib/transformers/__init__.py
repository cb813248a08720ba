"""Part II. Transformers: chapters 6–10.

- chapter 6, self-attention: `self_attention`;
- chapter 7, positions: `positions` and `positional_lm`;
- chapter 8, the Transformer: `transformer` and `vit` (the Vision Transformer);
- chapter 9, tokenization: `bpe` (byte-level BPE), `wordpiece` and `unigram`
  (Unigram, and SentencePiece's words);
- chapter 10, decoding: `decoding`, `sampling` and `degeneration` (repeated
  n-grams).
"""
