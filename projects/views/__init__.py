"""Projects pages: the list of mine (create one, switch to one) and a project's members."""

from .members import members
from .projects import create, project_list, switch

__all__ = ["create", "members", "project_list", "switch"]
