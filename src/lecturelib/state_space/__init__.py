"""Part VI. State-space models: chapters 19–20.

- chapter 19, state-space models: `hippo`, `ssm` (discretisation, recurrence and
  convolution) and `s4d` (the S4D layer and network);
- chapter 20, Mamba and hybrids: `scan`, `mamba` and `hybrid`.
"""
