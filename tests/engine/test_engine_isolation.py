"""The engine imports no Django: the CLI runs it without the web stack."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def test_engine_imports_without_django():
    """Importing every engine module, and every module of the suite format, in a fresh interpreter does not
    import django."""
    top = sorted(p.stem for p in (ROOT / "engine").glob("*.py") if p.stem != "__init__")
    schema = sorted(
        f"schema.{p.stem}" for p in (ROOT / "engine" / "schema").glob("*.py") if p.stem != "__init__"
    )
    modules = top + schema
    assert {"runner", "loader", "conversation", "conversation_io", "checks", "judge_checks", "gates"} <= set(
        top
    )
    assert {"schema.checks", "schema.tool_checks"} <= set(schema)
    imports = ", ".join(f"engine.{name}" for name in modules)
    code = f"import engine, {imports}; import sys; assert 'django' not in sys.modules, 'django imported'"
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
