"""Part I. Recurrence: chapters 1–5.

- chapter 1, language models and word embeddings: `lm` and `word2vec`;
- chapter 2, recurrent networks: `rnn` and `gradients` (vanishing and exploding);
- chapter 3, LSTM and GRU: `lstm_gru`;
- chapter 4, sequence-to-sequence models: `corpus` (sentence pairs tokenized, filtered
  and split), `translation` (ids and batches), `seq2seq` and `bleu` (BLEU and BLEU
  by source length);
- chapter 5, attention: `attention`.
"""
