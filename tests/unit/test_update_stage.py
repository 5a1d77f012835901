"""What the update stage tells a user whose update ran the machine out of memory."""

from types import SimpleNamespace

from mappa.core.types import Experience
from mappa.stages.update import out_of_memory_hint


def experience(prompt: list[int], response: list[int]) -> Experience:
    zeros = (0.0,) * len(response)
    return Experience(
        "t/0", "analyst", tuple(prompt), tuple(response), zeros, zeros, zeros, zeros, zeros, zeros, 0.0
    )


def test_out_of_memory_hint_names_the_agent_the_sizes_and_the_ways_out():
    run = SimpleNamespace(run_id="ds1", config=SimpleNamespace(trainer=SimpleNamespace(micro_batch_size=4)))
    rows = [experience([1] * 1200, [2] * 256), experience([1] * 10, [2])]
    hint = out_of_memory_hint(run, "analyst", rows)
    assert "`analyst`" in hint and "micro-batches of 4" in hint and "longest 1456 tokens" in hint
    assert "mappa resume ds1" in hint and "trainer.micro_batch_size" in hint
