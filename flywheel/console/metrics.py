"""Prometheus metrics of the flywheel (issue #18): phones, leases, throughput, queues, judging, pools.

The collector reads everything on each scrape into a fresh registry (render_metrics): nothing
touches the database at import, and nothing is kept between scrapes, so every web process answers
alike. Each figure costs one or two cheap statements whatever the size of the database, by the
dashboard's rule (flywheel/console/dashboard.py): small tables are counted as they stand (phones,
open leases: at most one per phone), the verdicts and the CPT/SFT pools come from the folded
tallies (flywheel/tallies.py), and the recent steps and verdicts are reached through an index.
"""
import math
from datetime import timedelta

import redis
from django.conf import settings
from django.db.models import Count, Exists, OuterRef
from django.db.models.functions import Now
from django.utils import timezone
from kombu.transport.redis import PRIORITY_STEPS, Channel
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from devices.hosts import host_queue
from devices.models import Device, Lease, PhoneHost
from flywheel import tallies
from flywheel.models import RlQueryEntry, Step, Verdict
from flywheel.models.trajectories import Line, Outcome

STEPS_WINDOW = timedelta(seconds=60)
# Steps/s reads at most the newest RECENT_STEPS steps, found through the primary key: Step.created_at
# has no index (one more index on the busiest insert is not worth a metric), and a farm writes far
# fewer steps a minute (16 phones at about one step a second: ~1000).
RECENT_STEPS = 10_000
JUDGE_WINDOW = timedelta(hours=1)
JUDGE_QUANTILES = (0.5, 0.95)
MAX_JUDGED = 10_000  # newest first: more verdicts an hour than this would only refine the quantiles
REDIS_TIMEOUT_S = 1.0


def holder_kind(holder: str) -> str:
    """A lease holder without its id: "collection:run:12" → "collection:run", "console:alice" →
    "console". An id never becomes a label value (one time series per run would never end)."""
    parts = holder.split(":")
    if len(parts) >= 3 and not parts[1].isdigit():
        return f"{parts[0]}:{parts[1]}"
    return parts[0]


def quantile(ordered: list[float], q: float) -> float:
    """Linear interpolation between the closest ranks of a sorted, non-empty list (numpy's default)."""
    position = (len(ordered) - 1) * q
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def phones_by_host():
    """{(host, status): n} over every phone, with every status of every known host (0 included), so
    a series drops to 0 instead of disappearing."""
    counts = {(host, status): n for host, status, n in
              Device.objects.order_by().values_list("adb_server", "status").annotate(n=Count("id"))}
    hosts = {host for host, _ in counts} | set(settings.ADB_SERVERS) | set(PhoneHost.objects.values_list("name", flat=True))
    return {(host, status): counts.get((host, status), 0) for host in sorted(hosts) for status in Device.Status.values}


def phone_hosts():
    """[(name, seconds since it last said it was alive)], on the database's clock."""
    return [(name, max(0.0, (now - seen).total_seconds())) for name, seen, now in
            PhoneHost.objects.annotate(now=Now()).values_list("name", "last_seen", "now")]


def open_leases():
    """{(host, holder kind): n} of the leases open now on the database's clock (as devices.leases
    decides); one row per leased phone at most, so reading them costs as little as the phones."""
    counts: dict = {}
    for host, holder in (Lease.objects.filter(released_at__isnull=True, expires_at__gt=Now()).order_by()
                         .values_list("device__adb_server", "holder")):
        key = (host, holder_kind(holder))
        counts[key] = counts.get(key, 0) + 1
    return counts


def steps_per_second():
    """{line: steps/s} over the last STEPS_WINDOW, every line (0 included). The lowest primary key
    worth reading is looked up first, so the count is an index range scan, never a table scan."""
    floor = Step.objects.order_by("-pk").values_list("pk", flat=True)[RECENT_STEPS - 1:RECENT_STEPS].first() or 0
    counts = dict(Step.objects.filter(pk__gte=floor, created_at__gte=timezone.now() - STEPS_WINDOW).order_by()
                  .values_list("trajectory__line").annotate(n=Count("pk")))
    return {line: counts.get(line, 0) / STEPS_WINDOW.total_seconds() for line in Line.values}


def judge_latencies():
    """Seconds from a trajectory's end to its first HTSC verdict, for verdicts of the last hour
    (newest first, through the verdicts' time index). A later verdict of the same trajectory is a
    re-evaluation (after a rule fix, days later) and would pass for a slow judge: left out."""
    earlier = Verdict.objects.filter(trajectory_id=OuterRef("trajectory_id"), pk__lt=OuterRef("pk"))
    rows = (Verdict.objects.filter(created_at__gte=timezone.now() - JUDGE_WINDOW, trajectory__finished_at__isnull=False)
            .filter(~Exists(earlier)).order_by("-created_at")
            .values_list("created_at", "trajectory__finished_at")[:MAX_JUDGED])
    return sorted(max((judged - finished).total_seconds(), 0.0) for judged, finished in rows)


def pool_sizes():
    return {"cpt": tallies.total(tallies.CPT), "sft": tallies.total(tallies.SFT),
            # The RL pool is what it can still hand out, as the dashboard counts it.
            "rl": RlQueryEntry.objects.filter(state__in=[RlQueryEntry.State.BANKED, RlQueryEntry.State.ACTIVE]).count()}


