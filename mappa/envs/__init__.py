"""Envs: the plug-in contract an env is written to (`spec.py`, found by `registry.py`), the one module env
authors import (`api.py`) and what every env may use (`episode.py`, `code_seat.py`, `feedback.py`,
`corruption.py`, `overlap.py`, `outcome_summary.py`). The built-in envs are packages beside it, written as a
user's plug-in is: `mathchat/` and `dsbench/`."""
