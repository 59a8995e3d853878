"""The GRPO guide's "Custom Reward Functions" block, unchanged but for its import line, in a module
so that a job's trainer and its rollout workers can import the reward (``guide_reward:my_custom_reward``).
``has_optimal_solution`` is the reader's own helper, which the guide leaves undefined."""

from agentboost import get_global_registry


def has_optimal_solution(trajectory):
    # a short, direct answer after at most two model calls
    return trajectory.final_answer is not None and len(trajectory.final_answer) <= 40 and trajectory.steps <= 2


# --- the guide's block ---
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
