#!/usr/bin/env python3
"""The reference adapter with one malformed kind of answer, for sim/cli/tests/it/adapter_cli.rs.

    misanswers.py MODE

- `error-and-ok`: a refusal of a write or lease call for its lease (`lease_held`, any op but
  `acquire`) also carries `"ok": null`, which is none of the protocol's shapes; read as ok, the
  store's correct refusals became stale acceptances;
- `close-twice`: every `close` is answered twice.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "adapters", "python-sqlite"))
import adapter  # noqa: E402

mode = sys.argv[1]
write = adapter.Server.write


def misanswering(self, message):
    error = message.get("error")
    if mode == "error-and-ok" and error and error.get("code") == "lease_held" and error.get("op") != "acquire":
        message = dict(message, ok=None)
    write(self, message)


handle = adapter.Server.handle


def answering_close_twice(self, req):
    handle(self, req)
    if mode == "close-twice" and req.get("op") == "close":
        write(self, {"id": req["id"], "ok": None})


adapter.Server.write = misanswering
adapter.Server.handle = answering_close_twice
adapter.main()
