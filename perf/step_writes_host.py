"""One phone host of perf/step_writes.py: a worker process driving its phones on threads, each
step written through the product's step recorder. Run by that script, not by hand.

    python perf/step_writes_host.py RUN_DIR HOST_INDEX

The phones are stand-ins: a step's screen and dump come from frames the virtual farm rendered,
its action from that screen's elements, its proposal from a policy that answers at once and its
result from an executor that reports what the real one reports for an action that ran.
"""
import json
import random
import struct
import sys
import threading
import time
import traceback
import zlib
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import django  # settings come from the environment the orchestrator set

django.setup()

from django.db import connection

from devices.actions import normalize_action
from devices.db_pool import release_connection
from devices.executor import ActionResult
from devices.models import Device
from devices.observation import Observation
from devices.uitree import all_nodes, parse_hierarchy
from flywheel.blobs import store_blob
from flywheel.collection import recorder
from flywheel.collection.step_writer import batched_step_writes
from flywheel.models import CptEntry, Line, Query, Step, Trajectory
from flywheel.policies.base import Proposal
from flywheel.policies.protocol import HistoryEntry, describe_action, format_output, history_text, system_prompt
from flywheel.pools.cpt import note_cleaned_step
from perf.step_writes import host_address

SCREENSHOTS_K = 5          # the collection default (CollectionConfig.screenshots_k)
STEPS_PER_TRAJECTORY = (6, 20)
SYSTEM_PROMPT = system_prompt()


# -- inputs --------------------------------------------------------------------------------------

def load_frames(folder: Path) -> dict[int, list[dict]]:
    """The farm's rendered screens by device profile, with the points an agent could act on."""
    frames: dict[int, list[dict]] = {}
    for meta in json.loads((folder / "frames.json").read_text()):
        xml = (folder / meta["xml"]).read_text()
        nodes = [node for node in all_nodes(parse_hierarchy(xml)) if node.clickable and node.area]
        frames.setdefault(meta["profile"], []).append({
            **meta, "png": (folder / meta["png"]).read_bytes(), "xml": xml,
            "targets": [(list(node.center), node.all_text()[:60], node.describe()) for node in nodes]})
    return frames


def recaptured(png: bytes, tag: str) -> bytes:
    """The same pixels with a text chunk after the PNG header: new bytes (a phone's next capture
    of a screen differs, if only by its clock) without paying to encode a frame."""
    data = b"Comment\x00" + tag.encode()
    chunk = struct.pack(">I", len(data)) + b"tEXt" + data + struct.pack(">I", zlib.crc32(b"tEXt" + data))
    return png[:33] + chunk + png[33:]


