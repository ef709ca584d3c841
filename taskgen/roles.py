"""Roles, from Django groups: viewer < reviewer < adjudicator < admin. One helper checks them in every view.

A superuser is an admin. A logged-in user in no group has no role and gets a page saying whom to ask.
"""
from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum
from functools import wraps

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


class Role(IntEnum):
    NONE = 0
    VIEWER = 1
    REVIEWER = 2
    ADJUDICATOR = 3
    ADMIN = 4


GROUP_ROLES = {"viewer": Role.VIEWER, "reviewer": Role.REVIEWER, "adjudicator": Role.ADJUDICATOR, "admin": Role.ADMIN}


def user_role(user) -> Role:
    """The highest role the user holds (cached on the user object for the request)."""
    if not getattr(user, "is_authenticated", False):
        return Role.NONE
    cached = getattr(user, "_taskgen_role", None)
    if cached is not None:
        return cached
    if user.is_superuser:
        role = Role.ADMIN
    else:
        names = user.groups.values_list("name", flat=True)
        role = max((GROUP_ROLES.get(n, Role.NONE) for n in names), default=Role.NONE)
    user._taskgen_role = role
    return role


def has_role(user, minimum: Role) -> bool:
    return user_role(user) >= minimum


def role_refused(request: HttpRequest, minimum: Role) -> HttpResponse:
    """The 403 page saying which role is missing. Answered, not raised: Django logs a raised PermissionDenied with
    its whole traceback, where a refusal is an ordinary event worth one line (django.request logs it so)."""
    message = f"This page needs the {minimum.name.lower()} role."
    return render(request, "403.html", {"exception": message}, status=403)


def require_role(minimum: Role) -> Callable:
    """View decorator: 403 unless the user holds at least `minimum` (login itself is enforced by middleware)."""

    def decorator(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            if not has_role(request.user, minimum):
                return role_refused(request, minimum)
            return view(request, *args, **kwargs)

        return wrapped

    return decorator


def role_context(request: HttpRequest) -> dict:
    """`role` and can_* flags for templates, so pages hide what a user may not do."""
    role = user_role(getattr(request, "user", None))
    return {
        "role": role.name.lower(),
        "can_review": role >= Role.REVIEWER,
        "can_adjudicate": role >= Role.ADJUDICATOR,
        "can_admin": role >= Role.ADMIN,
    }
