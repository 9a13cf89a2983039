"""Parsed suite versions, cached per process by content hash: the one way every reader gets one.

A worker plays every conversation of a run from the same suite, a run page polls every second and a run's
last conversation finalises it; none of them should parse a suite again.
A suite is loaded with its dataset (its rows are evals, at their index) and no other attached file: what a
history embeds went into each conversation's stored system message and history when the run was launched,
so nothing after the launch reads those files.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping
from typing import Protocol

from engine import suitevars
from engine.loader import load_saved_suite
from engine.options import apply as apply_options
from engine.schema import Suite as SuiteSpec
from engine.source import SuiteError
from suites.models import ParsedVersion, SuiteFile, SuiteVersion
from suites.parsed import schema_digest, store_parse

log = logging.getLogger(__name__)

# Datasets can be large: the cache keeps the newest suites within this many characters of source and dataset
# (always at least the one just loaded).
SUITE_CACHE_CHARS = 200_000_000
SUITE_CACHE_ENTRIES = 64


class VersionKey(Protocol):
    """A suite version as far as the cache needs it: a SuiteVersion, or what a worker's claim carries."""

    pk: int
    sha256: str


class _Files(Mapping):
    """A version's attached files, each read from the database only when the loader asks for it by name:
    the dataset, in practice."""

    def __init__(self, version_id: int) -> None:
        self.version_id = version_id
        self.read: dict[str, str | None] = {}

    def __getitem__(self, name: str) -> str:
        if name not in self.read:
            self.read[name] = (
                SuiteFile.objects.filter(version_id=self.version_id, name=name)
                .values_list("content", flat=True)
                .first()
            )
        if self.read[name] is None:
            raise KeyError(name)
        return self.read[name]

    def __iter__(self) -> Iterator[str]:
        return iter(SuiteFile.objects.filter(version_id=self.version_id).values_list("name", flat=True))

    def __len__(self) -> int:
        return SuiteFile.objects.filter(version_id=self.version_id).count()

    def __bool__(self) -> bool:  # `files or {}` must not count them
        return True

    @property
    def size(self) -> int:
        return sum(len(text) for text in self.read.values() if text)


_suites: dict[str, tuple[SuiteSpec | None, Exception | None, int]] = {}
_lock = threading.Lock()


def suite(version: VersionKey) -> SuiteSpec:
    """A version's parsed suite, with its dataset's rows, parsed once per process (the first conversations
    of a run all start at the same moment: one thread parses, the others wait for it). A version that no
    longer loads (saved under an older schema) raises its SuiteError each time, without another parse."""
    with _lock:
        cached = _suites.get(version.sha256)
        if cached is None:
            cached = _suites[version.sha256] = _load(version)
            while len(_suites) > 1 and (
                len(_suites) > SUITE_CACHE_ENTRIES
                or sum(entry[2] for entry in _suites.values()) > SUITE_CACHE_CHARS
            ):
                _suites.pop(next(iter(_suites)))  # the oldest
    spec, error, _ = cached
    if error is not None:
        raise error
    return spec


_bound: dict[tuple, SuiteSpec] = {}


def bound(version: VersionKey, values: Mapping[str, str] | None) -> SuiteSpec:
    """The suite a run plays: the version's, with the run's variables filled in (engine.suitevars). Cached
    per version and values, as the parsed suites are: every conversation of a run loads it."""
    spec = suite(version)
    if not spec.vars:
        return spec
    key = (version.sha256, tuple(sorted((values or {}).items())))
    with _lock:
        cached = _bound.get(key)
    if cached is None:
        cached = suitevars.bind(spec, values)
        with _lock:
            _bound[key] = cached
            while len(_bound) > SUITE_CACHE_ENTRIES:
                _bound.pop(next(iter(_bound)))
    return cached


_with_options: dict[tuple, tuple[SuiteSpec, SuiteSpec]] = {}


def with_options(spec: SuiteSpec, options: Mapping | None) -> SuiteSpec:
    """The suite with its run's launch options over it (engine.options), cached per suite and options as
    bound suites are: every conversation of a run applies them."""
    if not options:
        return spec
    key = (id(spec), repr(sorted(options.items())))
    with _lock:
        cached = _with_options.get(key)
    if cached is None or cached[0] is not spec:
        cached = (spec, apply_options(spec, dict(options)))
        with _lock:
            _with_options[key] = cached
            while len(_with_options) > SUITE_CACHE_ENTRIES:
                _with_options.pop(next(iter(_with_options)))
    return cached[1]


def _load(version: VersionKey) -> tuple[SuiteSpec | None, Exception | None, int]:
    stored = ParsedVersion.objects.filter(version_id=version.pk, schema=schema_digest()).values_list(
        "suite", flat=True
    )
    parsed = stored.first()
    if parsed is not None:
        try:
            return SuiteSpec.model_validate_json(parsed), None, len(parsed)
        except ValueError:  # not what this schema reads after all: parsed again below, and stored anew
            log.warning("suite version %s: its stored parse does not load; parsing its YAML", version.pk)
    if isinstance(version, SuiteVersion) and "source" in version.__dict__:
        source = version.source
    else:
        source = SuiteVersion.objects.values_list("source", flat=True).get(pk=version.pk)
    files = _Files(version.pk)
    try:
        spec = load_saved_suite(source, files)
    except SuiteError as exc:  # cached, and raised to every reader; a database error is not cached
        return None, exc, len(source)
    store_parse(version.pk, spec)
    return spec, None, len(source) + files.size
