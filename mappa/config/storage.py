"""Where a run's artifacts go, and how long a run waits for an artifact store that stops answering (left out
of the config hash: `run.OPERATIONAL_FIELDS`)."""

from __future__ import annotations

from pydantic import Field, field_validator

from mappa.config.section import Section

OUTAGE_BUDGET_S = 600.0
"""`storage.outage_budget_s`'s default, also what a store opened without a config waits (a Ray worker's)."""


class StorageConfig(Section):
    """Where artifacts go: `<root>/<run id>/...` (docs/architecture.md, "Artifacts")."""

    root: str = "runs"
    """A local folder or an fsspec URL such as s3://bucket/prefix."""
    outage_budget_s: float = Field(OUTAGE_BUDGET_S, ge=0)
    """How long a remote root's endpoint may refuse connections, time out or answer 500/502/503/504 before
    the run stops (per outage: every read and write waits on the same clock, tries again 1 s, 2 s, 4 s ...
    at most 30 s apart, and logs one line per wait). An S3-compatible server's restart takes seconds, a
    rescheduled pod or a network partition a few minutes: the default (10 minutes) rides those out with
    the run's workers idle, while a store gone for good stops the run in one line naming the endpoint.
    Nothing half-written is trusted either way (a stage's manifest is written last), so `mappa resume`
    continues from the finished stages. 0: stop at the first failure that outlasts botocore's own
    retries (about 5-10 s; AWS_MAX_ATTEMPTS). A local root does not wait (docs/outages.md)."""

    @field_validator("root")
    @classmethod
    def _no_credentials_in_url(cls, root: str) -> str:
        if "://" in root and "@" in root.split("://", 1)[1].split("/", 1)[0]:
            raise ValueError(
                "credentials in the URL would be stored with the run; give the bare URL "
                "(s3://bucket/prefix) and put credentials in the environment (AWS_ACCESS_KEY_ID, "
                "AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL)"
            )
        return root
