"""Part VII. Post-training: chapter 21.

- chapter 21, from a language model to an assistant: `weights` (GPT-2's weights in the
  book's GPT), `gpt2_sft` (instruction tuning of the real GPT-2), `chat` (the chat
  vocabulary and template, the masked loss, packing, response log-probabilities and
  decoding), `padded_cache` (the KV cache of its batched, left-padded decoding),
  `instructions` (the instruction mix, its exact checkers and the base model's raw
  corpus), `sft` (the SFT loss, the recipes and the chapter's base and SFT models),
  `preference` (Bradley–Terry and DPO), `rl` (REINFORCE, PPO's clipped surrogate and
  GRPO's loss), `rollout` (sampling groups of responses and the GRPO step) and
  `evaluation` (pass@k).

The argument checks of the code the chapter shows are public `check_*` functions beside
it in each module.
"""
