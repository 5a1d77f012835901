"""What the update stage tells a user whose update ran the machine out of memory."""

from types import SimpleNamespace

import pandas as pd

from mappa.stages.update import out_of_memory_hint


def test_out_of_memory_hint_names_the_agent_the_sizes_and_the_ways_out():
    run = SimpleNamespace(run_id="ds1", config=SimpleNamespace(trainer=SimpleNamespace(micro_batch_size=4)))
    rows = pd.DataFrame({"prompt_token_ids": [[1] * 1200, [1] * 10], "response_token_ids": [[2] * 256, [2]]})
    hint = out_of_memory_hint(run, "analyst", rows)
    assert "`analyst`" in hint and "micro-batches of 4" in hint and "longest 1456 tokens" in hint
    assert "mappa resume ds1" in hint and "trainer.micro_batch_size" in hint
