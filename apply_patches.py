#!/usr/bin/env python
"""Install agentboost's overrides into rLLM and its veRL fork (the `rllm` path).

    python apply_patches.py              # verify hashes, then patch (a second run is a no-op)
    python apply_patches.py --status     # original / patched by this version / another version / unknown
    python apply_patches.py --revert     # restore the upstream files byte for byte
    python apply_patches.py --dry-run    # say what would change

Run it with the Python of the environment where rLLM is installed. See docs/rllm.md (linked from the README).
"""

import sys
from pathlib import Path

# Run from a checkout: the overrides live beside this script, and agentboost may not be installed
# in rLLM's environment yet when the user first checks --status.
_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))

from agentboost.integrations.rllm.patcher import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], source_root=_HERE))
