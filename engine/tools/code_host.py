"""The `tool` dialect of a code handler's subprocess: engine/codegrade/host.py loads this file by path (as it
loads a code check's dialects) and calls the handler with the call's payload. What the handler returns, or
the exception it raised, leaves as one JSON object, so a handler that fails is the tool's error and not a
grader that crashed.

Loaded by path in the handler's subprocess, so it uses the standard library only and no relative imports."""

import asyncio
import importlib.util
import inspect
import pathlib
import sys
import types


def _base():
    # The code checks' dialects, for `jsonable`: one way of turning a callable's return value into JSON.
    path = pathlib.Path(__file__).resolve().parents[1] / "codegrade" / "dialects.py"
    spec = importlib.util.spec_from_file_location("evalsite_code_dialects_base", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


jsonable = _base().jsonable


def invoke(function, payload):
    try:
        result = function(payload)
        if inspect.isawaitable(result):
            result = asyncio.run(result)
    except Exception as exc:  # the tool's error, which the model is told
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"result": jsonable(result)}


DIALECTS = {"tool": types.SimpleNamespace(invoke=invoke, shims={}, prepare=lambda: None)}
