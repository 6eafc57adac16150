"""The auxiliary external query channel (§2.3.5): anonymise, clean, classify, then replay.

Nothing personal is stored: the text is anonymised before the first write. Removed queries are
kept (anonymised) with status "rejected" and their reason, so the cleaning can be audited.
"""
import hashlib
import re

from django.db import transaction

from devices import leases
from devices.composite import app_labels, cached_labels, installed_packages, resolve_app
from devices.gate import InputGate, InputRefused
from devices.models import Device
from devices.phone import PhoneConnection, PhoneUnavailable
from flywheel.models import App, Query
from flywheel.queries.external_tags import tag_external
from flywheel.rules.anonymize import anonymize
from flywheel.rules.query_cleaning import clean_query


def _key(text: str) -> str:
    return "ext-" + hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


CATALOG_HOLDER = "external-import:catalog"


def catalog_from_a_phone():
    """(labels, packages) of the apps a registered phone offers.

    Labels are only on a launcher, and reading one presses Home and may tap icons: that happens on
    an idle phone leased for the moment, every input audited (devices/gate.py), never on a phone
    someone else holds. With no idle phone, the package list the registry stored for a phone is
    used, with labels only if this process read that phone's launcher before.
    """
    for device in Device.objects.filter(status=Device.Status.IDLE).order_by("serial"):
        try:
            lease = leases.acquire(device, holder=CATALOG_HOLDER, purpose="read the app catalog for an import")
        except leases.LeaseRefused:
            continue
        phone = PhoneConnection.for_device(device)
        try:
            packages = installed_packages(phone)
            gate = InputGate(phone, device=device, holder=CATALOG_HOLDER, lease=lease)
            return app_labels(gate, packages), packages
        except (PhoneUnavailable, InputRefused):
            continue
        finally:
            leases.release(lease)
    for device in Device.objects.filter(status__in=[Device.Status.IDLE, Device.Status.LEASED]).order_by("serial"):
        if device.installed_apps:
            return cached_labels(PhoneConnection.for_device(device)) or {}, sorted(device.installed_apps)
    return {}, []


def app_for(text: str, labels: dict, packages: list) -> str | None:
    """An app the text names by its label ("in ShopMart"), else one that serves its need."""
    lowered = f" {text.lower()} "
    for label, package in sorted(labels.items(), key=lambda item: -len(item[0])):
        if re.search(rf"(?<![\w]){re.escape(label.lower())}(?![\w])", lowered):
            return package
    resolved = resolve_app(text, labels, packages)
    return resolved[0] if resolved else None


PACKAGE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")
TIERS = ("L1", "L2", "L3")


def _plan(record, labels, packages, seen) -> dict:
    """What one record becomes: anonymised, cleaned and given an app (no database writes)."""
    record = {"text": record} if isinstance(record, str) else dict(record)
    # An external record's `verification` is dropped: a spec is trusted data (checks read on
    # phones), and only the schema-validated query import may bring one.
    record.pop("verification", None)
    anonymized = anonymize(str(record.get("text", "")))
    text = anonymized.text
    cleaning = clean_query(text, seen)
    raw_apps = record.get("apps") if isinstance(record.get("apps"), list) else []
    apps = [app for app in raw_apps if isinstance(app, str) and PACKAGE.match(app)]
    # Post-hoc four-dimensional tags (§2.2.6), so external queries mix with generated ones.
    tags = tag_external(text, apps={label: label for label in labels})
    named = _app_names(record.get("app_names")) or tags["apps"]
    if cleaning.category not in ("invalid", "sensitive") and not apps:
        package = app_for(text, labels, packages) if cleaning.keep or named else None
        if package:
            apps = [package]
        elif cleaning.keep or named:
            cleaning.keep, cleaning.category = False, "non_executable"
            cleaning.reason = "not executable here: no registered phone has " + (
                ", ".join(named) if named else "an app that can do this")
    status_reason = "" if cleaning.keep else f"{cleaning.category}: {cleaning.reason}"
    labels_out = {"intent": cleaning.intent} if cleaning.intent else {}
    labels_out.update(step_depth=tags["step_depth"], ambiguity=tags["ambiguity"], risk_reasons=tags["risk_reasons"],
                      apps_named=named, clarify=tags["clarify"], tagged_by=tags["tagged_by"])
    return {"key": _key(text), "apps": apps, "kept": cleaning.keep, "anonymized": bool(anonymized.findings),
            "defaults": {
                "text": text, "tier": record.get("tier") if record.get("tier") in TIERS else tags["ambiguity"],
                "source": "external", "labels": labels_out, "risk": tags["risk"],
                "prerequisites": tags["prerequisites"],
                "verification": {},
                "gate_results": {"anonymization": anonymized.findings, "cleaning": cleaning.category or "kept",
                                 "intent": cleaning.intent},
                "status": "ready" if cleaning.keep else "rejected", "status_reason": status_reason,
                "tags": ["external"]}}


def _app_names(value) -> list[str]:
    """App names as a source wrote them ("QQ、相册" or a list), kept only if they look like names."""
    names = re.split(r"[、,，;；/]", value) if isinstance(value, str) else value if isinstance(value, list) else []
    return [n.strip() for n in names if isinstance(n, str) and 0 < len(n.strip()) <= 40
            and re.fullmatch(r"[\w .&+'-]+", n.strip())]


def ingest_external(records, catalog=None) -> dict:
    """Each record is a text or {"text", optional "apps" (package names), "app_names" (the apps as
    the source names them, e.g. "QQ、相册"), "tier"}; any other field (a `verification` above all)
    is ignored. Every query is tagged (step depth, ambiguity tier, risk, prerequisites); one whose
    apps no registered phone has is kept as rejected: "not executable here: no registered phone has …".

    Everything is worked out first (phone catalogue, anonymising, cleaning), then written in one
    short transaction. Returns counts and, per record, what happened:
    {"kept": n, "rejected": n, "results": [...]}.
    """
    labels, packages = catalog if catalog is not None else catalog_from_a_phone()
    seen = set(Query.objects.filter(source="external").values_list("text", flat=True))
    seen = {" ".join(text.split()).lower() for text in seen}
    plans = [_plan(record, labels, packages, seen) for record in records]
    results, written = [], set()
    with transaction.atomic():
        for plan in plans:
            if plan["key"] in written:  # the same text twice: the first one stands
                results.append({"key": plan["key"], "kept": False, "reason": plan["defaults"]["status_reason"],
                                "apps": [], "anonymized": plan["anonymized"]})
                continue
            written.add(plan["key"])
            query, _ = Query.objects.update_or_create(key=plan["key"], defaults=plan["defaults"])
            if plan["apps"]:
                query.set_apps([App.objects.get_or_create(package=p)[0] for p in plan["apps"]])
            results.append({"key": query.key, "kept": plan["kept"], "reason": query.status_reason,
                            "apps": plan["apps"], "anonymized": plan["anonymized"]})
    kept = sum(result["kept"] for result in results)
    return {"kept": kept, "rejected": len(results) - kept, "results": results}