class BenchPhone:
    """A phone's screens and the agent's choices on them; trajectories of 6 to 20 steps."""

    def __init__(self, device, frames, queries, seed, repeat_share):
        self.device, self.frames, self.queries = device, frames, queries
        self.rng = random.Random(seed)
        self.repeat_share = repeat_share
        self.frame = self.rng.choice(frames)
        self.png, self.xml, self.captures = self.frame["png"], self.frame["xml"], 0
        self.trajectory, self.index, self.length = None, 0, 0

    def observe(self) -> Observation:
        # A share of steps see the very same frame again (an action that changed nothing, the home
        # screen a reset left the phone on).
        if self.rng.random() >= self.repeat_share:
            self.frame = self.rng.choice([f for f in self.frames if f is not self.frame] or self.frames)
            self.captures += 1
            tag = f"{self.device.serial}:{self.captures}"
            self.png, self.xml = recaptured(self.frame["png"], tag), self.frame["xml"] + f"<!-- {tag} -->"
        package = self.frame["package"]
        shot, dump = self.rng.randint(180, 420), self.rng.randint(300, 900)
        return Observation(png=self.png, hierarchy_xml=self.xml, width=self.frame["width"],
                           height=self.frame["height"],
                           foreground={"package": package, "activity": f"{package}/.MainActivity",
                                       "activity_stack": [f"{package}/.MainActivity",
                                                          "com.android.launcher3/.Launcher"]},
                           timings={"screencap_ms": shot, "dump_ms": dump, "observe_ms": shot + dump + 40})

    def decide(self, last: bool = False) -> tuple[Proposal, dict | None]:
        """The proposal (five-tag CoT, an action on this screen; terminate at the `last` step) and
        the element it acts on."""
        rng, frame = self.rng, self.frame
        (point, label, element) = rng.choice(frame["targets"]) if frame["targets"] else (
            [frame["width"] // 2, frame["height"] // 2], "", None)
        roll = rng.random()
        if last:
            action, element = {"action": "terminate", "status": "success", "answer": ""}, None
        elif roll < 0.62:
            action = {"action": "click", "point": point}
        elif roll < 0.74:
            action, element = {"action": "swipe", "direction": rng.choice(["up", "down"])}, None
        elif roll < 0.80:
            action = {"action": "type", "text": rng.choice(["milk", "Wi-Fi", "dinner at 7"]), "point": point}
        elif roll < 0.85:
            action, element = {"action": "system_button", "button": "back"}, None
        elif roll < 0.90:
            action, element = {"action": "wait", "seconds": 2}, None
        elif roll < 0.93:
            action, element = {"action": "take_notes", "text": f"Seen: {label or 'the list'}"}, None
        elif roll < 0.97:
            action = {"action": "long_press", "point": point}
        else:
            action, element = {"action": "open", "app": frame["package"].rsplit(".", 1)[-1]}, None
        texts = ", ".join(t[1] for t in frame["targets"][:6] if t[1])
        cot = {"Observation": f"The {frame['package']} screen shows {texts or 'a list'}.",
               "Reflection": "" if rng.random() < 0.8 else "The last action did not change the screen.",
               "Plan": "Find the setting the goal names, open it and change it, then confirm.",
               "Decision": describe_action(action, label or None), "Memory": ""}
        return Proposal(cot=cot, action=action, confidence=round(rng.uniform(0.5, 0.99), 3)), element


def endpoint_record(goal: str, history, screenshots, proposal: Proposal) -> dict:
    """The request/response record an endpoint policy keeps as a step's model_io (images redacted)."""
    # Each image as the endpoint records it: a 64-digit label (a cheap stand-in for its sha256).
    images = [{"type": "image_url", "image_url": {"url": f"sha256:{zlib.crc32(png[:4096]):064x}"}}
              for png in screenshots]
    output = format_output(proposal.cot, proposal.action)
    return {"url": "http://vllm:8000/v1/chat/completions",
            "request": {"model": "bench", "temperature": 0.0, "max_tokens": 512, "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": [{"type": "text", "text": f"Goal: {goal}\n\nHistory:\n"
                                                                      f"{history_text(history)}"}, *images]}]},
            "attempts": [{"attempt": 1, "latency_ms": 900, "status": 200, "bytes": len(output) + 400}],
            "response": {"choices": [{"message": {"role": "assistant", "content": output}}],
                         "usage": {"prompt_tokens": 5200, "completion_tokens": 180}},
            "parse_notes": []}


class AnswersAtOnce:
    """The policy: the step's proposal at once, with the record an endpoint keeps."""

    name = "bench-endpoint"

    def __init__(self, proposal: Proposal):
        self.proposal = proposal

    def propose(self, state) -> Proposal:
        self.proposal.model_io = endpoint_record(state.goal, state.history, state.screenshots, self.proposal)
        return self.proposal


