"""What a run shows people: experiment trackers, progress bars, plots and the read side of a run.

    trackers          each finished iteration's scalars and a table of sampled actions, for the trackers
    tracker_sinks     where they go: TensorBoard (default), W&B, MLflow
    progress          a long stage's progress: a Prefect progress artifact and a terminal bar
    curves            a run's training curves as a PNG (from `mappa.storage.history`)
    coach_plot        a run's coach comparison (re-scorings) as a PNG
    run_view          per-iteration summaries, per-agent stats and single trajectories (`mappa inspect`)
    run_list          the runs under a storage root and where each stands (`mappa runs`)
    coach_separation  how well the run's coach tells successful teams' actions from failed ones' (AUC)

Everything here reads a run's artifacts through `mappa.storage` and finds the training stages' outputs by
name (`mappa.storage.run.OUTPUTS`), never through the stages, so the stages can report through it. Only
`progress` touches Prefect (its artifacts API, inside a task or flow run). Not covered: persisting
anything of a run's own (`mappa.storage`), rendering tables on the terminal (`mappa.cli.render`).
"""
