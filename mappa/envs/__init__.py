"""Envs: multi-agent topologies (MathChat), their data sets, grading, and the rollout stage."""
