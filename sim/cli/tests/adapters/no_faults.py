#!/usr/bin/env python3
"""The reference adapter without fault points, for sim/cli/tests/it/adapter_cli.rs: its handshake
declares `fault_points: false` and it never stops inside a call. fencesim must say what that
leaves unexercised (the kit skips its fault-point checks; a sweep prints a note)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "adapters", "python-sqlite"))
import adapter  # noqa: E402

dispatch = adapter.Server.dispatch


def without_fault_points(self, req):
    answer = dispatch(self, req)
    if req["op"] == "hello":
        answer["capabilities"]["fault_points"] = False
    return answer


adapter.Server.dispatch = without_fault_points
adapter.Server.fault_point = lambda self, req, point, op, run: None
adapter.main()
