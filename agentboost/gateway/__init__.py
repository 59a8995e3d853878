"""The gateway: any agent, in any process, any protocol, trained over HTTP.

An endpoint in front of the policy that speaks OpenAI chat completions, OpenAI Responses and
Anthropic Messages, one session per episode. Behind it is the trainable model's own core
(``TrainableModel.sample_turn``), so an agent agentboost does not build gets the same token-exact
episodes, the same extension rule and the same counted splits as one it builds, whichever protocol
it speaks. ``server.py`` serves it; ``protocol.py`` holds what the protocols share and one module
per protocol (``openai_messages.py``, ``openai_responses.py``, ``anthropic_messages.py``) turns its
requests into the trainable model's messages and its turns into answers; ``session.py`` holds one
episode's state (the recorder every protocol, and ``serve``, goes through).
"""
