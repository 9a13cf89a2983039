"""Parsed suites for the workers, the pages and the run bookkeeping, cached per process by content hash.

A worker plays every conversation of a run from the same suite, a run page polls every second and a run's
last conversation finalises it; none of them should re-parse a suite (a 300-eval suite takes ~80 ms here)
or load its megabytes of attached files each time. Workers cache the whole suite with its files; the
pages take gates and iteration settings from that when this process has it, and parse only what they
need when it has not.
"""

from __future__ import annotations

import threading

from pydantic import ValidationError

from engine.loader import SuiteError, load_saved_suite, parse_yaml
from engine.schema import Gate
from engine.schema import Suite as SuiteSpec
from suites.models import SuiteVersion

_suites: dict[str, tuple[SuiteSpec, dict[str, str], int]] = {}
_suites_lock = threading.Lock()
# Attached files can reach 20 MB each; the cache keeps the newest suites within this many characters of
# source and files (always at least the one just loaded).
SUITE_CACHE_CHARS = 200_000_000


def suite_with_files(version_id: int, sha256: str) -> tuple[SuiteSpec, dict[str, str]]:
    """A version's parsed suite and its attached files, fetched and parsed once per process (the first
    conversations of a run all start at the same moment: one thread parses, the others wait for it)."""
    with _suites_lock:
        cached = _suites.get(sha256)
        if cached is None:
            version = SuiteVersion.objects.get(pk=version_id)
            files = version.file_map()
            size = len(version.source) + sum(map(len, files.values()))
            cached = _suites[sha256] = (load_saved_suite(version.source, files), files, size)
            while len(_suites) > 1 and (
                len(_suites) > 64 or sum(entry[2] for entry in _suites.values()) > SUITE_CACHE_CHARS
            ):
                _suites.pop(next(iter(_suites)))  # the oldest
        return cached[0], cached[1]


_gates_by_hash: dict[str, list[Gate]] = {}


def suite_gates(version: SuiteVersion) -> list[Gate]:
    """A version's gates, read from its YAML once per process: gates never depend on attached files, so a
    run page never loads a dataset (which can be megabytes) to show them."""
    cached = _gates_by_hash.get(version.sha256)
    loaded = _suites.get(version.sha256)
    if cached is None and loaded is not None:
        cached = loaded[0].gates
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
    loaded = _suites.get(version.sha256)
    if loaded is not None:
        return loaded[0]
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
