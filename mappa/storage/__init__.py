"""Artifacts: an fsspec store with atomic writes, the run layout with stage manifests, data frames."""
