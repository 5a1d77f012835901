"""Agents: a seat's role and a handle to its policy; parsing tool calls out of agent text."""
