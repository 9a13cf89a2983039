"""Every module of the worker runtime can be the first one a process imports: an import circle through the
package (runs.worker's __init__ imports the tasks, which import the pump, which imports what plays a
conversation) would fail only for whoever imported the wrong module first."""

from __future__ import annotations

import os
import pkgutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from runs import worker
from tests.conftest import ROOT

# Every module of the worker runtime: any may be the one a new import reaches first.
MODULES = sorted(f"runs.worker.{module.name}" for module in pkgutil.iter_modules(worker.__path__))


def _imports_first(module: str) -> tuple[str, int, str]:
    code = f"import django; django.setup(); import {module}"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "evalsite.settings", "EVALSITE_DEV": "1"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    return module, done.returncode, done.stderr[-400:]


def test_every_worker_module_imports_first_in_a_fresh_process():
    assert "runs.worker.pump" in MODULES and len(MODULES) >= 10, MODULES
    with ThreadPoolExecutor(max_workers=2) as pool:
        failed = [(m, err) for m, code, err in pool.map(_imports_first, MODULES) if code != 0]
    assert not failed, failed
