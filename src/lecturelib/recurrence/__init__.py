"""Part I. Recurrence: chapters 1–5.

- chapter 1, language models and word embeddings: ``lm``;
- chapter 2, recurrent networks: ``rnn``;
- chapter 3, LSTM and GRU: ``lstm_gru``;
- chapter 4, sequence-to-sequence models: ``translation`` (the data) and ``seq2seq``;
- chapter 5, attention: ``attention``.
"""
