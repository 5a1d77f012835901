"""Persistence: an fsspec store with atomic writes and an outage clock, the run layout with stage manifests,
typed data frames, checkpoints and the run's history. What a run shows people is `mappa.reporting`."""
