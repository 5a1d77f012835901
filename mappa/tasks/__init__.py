"""Prefect tasks: thin wrappers that call one stage function each and return its small manifest."""
