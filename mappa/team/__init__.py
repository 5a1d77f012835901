"""A run's trained team outside the pipeline: the checkpoint to use, checked before any model loads
(`checkpoint`); each trainable agent exported as a standalone Hugging Face model folder (`hf_folder`,
`export`) with a team card (`card`); and the team asked one problem in this process, seat by seat, with the
run's coach's verdicts (`ask`, on `in_process` workers).

Nothing here starts Ray or Prefect or writes into the run.
"""
