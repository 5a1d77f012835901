"""mappa: finetune multi-agent LLM systems with per-action process rewards from an AI coach."""

__version__ = "0.1.0"
