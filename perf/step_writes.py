"""Benchmark: the step writes of 1,000 phones against PostgreSQL (issue #17, part 4).

What a collection worker writes for every step, through the product's own code: the recorder's
record_observation (screenshot and UI dump as content-addressed blobs, the Step row), propose
(the proposal; the policy answers at once) and execute (the executed action, the CPT cleaning
and the CPT sample; the executor reports without a phone). No phones, no models: the screens and
dumps are ones the virtual farm's 8 device profiles render (40–400 KB PNGs), each capture new
bytes, a share of steps (`repeat_share`) seeing the very same frame again; actions on the
screen's elements, five-tag CoT, an endpoint-sized model_io, trajectories of 6 to 20 steps.

The deployment: `hosts` worker processes, one per ADB host as the per-host collection queues
have it, each driving its phones on threads (driver.drive_host: one thread per phone). Each host
commits its phones' stage writes in batches through its step writer (step_writer.py, as the driver
does) and reads through a pool of `db_slots` database connections (DATABASE_POOL_SIZE, the
product's setting: each phone thread hands its connection back between steps): 1,000 phones
holding one each would need 1,000 PostgreSQL backends (max_connections is 100 here). The hosts
start as a running farm's: each phone mid-trajectory, its host knowing what it noted at the
trajectory's last step.

Two passes over the same database, `seconds` each after `warmup_s`:
- saturated: every phone writes as fast as its host lets it (sustained steps/s);
- paced: every phone spends a while on its phone and model between two writes, so the hosts are
  offered 70% of the saturated pass's rate (or one step per `phone_time_s` per phone if that is
  less): what a phone waits for its write at a rate the machine sustains, the latency figure.
Write latency of a step: from the start of persisting its observation to the end of feeding the
CPT pool; waiting for a free connection is reported apart.

Database: BENCH_WRITES_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/flywheel_writes),
created, migrated and dropped at the end; media in a temporary MEDIA_ROOT, removed too.
BENCH_WRITES_TRY_SQL, if set, runs after the migrations (an index or storage change, measured
before its migration is written).

    .venv/bin/python perf/step_writes.py [--phones 1000] [--hosts 10] [--seconds 30]

Ends with one line (steps/s and CPU per step of the saturated pass, p95 of the paced pass; the host
CPU is the worker processes', the database's its backends' serving the bench; connections: the
bench database's backends seen during the passes): `writes: step_writes_per_s=<n> write_p95_ms=<n> host_cpu_ms_per_step=<n>
db_cpu_ms_per_step=<n> connections=<n> phones=<n> hosts=<n>`.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psycopg
from dj_database_url import parse as parse_database_url
from psycopg import sql

from simfarm.launch import die_with_parent, stop

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/flywheel_writes"
HOST_SCRIPT = ROOT / "perf" / "step_writes_host.py"
TICKS = os.sysconf("SC_CLK_TCK")
FRAMES_PER_APP = 2


# -- the database, the seed, the frames ----------------------------------------------------------

def host_address(index: int) -> str:
    return f"bench-host-{index:02d}:5037"


def _admin_connection(url: str):
    db = parse_database_url(url)
    return psycopg.connect(dbname="postgres", user=db["USER"] or "postgres", password=db["PASSWORD"] or None,
                           host=db["HOST"] or "127.0.0.1", port=db["PORT"] or 5432, autocommit=True)


def recreate_database(url: str, drop_only: bool = False) -> None:
    name = parse_database_url(url)["NAME"]
    with _admin_connection(url) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        if not drop_only:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def prepare(var: Path, phones: int, hosts: int) -> None:
    """(In a subprocess with Django set up) migrate; seed apps, queries and phones; render frames."""
    import django

    django.setup()
    from django.core.management import call_command

    from devices.models import Device
    from flywheel.models import App, Query
    from simfarm.farm import Farm
    from simfarm.phone_state import PROFILES

    call_command("migrate", verbosity=0)
    farm = Farm(devices=len(PROFILES), seed=0)
    apps = [App.objects.create(package=package, label=spec.label) for package, spec in sorted(farm.apps.items())]
    for n in range(200):
        query = Query.objects.create(key=f"bench-{n:03d}", tier="L1", text=f"Change setting {n} and confirm it")
        query.set_apps([apps[n % len(apps)]])
    Device.objects.bulk_create(
        Device(serial=f"sim-{n + 1:04d}", adb_server=host_address(n % hosts), status=Device.Status.LEASED,
               resolution="{width}x{height}".format(**PROFILES[n % len(PROFILES)])) for n in range(phones))
    folder = var / "frames"
    folder.mkdir()
    metas = []
    for profile, phone in enumerate(sorted(farm.phones.values(), key=lambda p: p.index)):
        for package in sorted(phone.engine.apps):  # the apps installed on this phone
            phone.run(f"monkey -p {package} -c android.intent.category.LAUNCHER 1")
            for shot in range(FRAMES_PER_APP):
                stem = f"p{profile}-{package}-{shot}"
                (folder / f"{stem}.png").write_bytes(phone.screencap_png())
                xml = phone.dump_hierarchy()
                (folder / f"{stem}.xml").write_text(xml)
                metas.append({"profile": profile, "package": package, "width": phone.width, "height": phone.height,
                              "png": f"{stem}.png", "xml": f"{stem}.xml"})
                phone.run("input swipe 540 1600 540 700 300")  # the next frame: the list scrolled
            phone.run("input keyevent KEYCODE_HOME")
    (folder / "frames.json").write_text(json.dumps(metas))


def describe_frames(folder: Path) -> str:
    metas = json.loads((folder / "frames.json").read_text())
    sizes = sorted((folder / meta["png"]).stat().st_size // 1024 for meta in metas)
    return (f"frames: {len(metas)} screens of {len({m['profile'] for m in metas})} device profiles, PNG "
            f"{sizes[0]}–{sizes[-1]} KB (median {sizes[len(sizes) // 2]} KB)")


# -- CPU and database counters -------------------------------------------------------------------

def _ticks(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime
    except (OSError, IndexError):
        return 0


def _postgres_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "postgres":
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def snapshot(url: str, workers: list) -> dict:
    name = parse_database_url(url)["NAME"]
    with _admin_connection(url) as admin:
        backends = [row[0] for row in admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", [name])]
        commits = admin.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = %s", [name]).fetchone()[0]
    with psycopg.connect(url) as bench:  # table statistics are per database
        updates = bench.execute("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
                                "WHERE relname = 'flywheel_step'").fetchone()
    cpu = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    return {"time": time.time(), "workers": sum(_ticks(p.pid) for p in workers),
            "backends": {pid: _ticks(pid) for pid in backends},
            "postgres": sum(_ticks(pid) for pid in _postgres_pids()),
            "machine_busy": sum(map(int, cpu)) - int(cpu[3]) - int(cpu[4]), "machine_all": sum(map(int, cpu)),
            "commits": commits,
            "step_updates": updates[0], "step_hot_updates": updates[1]}


# -- one pass --------------------------------------------------------------------------------------

def measure(label: str, var: Path, env: dict, url: str, hosts: int, seconds: float, warmup_s: float,
            phone_time_s: float, repeat_share: float, db_slots: int) -> dict:
    run_dir = var / label
    run_dir.mkdir()
    (run_dir / "params.json").write_text(json.dumps({
        "frames": str(var / "frames"), "seconds": seconds, "warmup_s": warmup_s, "phone_time_s": phone_time_s,
        "repeat_share": repeat_share, "db_slots": db_slots, "seed": label}))
    env = {**env, "DATABASE_POOL_SIZE": str(db_slots)}  # each host's threads share its pool
    with open(run_dir / "hosts.log", "wb") as log:
        workers = [subprocess.Popen([sys.executable, str(HOST_SCRIPT), str(run_dir), str(i)], cwd=ROOT, env=env,
                                    stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
                   for i in range(hosts)]
    try:
        deadline = time.monotonic() + 300
        while not all((run_dir / f"ready-{i}").exists() for i in range(hosts)):
            if time.monotonic() > deadline or any(w.poll() is not None for w in workers):
                raise RuntimeError(f"hosts did not start:\n{(run_dir / 'hosts.log').read_text()[-3000:]}")
            time.sleep(0.2)
        start = time.time() + 1.0
        (run_dir / "go").write_text(repr(start))
        window = (start + warmup_s, start + warmup_s + seconds)
        time.sleep(max(0.0, window[0] - time.time()))
        before = snapshot(url, workers)
        time.sleep(max(0.0, window[1] - time.time()))
        after = snapshot(url, workers)
        for worker in workers:
            worker.wait(timeout=300)
    finally:
        for worker in workers:
            stop(worker)
    missing = [i for i in range(hosts) if not (run_dir / f"host-{i}.json").exists()]
    if missing:
        raise RuntimeError(f"hosts {missing} wrote no figures; their log ends:\n"
                           f"{(run_dir / 'hosts.log').read_text()[-4000:]}")
    results = [json.loads((run_dir / f"host-{i}.json").read_text()) for i in range(hosts)]
    return summarize(label, results, before, after, window)


def _percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else float("nan")


def summarize(label, results, before, after, window) -> dict:
    records = [r for result in results for r in result["records"] if window[0] <= r["end"] < window[1]]
    steps = max(1, len(records))
    delta = {key: after[key] - before[key] for key in after if key not in ("backends",)}
    delta["backends"] = sum(t - before["backends"].get(pid, 0) for pid, t in after["backends"].items())
    seconds = lambda ticks: ticks / TICKS  # noqa: E731
    machine = delta["machine_busy"] / max(1, delta["machine_all"]) * os.cpu_count()
    cpu = {"workers": seconds(delta["workers"]) / delta["time"], "postgres_bench": seconds(delta["backends"]) / delta["time"],
           "postgres_all": seconds(delta["postgres"]) / delta["time"], "machine_busy": machine}
    cpu["other"] = max(0.0, machine - cpu["workers"] - cpu["postgres_all"])
    writes = [r["write_ms"] for r in records]
    verdicts = {}
    for r in records:
        verdict = r["cpt"].split(":")[0]
        verdicts[verdict] = verdicts.get(verdict, 0) + 1
    return {
        "label": label, "steps": len(records), "step_writes_per_s": len(records) / (window[1] - window[0]),
        "write_p50_ms": statistics.median(writes) if writes else float("nan"),
        "write_p95_ms": _percentile(writes, 0.95),
        "stage_p50_ms": {stage: statistics.median(r[f"{stage}_ms"] for r in records) if records else 0
                         for stage in ("observe", "propose", "execute")},
        "statements_per_step": sum(r["statements"] for r in records) / steps,
        "commits_per_step": delta["commits"] / steps,
        "step_hot_update_share": delta["step_hot_updates"] / max(1, delta["step_updates"]),
        "cpu_cores": cpu,
        "cpu_ms_per_step": {"workers": seconds(delta["workers"]) * 1000 / steps,
                            "postgres_bench": seconds(delta["backends"]) * 1000 / steps},
        # The hosts' writers (step_writer.py), over the whole pass: stage writes per transaction and
        # their statements per step (BEGIN/COMMIT not counted).
        "writes_per_batch": sum(r["batched_writes"] for r in results) / max(1, sum(r["batches"] for r in results)),
        "writer_statements_per_step": sum(r["writer_statements"] for r in results) * 3 / max(
            1, sum(r["batched_writes"] for r in results)),
        "cpt": verdicts, "errors": sum(r["error_count"] for r in results),
        "connections": max(len(before["backends"]), len(after["backends"])),  # the bench database's backends
        "first_error": next((e for r in results for e in r["errors"]), "")}


def report(result: dict, phones: int, hosts: int, db_slots: int) -> None:
    cpu, per_step = result["cpu_cores"], result["cpu_ms_per_step"]
    print(f"{result['label']}: {phones} phones on {hosts} hosts (a pool of {db_slots} connections each; "
          f"{result['connections']} open on the server): "
          f"{result['steps']} steps = {result['step_writes_per_s']:.1f} steps/s; write p50 "
          f"{result['write_p50_ms']:.0f} ms, p95 {result['write_p95_ms']:.0f} ms (stages p50: "
          + ", ".join(f"{k} {v:.0f}" for k, v in result["stage_p50_ms"].items())
          + " ms)")
    print(f"  per step: {result['statements_per_step']:.1f} SQL statements of the phone's thread and "
          f"{result['writer_statements_per_step']:.2f} of its host's writer ({result['writes_per_batch']:.1f} stage "
          f"writes per writer transaction; BEGIN/COMMIT not counted), "
          f"{result['commits_per_step']:.1f} transactions ({result['step_hot_update_share']:.0%} of step "
          f"updates HOT); CPT: {result['cpt']}")
    print(f"  CPU: workers {cpu['workers']:.2f} cores ({per_step['workers']:.1f} ms/step), PostgreSQL "
          f"backends of the bench {cpu['postgres_bench']:.2f} cores ({per_step['postgres_bench']:.1f} ms/step), "
          f"all postgres processes {cpu['postgres_all']:.2f}, anything else {cpu['other']:.2f}; machine busy "
          f"{cpu['machine_busy']:.2f} of {os.cpu_count()} cores")
    if result["errors"]:
        print(f"  {result['errors']} failed step writes; the first:\n{result['first_error']}")


def run(phones=1000, hosts=10, seconds=30, warmup_s=5.0, phone_time_s=2.0, repeat_share=0.2, db_slots=4,
        verbose=True) -> dict:
    """Both passes on a fresh database; returns the figures of the last line and both passes."""
    url = os.environ.get("BENCH_WRITES_DATABASE_URL", DEFAULT_DATABASE_URL)
    var = Path(tempfile.mkdtemp(prefix="bench-writes-"))
    env = dict(os.environ, DATABASE_URL=url, FLYWHEEL_VAR_DIR=str(var), MEDIA_ROOT=str(var / "media"),
               FLYWHEEL_KEY_PREFIX=f"benchwrites{os.getpid()}:", DJANGO_SETTINGS_MODULE="config.settings",
               PYTHONPATH=str(ROOT), LOG_LEVEL="WARNING")
    recreate_database(url)
    try:
        subprocess.run([sys.executable, __file__, "--prepare", str(var), str(phones), str(hosts)], cwd=ROOT,
                       env=env, check=True)
        if verbose:
            print(describe_frames(var / "frames"))
        if os.environ.get("BENCH_WRITES_TRY_SQL"):  # a schema change, measured before its migration is written
            with psycopg.connect(url, autocommit=True) as bench:
                bench.execute(os.environ["BENCH_WRITES_TRY_SQL"])
        passes = {"saturated": measure("saturated", var, env, url, hosts, seconds, warmup_s, 0.0, repeat_share,
                                       db_slots)}
        # The latency at a rate this machine sustains: 70% of the saturated pass's, or the phones'
        # own pace if that is slower.
        pace = max(phone_time_s, phones / max(0.7 * passes["saturated"]["step_writes_per_s"], 1e-6))
        passes["paced"] = measure("paced", var, env, url, hosts, seconds, warmup_s, pace, repeat_share, db_slots)
        if verbose:
            report(passes["saturated"], phones, hosts, db_slots)
            print(f"paced at one step per {pace:.0f} s per phone ({phones / pace:.1f} steps/s offered):")
            report(passes["paced"], phones, hosts, db_slots)
    finally:
        recreate_database(url, drop_only=True)
        shutil.rmtree(var, ignore_errors=True)
    saturated = passes["saturated"]["cpu_ms_per_step"]
    return {"step_writes_per_s": passes["saturated"]["step_writes_per_s"],
            "write_p95_ms": passes["paced"]["write_p95_ms"], "host_cpu_ms_per_step": saturated["workers"],
            "db_cpu_ms_per_step": saturated["postgres_bench"],
            "connections": max(passes[label]["connections"] for label in passes),
            "phones": phones, "hosts": hosts, **passes}


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--prepare":
        return prepare(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--phones", type=int, default=1000)
    parser.add_argument("--hosts", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--phone-time", type=float, default=2.0, help="seconds a phone spends between writes (paced)")
    parser.add_argument("--repeat-share", type=float, default=0.2, help="share of steps that see the same frame again")
    parser.add_argument("--db-slots", type=int, default=4, help="database connections per host")
    args = parser.parse_args()
    result = run(args.phones, args.hosts, args.seconds, args.warmup, args.phone_time, args.repeat_share, args.db_slots)
    # What these costs project for a farm whose hosts and database have cores of their own.
    host_steps = 1000 / max(result["host_cpu_ms_per_step"], 1e-6)
    print(f"capacity: a host core writes {host_steps:.0f} steps/s ({host_steps * args.phone_time:.0f} phones at one "
          f"step per {args.phone_time:g} s); a database core {1000 / max(result['db_cpu_ms_per_step'], 1e-6):.0f} steps/s")
    print(f"writes: step_writes_per_s={result['step_writes_per_s']:.1f} write_p95_ms={result['write_p95_ms']:.0f} "
          f"host_cpu_ms_per_step={result['host_cpu_ms_per_step']:.1f} "
          f"db_cpu_ms_per_step={result['db_cpu_ms_per_step']:.1f} connections={result['connections']} "
          f"phones={args.phones} hosts={args.hosts}")


if __name__ == "__main__":
    main()
