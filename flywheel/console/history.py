"""The decision history page: who decided what, and when, per person and per object.

Entries are the one history of accounts/history.py (django-auditlog). Only managers and admins see it:
it names every colleague's decisions, and annotators and adjudicators see their own work in their
queues. Filters are parsed, never trusted: a malformed or unknown one answers 400.
"""
import json
from datetime import UTC, datetime

from auditlog.models import LogEntry
from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.exceptions import FieldDoesNotExist
from django.core.paginator import Paginator
from django.db import models
from django.db.models import Q
from django.shortcuts import render
from django.utils import timezone
from django.utils.text import capfirst

from accounts import history
from accounts.roles import MANAGER, role_required
from flywheel.rules.numbers import row_id, whole_number

PAGE_SIZE = 50
VALUE_CHARS = 160  # a long text or JSON value is cut here: the object's own page has the rest
EMPTY = "—"
ACTIONS = {LogEntry.Action.CREATE: "created", LogEntry.Action.UPDATE: "changed",
           LogEntry.Action.DELETE: "deleted", LogEntry.Action.ACCESS: "opened"}


class BadFilter(ValueError):
    """A filter the page cannot apply (a 400 with this message)."""


# -- filters -------------------------------------------------------------------------------------

def tracked_model(label: str):
    """The tracked model named 'app_label.model' (BadFilter for any other name)."""
    try:
        model = apps.get_model(label)
    except (LookupError, ValueError):
        model = None
    if model is None or model not in history.tracked_models():
        raise BadFilter(f"{label!r} is no kind of object the history keeps")
    return model


def parse_object(text: str):
    """'flywheel.trajectory:12' -> (model, 12)."""
    label, _, pk = text.partition(":")
    number = row_id(pk)
    if number is None:
        raise BadFilter("object is named like flywheel.trajectory:12")
    return tracked_model(label), number


def parse_person(text: str):
    """A user id, or 'system' for the entries no person wrote."""
    if text == history.SYSTEM:
        return history.SYSTEM
    number = row_id(text)
    person = get_user_model().objects.filter(pk=number).first() if number is not None else None
    if person is None:
        raise BadFilter("person is a person's id (from the list) or 'system'")
    return person


def parse_filters(params) -> dict:
    filters = {"person": None, "object": None, "kind": None, "page": 1}
    if params.get("person"):
        filters["person"] = parse_person(params["person"])
    if params.get("object"):
        filters["object"] = parse_object(params["object"])
    if params.get("kind"):
        filters["kind"] = tracked_model(params["kind"])
    if params.get("page"):
        filters["page"] = whole_number(params["page"], minimum=1, maximum=10**6)
        if filters["page"] is None:
            raise BadFilter("page is a page number")
    return filters


def entries_for(filters: dict):
    entries = LogEntry.objects.select_related("actor", "content_type").order_by("-timestamp", "-pk")
    person = filters["person"]
    if person == history.SYSTEM:
        entries = entries.filter(actor__isnull=True)
    elif person is not None:
        entries = entries.filter(actor=person)
    if filters["object"]:
        model, pk = filters["object"]
        # The object's own entries, and those of the rows that are decisions on it (its verdicts...).
        entries = entries.filter(Q(content_type=content_type(model), object_pk=str(pk))
                                 | Q(additional_data__about=history.object_key(model, pk)))
    if filters["kind"]:
        entries = entries.filter(content_type=content_type(filters["kind"]))
    return entries


def content_type(model):
    from django.contrib.contenttypes.models import ContentType

    return ContentType.objects.get_for_model(model)


# -- readable values -----------------------------------------------------------------------------

def plain(value) -> str:
    """A JSON value in words: 'key: value; key: value', lists by commas, never a Python literal."""
    if value is None or value == "" or value == [] or value == {}:
        return EMPTY
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return "; ".join(f"{key}: {plain(item)}" for key, item in value.items())
    if isinstance(value, list):
        return ", ".join(plain(item) for item in value)
    return str(value)


def cut(text: str) -> str:
    return text if len(text) <= VALUE_CHARS else text[:VALUE_CHARS - 1] + "…"


