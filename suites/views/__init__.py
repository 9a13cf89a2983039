"""Suite pages, one module per page group: suites.py (list, new, editor, versions, validate, upload),
files.py and imports.py; editor.py renders the editor they share. Launching a run is runs' (runs.views.launch)."""

from .delete import delete_suite
from .files import attach_files, remove_file, version_file
from .imports import import_suite
from .suites import detail, new, suite_list, upload, validate, version, version_diff

__all__ = [
    "attach_files", "delete_suite", "detail", "import_suite", "new", "remove_file", "suite_list", "upload", "validate", "version",
    "version_diff", "version_file",
]  # fmt: skip
