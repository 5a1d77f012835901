"""The blame check: do coaches blame the agent whose action caused a failure (counterfactual replays)?

    replay   a stored trajectory replayed with one action forced (pure: no Ray, no Prefect)
    check    the check of a run (`mappa coach-check`): replay, score with several coaches, compare; it runs
             on the agents' Ray workers and reads the stages' artifacts, so it sits above the stages

The blame accuracy itself, from pairs of scored replays, is pure math in `mappa.core.blame`.
"""
