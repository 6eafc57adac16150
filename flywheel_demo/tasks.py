"""Celery: the demo's stages run on the training queue (a stage may train the compact policy)."""
from celery import shared_task


@shared_task(name="flywheel_demo.tasks.advance_demo_task")
def advance_demo_task(demo_id):
    from flywheel_demo.orchestrator import advance_demo

    demo = advance_demo(demo_id)
    return {"demo": demo_id, "stage": getattr(demo, "stage", None), "status": getattr(demo, "status", None)}


@shared_task(name="flywheel_demo.tasks.advance_demos")
def advance_demos():
    """Beat, every 10 s: move every live demo on (safe to overlap: each demo's row is locked)."""
    from flywheel_demo.models import DemoRun
    from flywheel_demo.orchestrator import advance_demo

    live = list(DemoRun.objects.filter(status__in=DemoRun.LIVE).values_list("pk", flat=True))
    for demo_id in live:
        advance_demo(demo_id)
    return {"advanced": live}
