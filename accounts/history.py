"""One history of the decisions people make: who changed what, and when (django-auditlog's LogEntry).

Each app tracks the models its decisions write (`track`, from its AppConfig.ready) with the fields
that are the decision, and may say how to link to an object's own page (`link`). The actor is:
- on a request, the signed-in user (HistoryMiddleware, with the address counted as sign-in lockouts
  count it, accounts/client_address.py);
- in a worker or a command, the person its workflow names (`acting_as(user)`), or a label for the
  system's own work (`acting_as("model host")`); an entry with neither is the system's.
A decision written by a guarded queryset update (no save(), so no signal) records itself (`record`).
A row that belongs to another object (an adjudication of a trajectory) is stamped with it, so the
trajectory's history shows its verdicts, adjudications and repairs too.
"""
from contextlib import contextmanager
from contextvars import ContextVar

from auditlog.middleware import AuditlogMiddleware
from auditlog.registry import auditlog
from auditlog.signals import pre_log
from django.utils.encoding import smart_str

from accounts.client_address import client_address

SYSTEM = "system"  # what the page shows for an entry no person wrote

_acting = ContextVar("history_acting", default=None)  # a user, or a label for the system's own work
_links = {}  # model -> callable(pks) -> {pk: url of the object's own page}
_no_create = set()  # models whose creation is no decision (the machine makes them; people change them)


class HistoryMiddleware(AuditlogMiddleware):
    """auditlog's middleware, counting the client's address the way sign-in lockouts do: a
    forwarded header is believed only from TRUSTED_PROXIES."""

    @staticmethod
    def _get_remote_addr(request):
        return client_address(request)

    @staticmethod
    def _get_remote_port(request):
        return None


def object_key(model, pk) -> str:
    """How an object is named in a filter and in an entry's `about`: 'flywheel.trajectory:12'."""
    return f"{model._meta.label_lower}:{pk}"


def track(model, fields, *, about: str = "", on_create: bool = True):
    """Record changes of `fields` of `model` in the history. `about`: the foreign key of the object the
    row is a decision on (its entries show in that object's history too). `on_create=False`: a new row
    is no decision (only later changes are)."""
    auditlog.register(model, include_fields=list(fields))
    if about:
        attname = model._meta.get_field(about).attname
        target = model._meta.get_field(about).related_model

        def get_additional_data(instance):  # auditlog's hook: stored with each entry of the row
            related = getattr(instance, attname)
            return {"about": object_key(target, related)} if related is not None else None

        model.get_additional_data = get_additional_data
    if not on_create:
        _no_create.add(model)


def link(model, urls):
    """`urls(pks)` gives {pk: url} of the objects' own pages (one query for a page of entries)."""
    _links[model] = urls


def links_for(model, pks) -> dict:
    maker = _links.get(model)
    return maker(pks) if maker and pks else {}


def tracked_models() -> list:
    return sorted(auditlog.get_models(), key=lambda m: str(m._meta.verbose_name))


@contextmanager
def acting_as(person):
    """Entries written inside are `person`'s (a user), or the system's under a label (a string)."""
    token = _acting.set(person if person is not None else SYSTEM)
    try:
        yield
    finally:
        _acting.reset(token)


def stamp_actor(sender, instance, **kwargs):
    """pre_save of a LogEntry: the person (or label) of the enclosing acting_as. Connected before any
    request's receiver, so the named person wins over the request's user only where one is named."""
    person = _acting.get()
    if person is None or instance.pk:
        return
    if getattr(person, "pk", None):
        instance.actor = instance.actor or person
        instance.actor_email = instance.actor_email or getattr(person, "email", None) or None
    else:
        instance.additional_data = {**(instance.additional_data or {}), "by": str(person)}


def skip_creation(sender, instance, action, **kwargs):
    """pre_log: False (no entry) for the creation of a row whose creation is no decision."""
    from auditlog.models import LogEntry

    return not (action == LogEntry.Action.CREATE and sender in _no_create)


def _text(value) -> str:
    return "None" if value is None else smart_str(value)


def record(instance, changes: dict, actor=None):
    """An entry for a decision written by a queryset update: `changes` is {field: (old, new)} (a
    foreign key by its id, a JSON field as JSON text); `actor` is the person or a label for the
    system's own work, else whoever the context names."""
    from auditlog.models import LogEntry

    changed = {name: [_text(old), _text(new)] for name, (old, new) in changes.items() if old != new}
    if not changed:
        return None
    if isinstance(actor, str):
        with acting_as(actor):
            return LogEntry.objects.log_create(instance, action=LogEntry.Action.UPDATE, changes=changed)
    person = actor if getattr(actor, "pk", None) else None
    extra = {"actor": person, "actor_email": getattr(person, "email", None) or None} if person else {}
    return LogEntry.objects.log_create(instance, action=LogEntry.Action.UPDATE, changes=changed, **extra)


def connect():
    from auditlog.models import LogEntry
    from django.db.models.signals import pre_save

    pre_save.connect(stamp_actor, sender=LogEntry, dispatch_uid="history-stamp-actor")
    pre_log.connect(skip_creation, dispatch_uid="history-skip-creation")
