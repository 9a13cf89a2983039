"""The engine imports no Django: the CLI runs it without the web stack."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def test_engine_imports_without_django():
    """Importing every engine module in a fresh interpreter does not import django."""
    modules = sorted(p.stem for p in (ROOT / "engine").glob("*.py") if p.stem != "__init__")
    assert {"runner", "loader", "conversation", "checks"} <= set(modules)
    imports = ", ".join(f"engine.{name}" for name in modules)
    code = f"import engine, {imports}; import sys; assert 'django' not in sys.modules, 'django imported'"
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
