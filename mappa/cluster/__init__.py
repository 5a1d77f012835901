"""Ray: a local or joined cluster and one long-lived model worker per agent (and the local coach)."""
