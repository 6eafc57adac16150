"""Multi-host rehearsal (issue #18): two phone hosts in Linux network namespaces, one run across their
8 phones, one host's link cut mid-run and restored.

Root namespace: PostgreSQL and Redis (the machine's own, reached by the hosts through a relay on
each veth link: they listen on loopback only), the `central` role (web + beat) and the `worker`
role. Each namespace `fw-host<i>`: the `phone-host` role with its own virtual farm of 4 phones on
the namespace's own loopback (an ADB server never listens beyond its host). Mid-run host 1's link
goes down: its leases expire on the database's clock, its interrupted trajectories are routed and
the remaining work finishes on host 0. Then the link comes back and host 1 rejoins (heartbeat,
discovery, health) without a restart.

Needs root (ip netns) and PostgreSQL (DATABASE_URL; a fresh database `flywheel_multihost` is made
on that server). Prints one last line:
    multihost: hosts=2 phones=8 completed= total= double_leases= recovery_s= rejoin_s=
"""
import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parent.parent
PYTHON = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() else sys.executable
DB_NAME = "flywheel_multihost"
HOSTS = 2
PHONES_PER_HOST = 4
SUBNET = "10.77.{i}"
CUT_HOST = 1


def sh(*argv, check=True):
    return subprocess.run(argv, check=check, capture_output=True, text=True)


def netns_allowed() -> str:
    """'' when this machine can make network namespaces, else why not."""
    if os.geteuid() != 0:
        return "not root"
    if not shutil.which("ip"):
        return "no `ip` (iproute2)"
    probe = f"fw-probe-{os.getpid()}"
    made = sh("ip", "netns", "add", probe, check=False)
    if made.returncode:
        return f"ip netns add refused: {made.stderr.strip()}"
    sh("ip", "netns", "del", probe, check=False)
    return ""


