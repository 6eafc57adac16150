"""Celery tasks of the benchmark (the `benchmark` queue). Inference itself runs on the ADB hosts'
collection queues, as every rollout does; these are the judge/metric side and the sweeps."""
from celery import shared_task


@shared_task(name="benchmark.tasks.rejudge")
def rejudge(eval_run_id):
    """Judge a finished run again from its stored rollouts (no inference)."""
    from benchmark.judges import rejudge_evaluation
    from benchmark.models import EvalRun

    return rejudge_evaluation(EvalRun.objects.get(pk=eval_run_id))


@shared_task(name="benchmark.tasks.sweep")
def sweep():
    """Beat: progress and status of running evaluations; paused runs resume once their endpoint answers."""
    from benchmark.infer import resume_paused_evaluations, sweep_evaluations

    return {**sweep_evaluations(), **resume_paused_evaluations()}


@shared_task(name="benchmark.tasks.generate", soft_time_limit=1800)
def generate(benchmark_id, user_id=None):
    """Generate queries against a draft version's quota and add them for review."""
    from django.contrib.auth import get_user_model

    from benchmark.generation import generate_against_quota
    from benchmark.models import Benchmark

    user = get_user_model().objects.filter(pk=user_id).first() if user_id else None
    return generate_against_quota(Benchmark.objects.get(pk=benchmark_id), user=user)
