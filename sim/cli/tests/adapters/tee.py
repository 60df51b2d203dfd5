#!/usr/bin/env python3
"""A store adapter that is another adapter, every line of the exchange copied to a log, for
sim/cli/tests/it/adapter_cli.rs (which checks each line against reports/protocol.schema.json).

    tee.py LOG COMMAND...

Lines from fencesim are logged as `> line`, lines from the adapter as `< line`.
"""

import subprocess
import sys
import threading

log = open(sys.argv[1], "a", buffering=1)
lock = threading.Lock()
child = subprocess.Popen(sys.argv[2:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)


def pump(source, sink, mark):
    for line in source:
        with lock:
            log.write(mark + " " + line)
        sink.write(line)
        sink.flush()
    sink.close()


down = threading.Thread(target=pump, args=(sys.stdin, child.stdin, ">"))
down.start()
pump(child.stdout, sys.stdout, "<")
down.join()
sys.exit(child.wait())
