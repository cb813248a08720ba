"""Part VII. Post-training: chapter 21.

- chapter 21, from a language model to an assistant: ``weights`` (GPT-2's weights in the
  book's GPT), ``instruct`` (the chat vocabulary and template, the instruction mix and its
  exact checkers, the masked SFT loss, packing, the chapter's base and SFT models),
  ``preference`` (Bradley–Terry and DPO), ``rl`` (REINFORCE, PPO's clipped surrogate and
  GRPO) and ``evaluation`` (pass@k).

The argument checks of the code the chapter shows are public ``check_*`` functions beside
it in each module.
"""
