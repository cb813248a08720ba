"""Part III. Pretraining: chapters 11–13.

- chapter 11, pretraining a GPT: ``gpt`` and ``pretrain`` (the book's cached GPT);
- chapter 12, BERT and finetuning: ``bert``, ``finetune`` and ``t5``;
- chapter 13, parameter-efficient finetuning, quantization and interpretability: ``peft``,
  ``quant`` and ``interpret``.
"""
