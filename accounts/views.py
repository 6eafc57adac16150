"""The People page (admins only): invite, roles, deactivate/reactivate, new password links.

Writes go through accounts/people.py. A link is shown once, in the answer to the POST that made it.
"""
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db.models import Prefetch
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from accounts import people
from accounts.models import PeopleEvent
from accounts.roles import ADMIN, ROLES, role_required

User = get_user_model()


@role_required(ADMIN)
def people_list(request):
    users = User.objects.order_by("username").prefetch_related(
        Prefetch("groups", queryset=Group.objects.filter(name__in=ROLES), to_attr="role_groups"))
    rows = [{"user": u, "roles": {g.name for g in u.role_groups}} for u in users]
    return render(request, "accounts/people.html", {
        "rows": rows, "roles": ROLES, "events": PeopleEvent.objects.select_related("actor")[:50]})


def _link_page(request, user, path, what):
    return render(request, "accounts/link.html", {
        "person": user, "link": request.build_absolute_uri(path), "what": what})


@never_cache
@role_required(ADMIN)
@require_POST
def people_invite(request):
    try:
        user, path = people.invite(request.user, request.POST.get("username", ""), request.POST.get("email", ""),
                                   request.POST.getlist("roles"))
    except ValidationError as error:
        messages.error(request, "Not invited: " + " ".join(error.messages))
        return redirect("people")
    return _link_page(request, user, path, "invited")


@role_required(ADMIN)
@require_POST
def people_roles(request, user_id):
    user = get_object_or_404(User, pk=user_id)
    try:
        people.set_roles(request.user, user, request.POST.getlist("roles"))
    except ValidationError as error:
        messages.error(request, f"{user.username}: roles unchanged: " + " ".join(error.messages))
    else:
        messages.success(request, f"{user.username}'s roles are now: {', '.join(sorted(request.POST.getlist('roles')))}.")
    return redirect("people")


@role_required(ADMIN)
@require_POST
def people_active(request, user_id):
    user = get_object_or_404(User, pk=user_id)
    active = request.POST.get("active") == "1"
    try:
        people.set_active(request.user, user, active)
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
    else:
        messages.success(request, f"{user.username} is {'active again' if active else 'deactivated: they can no longer sign in'}.")
    return redirect("people")


@never_cache
@role_required(ADMIN)
@require_POST
def people_password(request, user_id):
    user = get_object_or_404(User, pk=user_id)
    try:
        path = people.new_password_link(request.user, user)
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
        return redirect("people")
    return _link_page(request, user, path, "password")
