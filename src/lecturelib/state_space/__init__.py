"""Part VI. State-space models: chapters 19–20.

- chapter 19, state-space models: ``hippo`` and ``ssm``;
- chapter 20, Mamba and hybrids: ``scan``, ``mamba`` and ``hybrid``.
"""
