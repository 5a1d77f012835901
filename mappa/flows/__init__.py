"""Prefect flows: `train` (iterations of rollout -> score -> advantages -> update) and run summaries."""
