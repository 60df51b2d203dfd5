#!/usr/bin/env python3
"""The reference adapter, until it breaks in the middle of a soak, for sim/cli/tests/it/adapter_cli.rs.

    breaks_later.py MODE STARTS_DIR

Every process started records its start in STARTS_DIR (one file per start, made with O_EXCL, so
the starts of concurrent processes are numbered without a race). MODE says what goes wrong:

- `exit`: a soak writer's process (one that was asked for a timed call with `now_ms: null`)
  exits (status 3) at its 40th request;
- `hang`: a soak writer's process stops answering at its 40th request;
- `nocaps`: every process started after the third (a soak writer restarted after a SIGKILL, or
  the judge's reader) declares no capabilities in its handshake.

Everything else is the reference adapter's (a correct store); the referee's reader of the final
state, which asks nothing timed, never breaks.
"""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "adapters", "python-sqlite"))
import adapter  # noqa: E402

mode, starts = sys.argv[1], sys.argv[2]
number = 1
while True:
    try:
        os.close(os.open(os.path.join(starts, f"start-{number}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        break
    except FileExistsError:
        number += 1

dispatch = adapter.Server.dispatch
served = 0
writer = False


def breaking(self, req):
    global served, writer
    served += 1
    writer = writer or ("now_ms" in req and req["now_ms"] is None)
    if writer and served >= 40 and mode == "exit":
        sys.stderr.write(f"breaks_later: process {number} exits at request {served}\n")
        sys.stderr.flush()
        os._exit(3)
    if writer and served >= 40 and mode == "hang":
        sys.stderr.write(f"breaks_later: process {number} hangs at request {served}\n")
        sys.stderr.flush()
        time.sleep(3600)
    answer = dispatch(self, req)
    if req["op"] == "hello" and mode == "nocaps" and number > 3:
        answer["capabilities"] = {"leases": False, "fenced_writes": False, "fault_points": False}
    return answer


adapter.Server.dispatch = breaking
adapter.main()