class Values:
    """Stored values (auditlog keeps text) as people read them; related rows looked up once a page."""

    def __init__(self):
        self.related = {}

    def shown(self, field, stored) -> str:
        if stored is None or stored in ("None", ""):
            return EMPTY
        if field is None:
            return cut(str(stored))
        if field.choices:
            return str(dict(field.flatchoices).get(stored, stored))
        if isinstance(field, models.BooleanField):
            return {"True": "yes", "False": "no"}.get(stored, stored)
        if isinstance(field, models.JSONField):
            try:
                return cut(plain(json.loads(stored)))
            except (TypeError, ValueError):
                return cut(str(stored))
        if isinstance(field, models.DateTimeField):
            return self.moment(stored)
        if isinstance(field, models.ForeignKey):
            return self.row(field.related_model, stored)
        return cut(str(stored))

    @staticmethod
    def moment(stored: str) -> str:
        try:
            moment = datetime.fromisoformat(stored)
        except ValueError:
            return stored
        if timezone.is_naive(moment):  # auditlog keeps UTC without its zone
            moment = moment.replace(tzinfo=UTC)
        return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M")

    def row(self, model, pk) -> str:
        key = (model, str(pk))
        if key not in self.related:
            found = model._default_manager.filter(pk=pk).first() if row_id(pk) else None
            self.related[key] = str(found) if found is not None else f"#{pk} (deleted)"
        return self.related[key]


def change_lines(entry, model, values: Values) -> list[dict]:
    """'field: old → new' for each changed field; a creation shows only what was set."""
    lines = []
    for name, pair in (entry.changes_dict or {}).items():
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            continue  # a many-to-many note: none of the tracked fields is one
        try:
            field = model._meta.get_field(name) if model else None
        except FieldDoesNotExist:
            field = None
        old, new = (values.shown(field, value) for value in pair)
        if entry.action == LogEntry.Action.CREATE and new == EMPTY:
            continue
        lines.append({"field": capfirst(getattr(field, "verbose_name", name)), "old": old, "new": new,
                      "created": entry.action == LogEntry.Action.CREATE})
    return lines


def actor_of(entry) -> str:
    if entry.actor_id:
        return entry.actor.get_username() if entry.actor else f"#{entry.actor_id} (deleted)"
    return (entry.additional_data or {}).get("by") or history.SYSTEM


def object_links(entries) -> dict:
    """(model, pk) -> url of the object's own page, one lookup per kind of object on the page."""
    wanted = {}
    for entry in entries:
        model = entry.content_type.model_class()
        wanted.setdefault(model, set()).add(entry.object_id)
        about = (entry.additional_data or {}).get("about")
        if about:
            try:
                about_model, pk = parse_object(about)
            except BadFilter:
                continue
            wanted.setdefault(about_model, set()).add(pk)
    return {(model, pk): url for model, pks in wanted.items()
            for pk, url in history.links_for(model, sorted(pk for pk in pks if pk is not None)).items()}


def rows(entries) -> list[dict]:
    values, links = Values(), object_links(entries)
    result = []
    for entry in entries:
        model = entry.content_type.model_class()
        about = (entry.additional_data or {}).get("about") or ""
        about_link = about_kind = ""
        if about:
            try:
                about_object = parse_object(about)
            except BadFilter:
                about = ""
            else:
                about_link, about_kind = links.get(about_object, ""), about_object[0]._meta.verbose_name
        result.append({
            "entry": entry, "actor": actor_of(entry), "action": ACTIONS.get(entry.action, "changed"),
            "kind": capfirst(model._meta.verbose_name) if model else entry.content_type.model,
            "label": entry.object_repr, "link": links.get((model, entry.object_id), "") or about_link,
            "key": history.object_key(model, entry.object_pk) if model else "",
            "about": about, "about_kind": about_kind, "changes": change_lines(entry, model, values)})
    return result


def heading(filters: dict) -> dict:
    """What the page is filtered to, in words, with a link to the object's own page."""
    said = {}
    if filters["object"]:
        model, pk = filters["object"]
        found = model._default_manager.filter(pk=pk).first()
        said["object"] = f"{capfirst(model._meta.verbose_name)} {found if found is not None else f'#{pk}'}"
        said["object_link"] = history.links_for(model, [pk]).get(pk, "")
    person = filters["person"]
    if person is not None:
        said["person"] = person if person == history.SYSTEM else person.get_username()
    return said


@role_required(MANAGER)
def history_page(request):
    try:
        filters = parse_filters(request.GET)
    except BadFilter as error:
        return render(request, "flywheel/history.html", {"error": str(error), "kinds": kinds()}, status=400)
    page = Paginator(entries_for(filters), PAGE_SIZE).get_page(filters["page"])
    params = request.GET.copy()
    params.pop("page", None)
    return render(request, "flywheel/history.html", {
        "page": page, "rows": rows(page.object_list), "filters": filters, "said": heading(filters),
        "kinds": kinds(), "people": people(), "query": params.urlencode(),
        "chosen": {name: request.GET.get(name, "") for name in ("person", "kind", "object")}})


def kinds() -> list[tuple[str, str]]:
    return [(model._meta.label_lower, capfirst(model._meta.verbose_name)) for model in history.tracked_models()]


def people():
    """Everyone who has an entry: the person filter's choices."""
    return get_user_model().objects.filter(
        pk__in=LogEntry.objects.filter(actor__isnull=False).values("actor")).order_by("username")
