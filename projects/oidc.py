"""Single sign-on through an OpenID Connect provider (mozilla-django-oidc), used only when it is configured.

A user signing in for the first time is created, with a username from the provider's `preferred_username`
(else the email's local part), and joins no project unless `EVALSITE_OIDC_DEFAULT_ROLE` names a role in the
default one. A returning user is matched by email among the users the provider made (they have no
password here), so an account made here, the local admin's included, is never signed in through it.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.hashers import UNUSABLE_PASSWORD_PREFIX
from django.db import transaction
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from . import audit
from .models import Action, Membership, Project

USERNAME_LENGTH = 150


def username_from(claims: dict) -> str:
    """What the user is called here: the provider's username, else the email's local part."""
    name = (claims.get("preferred_username") or "").strip()
    if not name:
        name = (claims.get("email") or "").partition("@")[0].strip()
    return name[:USERNAME_LENGTH] or "user"


class Backend(OIDCAuthenticationBackend):
    def filter_users_by_claims(self, claims: dict):
        email = (claims.get("email") or "").strip()
        if not email:
            return self.UserModel.objects.none()
        return self.UserModel.objects.filter(
            email__iexact=email, password__startswith=UNUSABLE_PASSWORD_PREFIX
        )

    def get_username(self, claims: dict) -> str:
        """The username from the claims, with a number after it when another user already has it."""
        base = username_from(claims)
        name, number = base, 1
        while self.UserModel.objects.filter(username__iexact=name).exists():
            number += 1
            suffix = f"-{number}"
            name = base[: USERNAME_LENGTH - len(suffix)] + suffix
        return name

    @transaction.atomic
    def create_user(self, claims: dict):
        user = super().create_user(claims)
        role = settings.EVALSITE_OIDC_DEFAULT_ROLE
        if role:
            project = Project.default()
            Membership.objects.create(project=project, user=user, role=role)
            audit.record(None, project.pk, Action.MEMBER_ADDED, user, role=role, via="single sign-on")
        return user
