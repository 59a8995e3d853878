"""The episode record (schema, statuses, segments, the token invariant, JSONL) and what is computed
from episodes alone (rollout summaries, success intervals, pass@k and pass^k, status and tool-call
counts). The bottom layer: it imports nothing else of agentboost."""
