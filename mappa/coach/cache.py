"""Content-addressed coach answers, kept in the run folder so a coach is never asked the same thing twice.

The key of an answer is a SHA-256 over the coach model, the sampling settings that shape its answer
(temperature, max tokens, scoring mode), the prompt template's version and the rendered chat. One small
JSON file per answer under `{root}/{run_id}/coach-cache/{key[:2]}/{key}.json`, written the moment the
answer arrives (atomically, like every artifact), so a score stage killed half-way keeps what it paid for:
the resumed or repeated stage reads those answers back and sends only the rest. Answers that left their
action unscored (unparsable twice: a fallback) are stored like any other, but they are not final: the
coach that reads them back asks about that action again and stores the new answers over them
(`mappa.coach.base`).

Not covered: sharing answers between runs (each run has its own cache), eviction (answers are small:
a few hundred bytes each), or caching the expected-score mode's token probabilities (a local model's
probabilities are cheap to recompute and bill no one).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from mappa.storage.store import ArtifactStore

CACHE_FOLDER = "coach-cache"


class AnswerCache:
    """Answers of one coach (model + settings) in one run, addressed by template version and chat."""

    def __init__(self, store: ArtifactStore, run_id: str, model: str, settings: dict[str, Any]) -> None:
        self.store = store
        self.run_id = run_id
        self.model = model
        self.settings = dict(sorted(settings.items()))
        self.hits = 0
        self.writes = 0

    def key(self, template_version: str, messages: list[dict[str, str]]) -> str:
        blob = json.dumps([self.model, self.settings, template_version, messages], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()

    def _parts(self, key: str) -> tuple[str, ...]:
        return (self.run_id, CACHE_FOLDER, key[:2], f"{key}.json")

    def get(self, template_version: str, messages: list[dict[str, str]]) -> str | None:
        parts = self._parts(self.key(template_version, messages))
        if not self.store.exists(*parts):
            return None
        self.hits += 1
        return self.store.read_json(*parts)["answer"]

    def put(self, template_version: str, messages: list[dict[str, str]], answer: str) -> None:
        key = self.key(template_version, messages)
        record = {"model": self.model, "template_version": template_version, "answer": answer}
        self.store.write_json(record, *self._parts(key))
        self.writes += 1

    def stats(self) -> dict[str, int]:
        return {"hits": self.hits, "new_answers": self.writes}
