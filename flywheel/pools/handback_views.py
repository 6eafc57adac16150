"""The hand-back channel's page (§2.3.7): samples per class against the target per class."""
from django.conf import settings
from django.db.models import Count
from django.shortcuts import render

from accounts.roles import MANAGER, role_required
from flywheel.models import HandbackSample
from flywheel.rules.handback import CLASSES

RECENT = 30


@role_required(MANAGER)
def handback_pool(request):
    target = max(1, int(settings.HANDBACK_TARGET_PER_CLASS))
    counts = dict(HandbackSample.objects.order_by().values_list("state").annotate(n=Count("pk")))
    rows = [{"klass": klass, "n": counts.get(klass.key, 0), "target": target,
             "short": max(0, target - counts.get(klass.key, 0))} for klass in CLASSES]
    recent = HandbackSample.objects.select_related("sample__query").order_by("-created_at", "-pk")[:RECENT]
    return render(request, "flywheel/handback.html", {
        "rows": rows, "total": sum(counts.values()), "target_total": target * len(CLASSES), "target": target,
        "reached": sum(row["n"] >= target for row in rows), "recent": recent, "enabled": settings.HANDBACK_SAMPLES})
