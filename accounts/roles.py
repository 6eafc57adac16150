"""Roles are auth groups. One place decides who may see and do what.

Admins (the `admin` group, or superusers) pass every role check: they run the system.
"""
from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from rest_framework.permissions import SAFE_METHODS, BasePermission

ANNOTATOR, ADJUDICATOR, MANAGER, ADMIN = "annotator", "adjudicator", "manager", "admin"
ROLES = (ANNOTATOR, ADJUDICATOR, MANAGER, ADMIN)


def user_roles(user):
    """The set of role names a user has; cached on the user object for the request."""
    if not getattr(user, "is_authenticated", False):
        return frozenset()
    cached = getattr(user, "_flywheel_roles", None)
    if cached is None:
        names = set(user.groups.filter(name__in=ROLES).values_list("name", flat=True))
        if user.is_superuser:
            names.add(ADMIN)
        cached = frozenset(names)
        user._flywheel_roles = cached
    return cached


def has_role(user, *roles):
    mine = user_roles(user)
    return ADMIN in mine or bool(mine.intersection(roles))


def role_required(*roles):
    """View decorator: anonymous users go to login, users without one of `roles` get 403."""

    def decorator(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not has_role(request.user, *(roles or ROLES)):
                raise PermissionDenied(f"This page needs the role: {' or '.join(roles)}.")
            return view(request, *args, **kwargs)

        wrapped.required_roles = roles or ROLES
        return wrapped

    return decorator


class HasAnyRole(BasePermission):
    """API default: any signed-in user with some role may read; writes need `write_roles`."""

    message = "You need a flywheel role for this endpoint."

    def has_permission(self, request, view):
        if not request.user.is_authenticated:
            return False
        if request.method in SAFE_METHODS:
            return has_role(request.user, *getattr(view, "read_roles", ROLES))
        return has_role(request.user, *getattr(view, "write_roles", (MANAGER,)))


def roles_context(request):
    roles = user_roles(getattr(request, "user", None))
    return {"user_roles": roles, "is_admin_role": ADMIN in roles}
