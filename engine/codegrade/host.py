"""Runs one Python callable grader, in its own subprocess: `python host.py DIALECTS_FILE DIALECT MODULE FUNCTION`.

The payload arrives as JSON on stdin; the answer leaves as one JSON line on stdout. Whatever the grader
prints goes to stderr, so it can never be taken for the answer. With NO_NETWORK set, every socket
connection is refused by an audit hook the grader cannot remove (a network namespace, when the host has
one, already cuts it off; this also holds where it does not).
"""

import asyncio
import importlib
import importlib.util
import inspect
import json
import os
import sys
import traceback

NETWORK_EVENTS = {
    "socket.connect",
    "socket.getaddrinfo",
    "socket.gethostbyname",
    "socket.sendto",
    "socket.bind",
}


def _no_network(event, args):
    if event in NETWORK_EVENTS:
        raise PermissionError(f"network access is not allowed for this code grader ({event})")


def main() -> int:
    dialects_file, dialect_name, module_name, function_name = sys.argv[1:5]
    spec = importlib.util.spec_from_file_location("evalsite_code_dialects", dialects_file)
    dialects = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = dialects  # dataclasses look their module up by name
    spec.loader.exec_module(dialects)
    dialect = dialects.DIALECTS[dialect_name]
    payload = json.load(sys.stdin)
    answer_out = sys.stdout
    sys.stdout = sys.stderr
    if os.environ.get("EVALSITE_NO_NETWORK") == "1":
        sys.addaudithook(_no_network)
    sys.path.insert(0, os.getcwd())
    try:
        dialect.prepare()
        module = importlib.import_module(module_name)
        function = getattr(module, function_name)
    except Exception:
        traceback.print_exc()
        print(f"cannot load {module_name}:{function_name}", file=sys.stderr)
        return 2
    answer = dialect.invoke(function, payload)
    if inspect.isawaitable(answer):
        answer = asyncio.run(answer)
    answer_out.write("\n" + json.dumps(dialects.jsonable(answer), default=str) + "\n")
    answer_out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
