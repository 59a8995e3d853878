"""The gateway: any agent, in any process, trained over HTTP.

An OpenAI-compatible endpoint in front of the policy, one session per episode. Behind it is the
trainable model's own core (``TrainableModel.sample_turn``), so an agent agentboost does not build
gets the same token-exact episodes, the same extension rule and the same counted splits as one it
builds. ``server.py`` serves it; ``openai_messages.py`` turns chat-completions requests into the
trainable model's messages and its turns into responses; ``session.py`` holds one episode's state.
"""
