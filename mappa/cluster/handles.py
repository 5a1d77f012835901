"""The type of a worker handle as the stages use it: a Ray actor handle of `ModelWorker`, or a `RankGroup`
that fans the same calls out to an agent's ranks. Each method is called as `worker.<method>.remote(...)`
and returns a Ray object reference (await it, or `ray.get` it).

Static typing only: Ray handles are not subclasses of anything here; this Protocol names the methods a
stage may call, so a misspelt one is caught by a type checker and a reader sees the interface in one place.
"""

from __future__ import annotations

from typing import Any, Protocol


class RemoteMethod(Protocol):
    def remote(self, *args: Any, **kwargs: Any) -> Any: ...


class WorkerHandle(Protocol):
    """`mappa.cluster.model_worker.ModelWorker`'s methods, called remotely."""

    ready: RemoteMethod
    reset: RemoteMethod
    chat: RemoteMethod
    chat_next_token_logprobs: RemoteMethod
    chat_grouped_next_token_logprobs: RemoteMethod
    chat_grouped_answer_features: RemoteMethod
    answer_direction: RemoteMethod
    logprobs: RemoteMethod
    release_memory: RemoteMethod
    train: RemoteMethod
    save_checkpoint: RemoteMethod
    load_checkpoint: RemoteMethod
    weights_checksum: RemoteMethod
