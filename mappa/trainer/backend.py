"""Which trainer backend an agent gets: `trainer.type` (`torch` or `deepspeed`) for a trainable agent; a
frozen agent always gets the plain torch trainer (a policy for logprobs, no optimizer to shard)."""

from __future__ import annotations

from mappa.config import AlgoConfig, LoraConfig, TrainerConfig
from mappa.trainer.torch_trainer import TorchTrainer


def make_trainer(
    model_path: str,
    trainer: TrainerConfig,
    algo: AlgoConfig,
    pad_token_id: int,
    trainable: bool = True,
    seed: int = 0,
    lora: LoraConfig | None = None,
) -> TorchTrainer:
    if trainable and trainer.type == "deepspeed":
        from mappa.trainer.deepspeed_trainer import DeepSpeedTrainer  # DeepSpeed only when asked for

        return DeepSpeedTrainer(model_path, trainer, algo, pad_token_id, seed, lora)
    return TorchTrainer(model_path, trainer, algo, pad_token_id, trainable, seed, lora)
