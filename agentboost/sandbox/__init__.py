"""Where model-written code runs: the sandbox (limits, its own process group, scratch directory, no
network where the OS allows), the judge's test cases and output comparison, and the harness that
runs a problem's tests inside one sandbox."""
