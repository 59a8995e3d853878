"""Built-in Strands tools: the calculator and ``test_code`` (runs the agent's code on the public
examples, in the sandbox). tau2's tools are in ``environments/tau2/tools``."""
