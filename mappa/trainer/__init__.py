"""Training: the torch trainer, response logprobs, and the advantages and update stages."""
