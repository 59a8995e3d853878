"""The local trainer (``agentboost train``): configuration, the GRPO/PPO loop, batches, losses and
advantages through veRL's registries, log-probs, checkpoints, metrics, evaluation, SFT and export."""