def verdicts_by_outcome():
    counts = {key: n for key, n, _, _ in tallies.read(tallies.VERDICTS, by=("key",))}
    return {outcome: counts.get(outcome, 0) for outcome in Outcome.values if outcome != Outcome.PENDING} | counts


def _glob_escaped(text: str) -> str:
    return "".join(f"\\{char}" if char in "*?[]\\" else char for char in text)


def queue_depths(client, prefix: str) -> dict[str, int]:
    """{queue: messages waiting} as kombu's Redis transport keeps them: a list per queue (and one per
    priority step above 0, named queue + separator + step), every key under the global key prefix.
    The static queues, the queue of every configured ADB host, and any other host queue found by
    SCAN (a host not configured here still has a worker somewhere), in one pipelined round trip."""
    names = set(settings.CELERY_QUEUES_NAMES) | {host_queue(address) for address in settings.ADB_SERVERS}
    for key in client.scan_iter(match=_glob_escaped(prefix) + "collection.*", count=1000, _type="list"):
        names.add(key.decode("utf-8", "replace")[len(prefix):].split(Channel.sep)[0])
    ordered = sorted(names)
    suffixes = [""] + [f"{Channel.sep}{step}" for step in PRIORITY_STEPS if step]
    with client.pipeline(transaction=False) as pipe:
        for name in ordered:
            for suffix in suffixes:
                pipe.llen(f"{prefix}{name}{suffix}")
        sizes = pipe.execute()
    per_queue = len(suffixes)
    return {name: sum(sizes[i * per_queue:(i + 1) * per_queue]) for i, name in enumerate(ordered)}


def broker_queue_depths():
    """(reachable, {queue: depth}); an unreachable Redis is a metric (flywheel_redis_up 0), not a
    failed scrape, so the rest still arrives when it is most needed."""
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_timeout=REDIS_TIMEOUT_S,
                                  socket_connect_timeout=REDIS_TIMEOUT_S)
    prefix = settings.CELERY_BROKER_TRANSPORT_OPTIONS.get("global_keyprefix", "")
    try:
        return True, queue_depths(client, prefix)
    except (redis.RedisError, OSError):
        return False, {}
    finally:
        client.close()


class FlywheelCollector:
    """A custom collector: read on each collect(), registered only in a per-scrape registry."""

    def collect(self):
        phones = GaugeMetricFamily("flywheel_phones", "Phones by ADB host and status.", labels=["host", "status"])
        for (host, status), n in phones_by_host().items():
            phones.add_metric([host, status], n)
        yield phones

        up = GaugeMetricFamily("flywheel_phone_host_up", "1 while a phone host's worker says it is alive, else 0.",
                               labels=["host"])
        silent = GaugeMetricFamily("flywheel_phone_host_silent_seconds",
                                   "Seconds since a phone host's worker last said it was alive.", labels=["host"])
        for name, seconds in phone_hosts():
            up.add_metric([name], 1 if seconds < settings.PHONE_HOST_STALE_S else 0)
            silent.add_metric([name], seconds)
        yield up
        yield silent

        leases = GaugeMetricFamily("flywheel_leases_open", "Leases open now, by ADB host and kind of holder.",
                                   labels=["host", "holder_kind"])
        for (host, kind), n in sorted(open_leases().items()):
            leases.add_metric([host, kind], n)
        yield leases

        rate = GaugeMetricFamily("flywheel_steps_per_second",
                                 f"Steps recorded per second over the last {int(STEPS_WINDOW.total_seconds())} s, "
                                 "by collection line.", labels=["line"])
        for line, value in steps_per_second().items():
            rate.add_metric([line], value)
        yield rate

        up, depths = broker_queue_depths()
        yield GaugeMetricFamily("flywheel_redis_up", "1 when the broker's Redis answered this scrape, else 0.",
                                value=1 if up else 0)
        depth = GaugeMetricFamily("flywheel_celery_queue_depth", "Messages waiting in each Celery queue.",
                                  labels=["queue"])
        for queue, n in depths.items():
            depth.add_metric([queue], n)
        yield depth

        latencies = judge_latencies()
        latency = GaugeMetricFamily("flywheel_judge_latency_seconds",
                                    "Seconds from a trajectory's end to its HTSC verdict, quantiles over the "
                                    "verdicts of the last hour (absent when there were none).", labels=["quantile"])
        for q in JUDGE_QUANTILES if latencies else ():
            latency.add_metric([str(q)], quantile(latencies, q))
        yield latency
        yield GaugeMetricFamily("flywheel_judged_last_hour", "Trajectories given their HTSC verdict in the last hour.",
                                value=len(latencies))

        verdicts = CounterMetricFamily("flywheel_verdicts", "HTSC verdicts recorded, by outcome.", labels=["outcome"])
        for outcome, n in verdicts_by_outcome().items():
            verdicts.add_metric([outcome], n)
        yield verdicts

        pools = GaugeMetricFamily("flywheel_pool_size", "Entries in each data pool (RL: banked and active queries).",
                                  labels=["pool"])
        for pool, n in pool_sizes().items():
            pools.add_metric([pool], n)
        yield pools


def render_metrics() -> bytes:
    """The text exposition of one scrape."""
    registry = CollectorRegistry()
    registry.register(FlywheelCollector())
    return generate_latest(registry)
