#!/usr/bin/env python3
"""The reference adapter with one nondeterministic habit, for sim/cli/tests/it/adapter_cli.rs: it
answers `busy` to a random few of the calls that may be busy, drawing from the OS's randomness.
Busy is always a legal answer (nothing happened; retry), so no contract is broken, yet two runs
of one seed differ: what `fencesim replay` must name as nondeterminism, not as a violation.
"""

import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "adapters", "python-sqlite"))
import adapter  # noqa: E402

rng = random.Random(os.urandom(16))
dispatch = adapter.Server.dispatch


def flaky(self, req):
    if req["op"] in adapter.CALLS and rng.random() < 0.05:
        raise adapter.busy(req["op"], req.get("run"))
    return dispatch(self, req)


adapter.Server.dispatch = flaky
adapter.main()