class ExecutorWithoutPhone:
    """What ActionExecutor.execute returns for an action that ran: the normalized action, the
    element it hit, the audit and phone times of the virtual farm."""

    def __init__(self, size, element, rng):
        self.size, self.element, self.rng = size, element, rng

    def window_size(self):
        return self.size

    def execute(self, action, hierarchy_xml=None) -> ActionResult:
        normalized = normalize_action(action, *self.size)
        result = ActionResult(ok=True, action=normalized, note=normalized.get("note", ""), element=self.element)
        name = normalized["action"]
        if name == "open":
            normalized["package"] = f"com.example.{action['app']}"
        elif name == "take_notes":
            result.control = {"kind": "take_notes", "text": normalized["text"]}
        elif name == "terminate":
            result.control = {"kind": "terminate", "status": normalized["status"], "answer": ""}
        audit_ms, execute_ms = self.rng.randint(2, 12), self.rng.randint(150, 900)
        result.timings = {"audit": audit_ms, "execute": execute_ms, "total": audit_ms + execute_ms + 1}
        return result


def start_mid_trajectory(phones: list[BenchPhone]) -> None:
    """Each phone starts at a random point of a trajectory whose earlier steps are stored already
    (in bulk, before the clock starts), as a running farm's phones are anywhere in theirs: a step
    reads its history and the previous CPT sample, which grow with its index."""
    steps = []
    for phone in phones:
        phone.length = phone.rng.randint(*STEPS_PER_TRAJECTORY)
        phone.index = phone.rng.randrange(phone.length)
        phone.trajectory = Trajectory.objects.create(query=phone.rng.choice(phone.queries), device=phone.device,
                                                     line=Line.AUTOMATIC, status=Trajectory.Status.RUNNING)
        history = []
        for index in range(phone.index):
            phone.frame = phone.rng.choice(phone.frames)
            proposal, _ = phone.decide()
            action = normalize_action(proposal.action, phone.frame["width"], phone.frame["height"])
            steps.append(Step(
                trajectory=phone.trajectory, index=index, screenshot=store_blob(phone.frame["png"], "png"),
                hierarchy=store_blob(phone.frame["xml"].encode(), "xml"), foreground_package=phone.frame["package"],
                cot=proposal.cot, proposed_action=proposal.action, executed_action=action,
                confidence=proposal.confidence, audit={"blocked": False, "cpt": "accepted"},
                model_io=endpoint_record(phone.trajectory.query.text, history, [phone.frame["png"]] * min(index + 1, 5),
                                         proposal),
                timings={"observe_ms": 700, "propose_ms": 900, "execute_ms": 500,
                         "screen": [phone.frame["width"], phone.frame["height"]]}))
            history.append(HistoryEntry(cot=proposal.cot, action=action))
        phone.png, phone.xml = phone.frame["png"], phone.frame["xml"]
    Step.objects.bulk_create(steps, batch_size=500)
    samples = CptEntry.objects.bulk_create([
        CptEntry(step=step, screenshot=step.screenshot, action=step.executed_action,
                 phash=f"{random.getrandbits(64):016x}") for step in steps
        if step.executed_action["action"] != "wait"], batch_size=500)
    # What a host that has been driving these trajectories knows already: the apps each one's policy
    # sees (read once per trajectory), each one's last CPT sample and its executed steps (noted at
    # its last step).
    last_hash = {sample.step.trajectory_id: sample.phash for sample in samples}
    executed = defaultdict(list)
    for step in steps:
        executed[step.trajectory_id].append(step)
    for phone in phones:
        phone.trajectory.policy_apps, phone.trajectory.policy_app_labels  # noqa: B018 (cached per trajectory)
        if phone.index:
            note_cleaned_step(phone.trajectory.pk, phone.index - 1, last_hash.get(phone.trajectory.pk, ""))
            recorder.note_history(phone.trajectory.pk, phone.index - 1, executed[phone.trajectory.pk])


# -- the write of one step -----------------------------------------------------------------------

