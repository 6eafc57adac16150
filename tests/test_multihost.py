"""The multi-host rehearsal (perf/multihost.py) where the machine allows it: two phone hosts in
network namespaces, one run across their 8 phones, one host's link cut mid-run and restored."""
import os
import re
import subprocess

import pytest
from django.db import connection

from tests.conftest import BIN, ROOT, free_port, process_env

pytestmark = pytest.mark.django_db


def why_not():
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = subprocess.run(["ip", "netns", "add", f"fw-allowed-{os.getpid()}"], capture_output=True, text=True)
    if probe.returncode:
        return f"this machine refuses `ip netns add`: {probe.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", f"fw-allowed-{os.getpid()}"], capture_output=True)
    if connection.vendor != "postgresql":
        return "the rehearsal's hosts reach PostgreSQL over the network (set DATABASE_URL)"
    return ""


def test_a_run_across_two_phone_hosts_survives_one_host_losing_its_link(network_namespaces):
    reason = why_not()
    if reason:
        pytest.skip(reason)
    env = process_env()
    env.pop("FLYWHEEL_KEY_PREFIX", None)  # the rehearsal keeps its own keys apart
    env["DATABASE_URL"] = os.environ.get("DATABASE_URL", "")  # the server; it makes its own database
    # The short functional version: fewer items and a shorter lease than the measured rehearsal
    # (`python perf/multihost.py`, README Benchmarks), the same cut and the same checks. 16 items on 8
    # phones: two waves, so host 1 is still mid-rollout once 3 are done (with 12, a fast run once ended
    # before the cut could fall).
    done = subprocess.run([str(BIN / "python"), "perf/multihost.py", "--web-port", str(free_port()),
                           "--items", "16", "--cut-after", "3", "--lease-s", "8"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=1200)
    stood = "\n".join(line for line in done.stdout.splitlines() if line.startswith("multihost:"))
    assert done.returncode == 0, stood + "\n" + done.stdout[-3000:] + done.stderr[-3000:]
    last = done.stdout.strip().splitlines()[-1]
    figures = dict(re.findall(r"(\w+)=([\d.]+)", last))
    assert last.startswith("multihost: hosts=2 phones=8"), last
    assert figures["completed"] == figures["total"] and int(figures["total"]) > 0, last
    assert figures["double_leases"] == "0", last
    # The cut host's work started again elsewhere within a lease's life (8 s) and beat's rounds.
    assert float(figures["recovery_s"]) < 60, last
    assert float(figures["rejoin_s"]) < 90, last
    assert "0 of those cut off unrouted" in done.stdout, done.stdout[-2000:]
    assert ", 0 neither" in done.stdout, done.stdout[-2000:]  # every item in hand was collected again or done
