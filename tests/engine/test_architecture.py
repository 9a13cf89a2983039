"""docs/architecture.md against the tree: every path it names exists, and it names every module of the product."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
PRODUCT = ("engine", "endpoints", "evalsite", "projects", "runs", "suites")
NAMED = re.compile(
    r"`((?:engine|endpoints|evalsite|projects|runs|suites|templates|static|tests|bench|docs)/[\w./<>-]*)`"
)


def _named() -> set[str]:
    return set(NAMED.findall(DOC.read_text(encoding="utf-8")))


def _modules() -> set[str]:
    found = set()
    for top in PRODUCT:
        for path in (ROOT / top).rglob("*.py"):
            relative = path.relative_to(ROOT)
            if "migrations" in relative.parts or "__pycache__" in relative.parts:
                continue
            found.add(relative.as_posix())
    return found


def test_every_path_the_architecture_names_exists():
    # `engine/drivers/<style>.py` stands for a family of files, not a file.
    missing = sorted(name for name in _named() if "<" not in name and not (ROOT / name).exists())
    assert missing == []


def test_the_architecture_names_every_module_of_the_product():
    named = _named()
    # A package's __init__ with nothing to say is named by its folder.
    unnamed = sorted(
        module
        for module in _modules()
        if module not in named
        and not (module.endswith("/__init__.py") and module.removesuffix("__init__.py") in named)
    )
    assert unnamed == []


def test_the_check_reads_the_doc_it_means():
    # Holds the two tests above to something: the doc names modules, and the tree has them.
    assert len(_named() & _modules()) > 100
