"""Managing people from the console (admins only): invite, set roles, deactivate or reactivate, and a
new one-time password link. Each change is one transaction with its PeopleEvent.

No e-mail is configured, so a link is handed to the admin to pass on. It is Django's password-reset
token: it works once (setting the password changes the hash the token is made from) and expires after
PASSWORD_RESET_TIMEOUT.
"""
from axes.utils import reset as reset_lockouts
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.tokens import default_token_generator
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from accounts.models import PeopleEvent
from accounts.roles import ADMIN, ROLES, user_roles

User = get_user_model()


def clean_roles(roles) -> list[str]:
    roles = sorted(set(roles))
    unknown = [r for r in roles if r not in ROLES]
    if unknown:
        raise ValidationError(f"unknown role {unknown[0]!r}; the roles are {', '.join(ROLES)}")
    if not roles:
        raise ValidationError("choose at least one role: without one, the person can open no page")
    return roles


def password_link(user) -> str:
    """The path of a one-time link that sets `user`'s password."""
    return reverse("password_reset_confirm", kwargs={"uidb64": urlsafe_base64_encode(force_bytes(user.pk)),
                                                     "token": default_token_generator.make_token(user)})


def _record(actor, action, user):
    PeopleEvent.objects.create(actor=actor, action=action, target=user, target_username=user.username,
                               roles=sorted(user.groups.filter(name__in=ROLES).values_list("name", flat=True)))


def _set_groups(user, roles):
    user.groups.remove(*Group.objects.filter(name__in=ROLES))
    user.groups.add(*(Group.objects.get_or_create(name=role)[0] for role in roles))
    user.__dict__.pop("_flywheel_roles", None)


def invite(actor, username: str, email: str, roles) -> tuple[User, str]:
    """A new active account without a usable password, and the link that sets it."""
    username, email = (username or "").strip(), (email or "").strip()
    if not username:
        raise ValidationError("a username is needed")
    User.username_validator(username)
    if len(username) > 150:
        raise ValidationError("a username has at most 150 characters")
    if email:
        validate_email(email)
    roles = clean_roles(roles)
    with transaction.atomic():
        if User.objects.filter(username__iexact=username).exists():
            raise ValidationError(f"the username {username!r} is taken")
        user = User(username=username, email=email)
        user.set_unusable_password()
        user.save()
        _set_groups(user, roles)
        _record(actor, PeopleEvent.Action.INVITED, user)
    return user, password_link(user)


def set_roles(actor, user, roles) -> None:
    roles = clean_roles(roles)
    if user.pk == actor.pk and ADMIN in user_roles(actor) and ADMIN not in roles and not actor.is_superuser:
        raise ValidationError("you cannot take the admin role from yourself: another admin can")
    with transaction.atomic():
        _set_groups(user, roles)
        _record(actor, PeopleEvent.Action.ROLES_SET, user)


def set_active(actor, user, active: bool) -> None:
    if user.pk == actor.pk and not active:
        raise ValidationError("you cannot deactivate yourself: another admin can")
    with transaction.atomic():
        User.objects.filter(pk=user.pk).update(is_active=active)
        user.is_active = active
        _record(actor, PeopleEvent.Action.REACTIVATED if active else PeopleEvent.Action.DEACTIVATED, user)


def new_password_link(actor, user) -> str:
    """A fresh one-time link; it also lifts a sign-in lockout, so the person can use it at once."""
    if not user.is_active:
        raise ValidationError(f"{user.username} is deactivated: reactivate the account first")
    with transaction.atomic():
        _record(actor, PeopleEvent.Action.PASSWORD_LINK, user)
        reset_lockouts(username=user.username)
    return password_link(user)