def write_step(phone: BenchPhone, observation, proposal, element) -> dict:
    """observe → propose → execute, as the engine persists them: the stages' rows through the host's
    step writer (one batch per transaction), the reads on a connection of the host's pool
    (DATABASE_POOL_SIZE), handed back afterwards as the engine does between steps."""
    statements = []
    started = time.monotonic()  # waits for a pooled connection (the history's read) and the writer count
    with connection.execute_wrapper(lambda execute, sql, *rest: (statements.append(1), execute(sql, *rest))[1]):
        if phone.trajectory is None:
            phone.trajectory = Trajectory.objects.create(
                query=phone.rng.choice(phone.queries), device=phone.device, line=Line.AUTOMATIC,
                status=Trajectory.Status.RUNNING)
            statements.clear()  # once per trajectory, not a step write
            started = time.monotonic()
        step = recorder.record_observation(phone.trajectory, phone.index, observation)
        observed = time.monotonic()
        recorder.propose(step, observation, AnswersAtOnce(proposal), k=SCREENSHOTS_K)
        proposed = time.monotonic()
        executor = ExecutorWithoutPhone((observation.width, observation.height), element, phone.rng)
        outcome = recorder.execute(step, proposal.action, executor, hierarchy_xml=observation.hierarchy_xml,
                                   step_started=started, claim=False)
    done = time.monotonic()
    if outcome.ends:
        Trajectory.objects.filter(pk=phone.trajectory.pk).update(status=Trajectory.Status.COMPLETED,
                                                                 stop_kind=outcome.stop.kind,
                                                                 stop_reason=outcome.stop.detail)
    release_connection()
    return {"end": time.time(), "write_ms": (done - started) * 1000,
            "observe_ms": (observed - started) * 1000, "propose_ms": (proposed - observed) * 1000,
            "execute_ms": (done - proposed) * 1000, "statements": len(statements),
            "cpt": step.audit.get("cpt", "")}


def drive(phone: BenchPhone, phone_time_s, until, records, errors):
    """One phone's thread: between two writes it spends `phone_time_s` (±20%) on the phone and the
    model; 0 writes as fast as the host allows. The phones start spread over one such time, as a
    running farm's are."""
    delay = phone_time_s * phone.rng.random()
    while True:
        if delay:
            time.sleep(delay)
        if time.time() >= until:
            break
        delay = phone_time_s * phone.rng.uniform(0.8, 1.2)
        if phone.trajectory is None:
            phone.index, phone.length = 0, phone.rng.randint(*STEPS_PER_TRAJECTORY)
        observation = phone.observe()
        proposal, element = phone.decide(last=phone.index == phone.length - 1)
        try:
            records.append(write_step(phone, observation, proposal, element))
        except Exception:
            errors.append(traceback.format_exc())
            connection.close()  # a failed write's connection goes back too
            phone.trajectory = None
            continue
        phone.index += 1
        if phone.index >= phone.length:
            phone.trajectory = None


def main(run_dir: Path, index: int):
    params = json.loads((run_dir / "params.json").read_text())
    frames = load_frames(Path(params["frames"]))
    devices = list(Device.objects.filter(adb_server=host_address(index)).order_by("serial"))
    queries = list(Query.objects.all())
    phones = [BenchPhone(device, frames[n % len(frames)], queries, f"{params['seed']}:{device.serial}",
                         params["repeat_share"]) for n, device in enumerate(devices)]
    start_mid_trajectory(phones)
    connection.close()  # the set-up's connection back to the pool
    connection.pool.wait(timeout=60)  # its connections open before the clock starts
    (run_dir / f"ready-{index}").touch()
    while not (run_dir / "go").exists():
        time.sleep(0.05)
    start = float((run_dir / "go").read_text())
    time.sleep(max(0.0, start - time.time()))
    until = start + params["warmup_s"] + params["seconds"]
    records, errors = [], []
    threads = [threading.Thread(target=drive, args=(phone, params["phone_time_s"], until, records, errors),
                                daemon=True) for phone in phones]
    with batched_step_writes() as writer:  # as the product's host driver writes (driver.drive_host)
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    (run_dir / f"host-{index}.json").write_text(json.dumps({"records": records, "errors": errors[:5],
                                                            "error_count": len(errors), "batches": writer.batches,
                                                            "batched_writes": writer.writes,
                                                            "writer_statements": writer.statements}))


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
