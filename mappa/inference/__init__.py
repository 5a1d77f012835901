"""Generation engines (HF transformers; vLLM planned), model preparation and precision choices."""
