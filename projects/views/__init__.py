"""Projects pages: the list of mine (create one, switch to one), a project's members and its audit log."""

from .audit import audit_log
from .members import members
from .projects import create, project_list, switch

__all__ = ["audit_log", "create", "members", "project_list", "switch"]