class Network:
    """Namespaces fw-host<i>, each linked to the root namespace by a veth pair fwh<i>r ↔ fwh<i>n."""

    def __init__(self, hosts):
        self.hosts = hosts

    def root_ip(self, i):
        return f"{SUBNET.format(i=i + 1)}.1"

    def up(self):
        self.down()
        for i in range(self.hosts):
            ns, root_end, ns_end = f"fw-host{i}", f"fwh{i}r", f"fwh{i}n"
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", root_end, "type", "veth", "peer", "name", ns_end)
            sh("ip", "link", "set", ns_end, "netns", ns)
            sh("ip", "addr", "add", f"{self.root_ip(i)}/24", "dev", root_end)
            sh("ip", "link", "set", root_end, "up")
            sh("ip", "-n", ns, "addr", "add", f"{SUBNET.format(i=i + 1)}.2/24", "dev", ns_end)
            sh("ip", "-n", ns, "link", "set", ns_end, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")

    def set_link(self, i, state):
        sh("ip", "link", "set", f"fwh{i}r", state)
        if state == "up":  # the root end's address route comes back with the link
            sh("ip", "addr", "replace", f"{self.root_ip(i)}/24", "dev", f"fwh{i}r", check=False)

    def down(self):
        for i in range(self.hosts):
            sh("ip", "link", "del", f"fwh{i}r", check=False)
            sh("ip", "netns", "del", f"fw-host{i}", check=False)


class Relay:
    """TCP relays in the root namespace: <veth address>:port → 127.0.0.1:port (PostgreSQL and Redis
    listen on loopback only here, as they should; a real deployment opens them to the hosts' network
    with passwords and TLS instead)."""

    def __init__(self, listen_ips, ports):
        self.listen_ips, self.ports = listen_ips, ports
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()

    async def _pipe(self, reader, writer):
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def _serve(self):
        def handler_for(port):
            async def handle(reader, writer):
                try:
                    upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", port)
                except OSError:
                    writer.close()
                    return
                await asyncio.gather(self._pipe(reader, upstream_writer), self._pipe(upstream_reader, writer))
            return handle
        for ip in self.listen_ips:
            for port in self.ports:
                await asyncio.start_server(handler_for(port), ip, port)
        self.ready.set()

    def start(self):
        def run():
            asyncio.set_event_loop(self.loop)
            self.loop.run_until_complete(self._serve())
            self.loop.run_forever()
        threading.Thread(target=run, daemon=True, name="relay").start()
        if not self.ready.wait(10):
            raise RuntimeError("the relay did not start")


def database_url_for(base_url, host=None, name=DB_NAME):
    parsed = urlparse(base_url)
    netloc = parsed.netloc
    if host:
        credentials, _, location = netloc.rpartition("@")
        port = location.rpartition(":")[2] if ":" in location else "5432"
        netloc = f"{credentials + '@' if credentials else ''}{host}:{port}"
    return urlunparse(parsed._replace(netloc=netloc, path=f"/{name}"))


def fresh_database(base_url):
    import psycopg

    with psycopg.connect(database_url_for(base_url, name="postgres"), autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{DB_NAME}"')


def redis_url_for(base_url, host):
    parsed = urlparse(base_url)
    credentials, _, location = parsed.netloc.rpartition("@")
    port = location.rpartition(":")[2] if ":" in location else "6379"
    return urlunparse(parsed._replace(netloc=f"{credentials + '@' if credentials else ''}{host}:{port}"))


def start_role(role, env, log_path, netns=None):
    argv = [PYTHON, str(ROOT / "scripts" / "up.py"), role]
    if netns:
        argv = ["ip", "netns", "exec", netns, *argv]
    return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=open(log_path, "wb"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def wait(predicate, timeout, what, processes=()):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name, process in processes:
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited with {process.returncode} while waiting for {what}")
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise TimeoutError(f"timed out waiting for {what}")


def overlapping_leases(Lease):
    """Two leases on one phone whose lifetimes overlap: two holders could both have acted."""
    count, previous = 0, {}
    for lease in Lease.objects.order_by("device_id", "acquired_at"):
        before = previous.get(lease.device_id)
        end = before and (before.released_at or before.expires_at)
        if before and end > lease.acquired_at:
            count += 1
        previous[lease.device_id] = lease
    return count


def rehearse(args, workdir):
    base_db = os.environ["DATABASE_URL"]
    base_redis = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    fresh_database(base_db)
    network = Network(HOSTS)
    network.up()
    processes = []
    try:
        Relay([network.root_ip(i) for i in range(HOSTS)],
              [urlparse(base_db).port or 5432, urlparse(base_redis).port or 6379]).start()
        common = {
            **os.environ, "PYTHONUNBUFFERED": "1", "SECRET_KEY": "multihost-rehearsal", "FLYWHEEL_KEY_PREFIX": f"multihost{os.getpid()}:",
            "MEDIA_ROOT": str(workdir / "media"),  # shared storage (S3 or a network filesystem in a real farm)
            "COLLECTION_LEASE_SECONDS": str(args.lease_s), "PHONE_HOST_STALE_S": str(args.lease_s),
            "PHONE_HOST_HEARTBEAT_S": "2", "WORKER_CONCURRENCY": "1", "ECDM_AUTOMATIC": "0", "ECDM_REPLAY": "0",
            "ADB_SERVERS": ""}
        central_env = {**common, "DATABASE_URL": database_url_for(base_db), "REDIS_URL": base_redis,
                       "FLYWHEEL_VAR_DIR": str(workdir / "central"), "WEB_PORT": str(args.web_port),
                       "SEED_FARM_TASKS": "1"}
        os.environ.update({key: central_env[key] for key in (
            "DATABASE_URL", "REDIS_URL", "FLYWHEEL_KEY_PREFIX", "ADB_SERVERS", "COLLECTION_LEASE_SECONDS",
            "PHONE_HOST_STALE_S", "SECRET_KEY", "MEDIA_ROOT")})
        os.environ["FLYWHEEL_VAR_DIR"] = str(workdir / "rehearsal")
        started = time.monotonic()
        processes.append(("central", start_role("central", central_env, workdir / "central.log")))

        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
        sys.path.insert(0, str(ROOT))
        import django
        django.setup()
        from django.db import connection
        from django.db.models import Q
        from django.db.models.functions import Now

        from devices.models import Device, Lease, PhoneHost, WorkItem
        from flywheel.collection.launch import launch_run
        from flywheel.models import CollectionRun, Query, Trajectory

        def migrated():
            try:
                return Query.objects.exists()
            except Exception:
                connection.close()
                return False
        wait(migrated, 600, "the central role to migrate and seed", processes)
        processes.append(("worker", start_role("worker", {**central_env, "FLYWHEEL_VAR_DIR": str(workdir / "worker")},
                                               workdir / "worker.log")))
        names = [f"host-{i}" for i in range(HOSTS)]
        for i, name in enumerate(names):
            host_env = {**common, "DATABASE_URL": database_url_for(base_db, host=network.root_ip(i)),
                        "REDIS_URL": redis_url_for(base_redis, network.root_ip(i)), "PHONE_HOST_NAME": name,
                        "ADB_SERVER": "127.0.0.1:15037", "FARM_DEVICES": str(PHONES_PER_HOST),
                        "FLYWHEEL_VAR_DIR": str(workdir / name)}
            processes.append((name, start_role("phone-host", host_env, workdir / f"{name}.log", netns=f"fw-host{i}")))
        wait(lambda: Device.objects.filter(adb_server__in=names, status="idle").count() == HOSTS * PHONES_PER_HOST
             and PhoneHost.objects.filter(name__in=names).count() == HOSTS, 300, "8 idle phones on 2 hosts", processes)
        print(f"multihost: {HOSTS} hosts, {HOSTS * PHONES_PER_HOST} phones up after {time.monotonic() - started:.0f} s",
              flush=True)

        run = launch_run("automatic", {"limit": args.items}, config={"phones": HOSTS * PHONES_PER_HOST, "max_steps": 12})
        kind = f"collect:run:{run.pk}"
        cut_devices = set(Device.objects.filter(adb_server=names[CUT_HOST]).values_list("pk", flat=True))
        # The cut falls while host 1 is mid-rollout (a trajectory running on its phones), so the
        # recovery path is what the rehearsal exercises, not only the judging of ended rollouts.
        def where_the_run_stood(when):  # for a CI log that outlives the work folder
            items = sorted(WorkItem.objects.filter(kind=kind).values_list("status", "device__adb_server"))
            rollouts = sorted(Trajectory.objects.filter(run=run).values_list("status", "device__adb_server"))
            print(f"multihost: {when} the run was {CollectionRun.objects.get(pk=run.pk).status}; "
                  f"items {items}; trajectories {rollouts}", flush=True)

        def ready_for_the_cut():
            now = CollectionRun.objects.get(pk=run.pk)
            if now.status == "done":
                raise TimeoutError("the run ended before host 1 was mid-rollout")  # no wait can help
            return (now.completed >= args.cut_after
                    and Trajectory.objects.filter(run=run, device_id__in=cut_devices, status="running").exists())

        try:
            wait(ready_for_the_cut, 600, f"{args.cut_after} items done and host 1 busy", processes)
        except TimeoutError:
            where_the_run_stood("waiting for the cut,")
            raise
        held = {item.pk: item.device_id for item in WorkItem.objects.filter(
            kind=kind, status="assigned", device_id__in=cut_devices)}
        with connection.cursor() as cursor:
            cursor.execute("SELECT now()")  # the database's clock, as trajectories are stamped
            cut_at = cursor.fetchone()[0]
        network.set_link(CUT_HOST, "down")
        print(f"multihost: link of {names[CUT_HOST]} down with {len(held)} items in hand", flush=True)

        try:
            wait(lambda: CollectionRun.objects.get(pk=run.pk).status == "done", args.timeout, "the run to finish",
                 processes)
        except TimeoutError:
            where_the_run_stood("at the timeout")
            raise
        run.refresh_from_db()
        recovery, settled, neither = [], 0, 0
        for item in WorkItem.objects.filter(pk__in=held):
            retaken = Trajectory.objects.filter(pk__in=item.payload.get("trajectories", []),
                                                started_at__gt=cut_at).order_by("started_at").first()
            if retaken:
                recovery.append((retaken.started_at - cut_at).total_seconds())
            elif item.status == "done":  # its trajectory had ended before the cut (it was being judged)
                settled += 1
            else:
                neither += 1
        cut_trajectories = Trajectory.objects.filter(run=run, device_id__in=cut_devices, started_at__lt=cut_at)
        try:  # what the cut-off host had in hand is interrupted and routed by the central side
            wait(lambda: not cut_trajectories.filter(status="running").exists(), 60, "the cut trajectories routed")
        except TimeoutError:
            pass
        unrouted = cut_trajectories.filter(Q(status="running") | Q(destination="")).count()

        network.set_link(CUT_HOST, "up")
        up_at = time.monotonic()
        wait(lambda: Device.objects.filter(adb_server=names[CUT_HOST], status="idle").count() == PHONES_PER_HOST
             and PhoneHost.objects.filter(name=names[CUT_HOST], last_seen__gt=Now() - __import__("datetime").timedelta(
                 seconds=5)).exists(), 180, f"{names[CUT_HOST]} to rejoin", processes)
        rejoin_s = time.monotonic() - up_at
        print(f"multihost: of {len(held)} items host 1 held at the cut, {len(recovery)} were started again on "
              f"host 0 (after {', '.join(f'{s:.0f}' for s in sorted(recovery)) or '-'} s), {settled} were done "
              f"(their trajectory had ended), {neither} neither", flush=True)
        restarted = [name for name, process in processes if process.poll() is not None]
        double = overlapping_leases(Lease)
        trajectories = Trajectory.objects.filter(run=run)
        print(f"multihost: {trajectories.count()} trajectories for {run.total} items "
              f"({trajectories.filter(status='interrupted').count()} interrupted, {unrouted} of those cut off unrouted); "
              f"roles exited: {restarted or 'none'}", flush=True)
        return {"completed": run.completed, "total": run.total, "double_leases": double,
                "recovery_s": max(recovery) if recovery else 0.0, "rejoin_s": rejoin_s, "unrouted": unrouted}
    finally:
        for _name, process in reversed(processes):
            if process.poll() is None:
                try:
                    os.killpg(process.pid, 15)
                except ProcessLookupError:
                    pass
        for _name, process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, 9)
        network.down()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=24, help="work items in the run (24)")
    parser.add_argument("--cut-after", type=int, default=4, help="cut host 1's link once this many are done (4)")
    parser.add_argument("--lease-s", type=int, default=15, help="COLLECTION_LEASE_SECONDS and PHONE_HOST_STALE_S (15)")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--web-port", type=int, default=18650)
    parser.add_argument("--keep", action="store_true", help="keep the logs (printed path)")
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        sys.exit("multihost: needs PostgreSQL: set DATABASE_URL=postgres://user@127.0.0.1:5432/db")
    why_not = netns_allowed()
    if why_not:
        sys.exit(f"multihost: this machine cannot make network namespaces ({why_not})")
    workdir = Path(tempfile.mkdtemp(prefix="multihost-"))
    try:
        result = rehearse(args, workdir)
    except BaseException:
        print(f"multihost: logs in {workdir}", flush=True)
        for log in sorted(workdir.glob("**/*.log")):
            lines = [line for line in log.read_text(errors="replace").splitlines() if "axes.apps" not in line]
            print(f"--- the last lines of {log.relative_to(workdir)}:", *lines[-25:], sep="\n", flush=True)
        raise
    if args.keep:
        print(f"multihost: logs in {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"multihost: hosts={HOSTS} phones={HOSTS * PHONES_PER_HOST} completed={result['completed']} "
          f"total={result['total']} double_leases={result['double_leases']} recovery_s={result['recovery_s']:.1f} "
          f"rejoin_s={result['rejoin_s']:.1f}", flush=True)


if __name__ == "__main__":
    main()
