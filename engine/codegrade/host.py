"""Runs one Python callable grader, in its own subprocess: `python host.py DIALECTS_FILE DIALECT MODULE FUNCTION`.

The payload arrives as JSON on stdin; the answer leaves as one JSON line on stdout. Whatever the grader
prints goes to stderr, so it can never be taken for the answer. With NO_NETWORK set, every socket
connection is refused by an audit hook the grader cannot remove (a network namespace, when the host has
one, already cuts it off). Set to "strict", where the host has no network namespace, starting another
process and loading a C library through ctypes are refused too.
"""

import asyncio
import importlib
import importlib.util
import inspect
import json
import os
import sys
import traceback
import types

NETWORK_EVENTS = {
    "socket.connect", "socket.bind", "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr",
    "socket.sendto", "socket.sendmsg",
}  # fmt: skip
# Without a network namespace, what could reach the network around the socket events: another process, or
# a C library called through ctypes.
ESCAPES = (
    "subprocess.Popen",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.fork",
    "ctypes.dlopen",
)


def _refuse(events: set[str], prefixes: tuple[str, ...]):
    def hook(event, args):
        if event in events or event.startswith(prefixes):
            raise PermissionError(f"not allowed for this code grader without the network ({event})")

    return hook


def _shim(name: str, source: str) -> None:
    """Install module `name` from `source` unless the real one can be imported; its parent packages too."""
    try:
        if importlib.util.find_spec(name) is not None:
            return
    except ModuleNotFoundError:  # a parent package is missing: the shim stands in for it
        pass
    parts = name.split(".")
    for depth in range(1, len(parts)):
        parent = ".".join(parts[:depth])
        if parent not in sys.modules:
            package = types.ModuleType(parent)
            package.__path__ = []
            sys.modules[parent] = package
    module = types.ModuleType(name)
    exec(compile(source, f"<shim {name}>", "exec"), module.__dict__)
    sys.modules[name] = module
    if len(parts) > 1:
        setattr(sys.modules[".".join(parts[:-1])], parts[-1], module)


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
    no_network = os.environ.get("EVALSITE_NO_NETWORK")
    if no_network:
        sys.addaudithook(_refuse(NETWORK_EVENTS, ESCAPES if no_network == "strict" else ()))
    sys.path[0] = os.getcwd()  # the suite's folder, not this file's: its modules cannot shadow a grader's
    for name, source in dialect.shims.items():
        _shim(name, source)
    try:
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
