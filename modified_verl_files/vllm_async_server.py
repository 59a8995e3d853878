# agentboost-override: verl/workers/rollout/vllm_rollout/vllm_async_server.py (agentica-project/verl fork), installed by apply_patches.py
"""The veRL fork's async vLLM server with agentboost's ``/v1/completions`` route.

The fork's original module is kept beside this one as ``vllm_async_server_upstream.py``; every name
it defines is re-exported here. ``AsyncvLLMServer`` there is a Ray actor class, which cannot be
subclassed: the class behind it is extended and decorated again the same way. Only
``completions`` changes (see ``agentboost.integrations.rllm.fork_server``): token ids and their
``token_logprobs`` come back as vLLM produced them, and a prompt that does not fit the context is a
clear 400 error (never a substitute prompt).
"""

import ray
from verl.workers.rollout.vllm_rollout import vllm_async_server_upstream as _upstream
from verl.workers.rollout.vllm_rollout.vllm_async_server_upstream import *  # noqa: F401,F403

from agentboost.integrations.rllm.fork_server import check_completion_request

_ActorBase = getattr(_upstream.AsyncvLLMServer, "__ray_actor_class__", None) or \
    _upstream.AsyncvLLMServer.__ray_metadata__.modified_class


class _AgentboostvLLMServer(_ActorBase):
    async def completions(self, raw_request):
        """OpenAI completions API, with the response's log-probabilities left in place."""
        body = await raw_request.json()
        body, error = check_completion_request(body, int(self.engine.model_config.max_model_len))
        if error is not None:
            return _upstream.JSONResponse(content=error, status_code=400)
        request = _upstream.CompletionRequest(**body)
        generator = await self.openai_serving_completion.create_completion(request, raw_request)
        if isinstance(generator, _upstream.ErrorResponse):
            return _upstream.JSONResponse(content=generator.model_dump(), status_code=generator.code)
        if request.stream:
            return _upstream.StreamingResponse(content=generator, media_type="text/event-stream")
        return _upstream.JSONResponse(content=generator.model_dump())


AsyncvLLMServer = ray.remote(num_cpus=1)(_AgentboostvLLMServer)
