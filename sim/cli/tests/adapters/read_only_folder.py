#!/usr/bin/env python3
"""The reference adapter, making a read-only folder in every location it opens, for
sim/cli/tests/it/temp_roots.rs: `locked/inner/data`, with `inner` r-x and `locked` r-x, as a database
engine's lock folder or a careless adapter leaves it. fencesim must still remove its whole
temporary root.

    read_only_folder.py [lock-tmpdir]

With `lock-tmpdir`, it also makes the folder holding fencesim's temporary root read-only (the
location's grandparent, the test's TMPDIR): something fencesim cannot remove, which it must then
name on stderr."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "adapters", "python-sqlite"))
import adapter  # noqa: E402

open_location = adapter.Server.open
lock_tmpdir = sys.argv[1:] == ["lock-tmpdir"]
del sys.argv[1:]


def open_and_lock(self, req):
    answer = open_location(self, req)
    location = req["location"]
    inner = os.path.join(location, "locked", "inner")
    if not os.path.exists(inner):
        os.makedirs(inner)
        with open(os.path.join(inner, "data"), "w") as f:
            f.write("the adapter's own\n")
        os.chmod(inner, 0o500)
        os.chmod(os.path.dirname(inner), 0o555)
    if lock_tmpdir:
        os.chmod(os.path.dirname(os.path.dirname(os.path.abspath(location))), 0o555)
    return answer


adapter.Server.open = open_and_lock
adapter.main()
