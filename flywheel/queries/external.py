"""The auxiliary external query channel (§2.3.5): anonymise, clean, classify, then replay.

Nothing personal is stored: the text is anonymised before the first write. Removed queries are
kept (anonymised) with status "rejected" and their reason, so the cleaning can be audited.
"""
import hashlib
import re

from django.db import transaction

from devices.composite import app_labels, installed_packages, resolve_app
from devices.models import Device
from devices.phone import PhoneConnection, PhoneUnavailable
from flywheel.models import App, Query
from flywheel.rules.anonymize import anonymize
from flywheel.rules.query_cleaning import clean_query


def _key(text: str) -> str:
    return "ext-" + hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def catalog_from_a_phone():
    """(labels, packages) of the apps a registered phone offers, read over ADB."""
    for device in Device.objects.filter(status__in=[Device.Status.IDLE, Device.Status.LEASED]).order_by("serial"):
        phone = PhoneConnection.for_device(device)
        try:
            return app_labels(phone), installed_packages(phone)
        except PhoneUnavailable:
            continue
    return {}, []


def app_for(text: str, labels: dict, packages: list) -> str | None:
    """An app the text names by its label ("in ShopMart"), else one that serves its need."""
    lowered = f" {text.lower()} "
    for label, package in sorted(labels.items(), key=lambda item: -len(item[0])):
        if re.search(rf"(?<![\w]){re.escape(label.lower())}(?![\w])", lowered):
            return package
    resolved = resolve_app(text, labels, packages)
    return resolved[0] if resolved else None


def ingest_external(records, catalog=None) -> dict:
    """Each record is a text or {"text", optional "apps", "tier", "verification"}.

    Returns counts and, per record, what happened: {"kept": n, "rejected": n, "results": [...]}.
    """
    labels, packages = catalog if catalog is not None else catalog_from_a_phone()
    seen = set(Query.objects.filter(source="external").values_list("text", flat=True))
    seen = {" ".join(text.split()).lower() for text in seen}
    results, kept = [], 0
    with transaction.atomic():
        for record in records:
            record = {"text": record} if isinstance(record, str) else dict(record)
            anonymized = anonymize(str(record.get("text", "")))
            text = anonymized.text
            cleaning = clean_query(text, seen)
            apps = list(record.get("apps") or [])
            if cleaning.keep and not apps:
                package = app_for(text, labels, packages)
                if package:
                    apps = [package]
                else:
                    cleaning.keep, cleaning.category = False, "non_executable"
                    cleaning.reason = "no installed app can do this"
            gates = {"anonymization": anonymized.findings, "cleaning": cleaning.category or "kept",
                     "intent": cleaning.intent}
            query, _ = Query.objects.update_or_create(key=_key(text), defaults={
                "text": text, "tier": record.get("tier", "L2"), "source": "external",
                "labels": {"intent": cleaning.intent} if cleaning.intent else {},
                "verification": record.get("verification") or {}, "gate_results": gates,
                "status": "ready" if cleaning.keep else "rejected",
                "status_reason": "" if cleaning.keep else f"{cleaning.category}: {cleaning.reason}",
                "tags": ["external"]})
            if apps:
                query.set_apps([App.objects.get_or_create(package=p)[0] for p in apps])
            kept += cleaning.keep
            results.append({"key": query.key, "kept": cleaning.keep, "reason": query.status_reason,
                            "apps": apps, "anonymized": bool(anonymized.findings)})
    return {"kept": kept, "rejected": len(results) - kept, "results": results}
