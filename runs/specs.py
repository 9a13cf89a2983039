"""Parsed suites for the pages and the run bookkeeping, cached per process by content hash.

A run page polls every second and a run's last conversation finalises it; neither should re-parse a suite
(or load its megabytes of attached files) each time. Workers keep their own cache with every file
(runs/execution.py), since they need the history files too.
"""

from __future__ import annotations

from pydantic import ValidationError

from engine.loader import SuiteError, load_saved_suite, parse_yaml
from engine.schema import Gate
from engine.schema import Suite as SuiteSpec
from suites.models import SuiteVersion

_gates_by_hash: dict[str, list[Gate]] = {}


def suite_gates(version: SuiteVersion) -> list[Gate]:
    """A version's gates, read from its YAML once per process: gates never depend on attached files, so a
    run page never loads a dataset (which can be megabytes) to show them."""
    cached = _gates_by_hash.get(version.sha256)
    if cached is None:
        try:
            raw, _ = parse_yaml(version.source)
            cached = [Gate.model_validate(gate) for gate in raw.get("gates") or []]
        except (SuiteError, ValidationError, TypeError):  # saved under an older schema: no gates to show
            cached = []
        if len(_gates_by_hash) > 1024:
            _gates_by_hash.clear()
        _gates_by_hash[version.sha256] = cached
    return cached


_iteration_specs: dict[str, SuiteSpec | None] = {}


def iteration_spec(version: SuiteVersion) -> SuiteSpec | None:
    """The suite as iteration statistics need it (each eval's iterations and pass-rate threshold), parsed once
    per process per version: the run page polls every second while a run is live. Of the attached files only
    a dataset is read, on the first call: its rows use the suite's settings but must be there at their index."""
    if version.sha256 in _iteration_specs:
        return _iteration_specs[version.sha256]
    try:
        raw, _ = parse_yaml(version.source)
        dataset = raw.get("dataset")
        files = (
            dict(version.files.filter(name=dataset).values_list("name", "content"))
            if isinstance(dataset, str)
            else {}
        )
        spec = load_saved_suite(version.source, files)
    except Exception:  # saved under an older schema: the strips still show, without statistics
        spec = None
    if len(_iteration_specs) >= 16:  # datasets can be megabytes: keep few
        _iteration_specs.clear()
    _iteration_specs[version.sha256] = spec
    return spec
