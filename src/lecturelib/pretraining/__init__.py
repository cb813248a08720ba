"""Part III. Pretraining: chapters 11–13.

- chapter 11, pretraining a GPT: `gpt` and `pretrain` (the book's cached GPT);
- chapter 12, BERT and finetuning: `bert`, `finetune` and `t5`;
- chapter 13, parameter-efficient finetuning, quantization and interpretability: `peft`,
  `quant` and `interpret`.

The argument checks of the code the chapters show are public `check_*` functions beside
it in each module (`gpt.check_gpt` and `gpt.check_gpt_ids` serve the whole part), so
that a chapter copies the algorithm and the library still refuses bad input.
"""
