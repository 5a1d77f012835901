"""The worker handle's Protocol names exactly the methods `ModelWorker` offers (kept in step by this test)."""

import inspect

from mappa.cluster.handles import WorkerHandle
from mappa.cluster.model_worker import ModelWorker


def test_the_protocol_lists_every_public_method_of_the_worker():
    methods = {
        name for name, _ in inspect.getmembers(ModelWorker, inspect.isfunction) if not name.startswith("_")
    }
    assert set(WorkerHandle.__annotations__) == methods
