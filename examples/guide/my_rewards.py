"""The guide's "Custom Reward Functions" block, unchanged but for its import line. It lives in its
own module so that the job's trainer and its rollout workers (other processes) can import the
reward: ``guide_workflow.py`` puts this folder on their PYTHONPATH."""

from agentboost import get_global_registry  # the guide: from agentcore.training import get_global_registry


def has_optimal_solution(trajectory):
    """The reader's own helper (the guide leaves it undefined): a short answer in at most two model calls."""
    return trajectory.final_answer is not None and len(trajectory.final_answer) <= 40 and trajectory.steps <= 2


# Register custom reward
registry = get_global_registry()

def my_custom_reward(trajectory):
    """Domain-specific reward logic."""
    reward = 0.5 if trajectory.success else 0.0

    # Custom logic
    if has_optimal_solution(trajectory):
        reward += 0.3

    return reward

registry.register("my_reward", my_custom_reward)
registry.set_agent_strategy("my-agent-type", "my_reward")
