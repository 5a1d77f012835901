"""A two-agent code team (Coder -> Reviewer) as a mappa env plug-in: `env.type: codepair` (`env.py`)."""
