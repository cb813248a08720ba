"""Part V. Long context: chapter 18.

- chapter 18, extending the context: `segment_memory` (segment recurrence and memory tokens),
  `retrieval` (kNN attention, the IVF index, a kNN memory), `rope_scaling` and
  `eviction`.
"""
