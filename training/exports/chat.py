"""CPT and SFT samples in the multimodal chat format LLaMA-Factory and ms-swift read.

A sample is the protocol's input at one step (§3.1.2) and the step's output as the target:

    system     protocol.system_prompt() (never the schema-guided known path: training sees the goal alone)
    user       the text build_messages() sends the live model at that step (goal, the full text history of
               the earlier executed steps, the device context, the screenshot count), then one "<image>"
               per screenshot: the last K up to and including the step's own, oldest first
    assistant  protocol.format_output(cot, executed action): the five tags and the action, its points in
               the thousandths the system prompt asks for (the executor records pixels)

The text comes from the same build_messages() call with the same inputs the endpoint policy gets
(flywheel/collection/recorder.py policy_state, flywheel/policies/endpoint.py request_body), so an
export cannot drift from the live prompt.
"""
from __future__ import annotations

import io
import json
from collections import OrderedDict
from dataclasses import dataclass, field

from PIL import Image, UnidentifiedImageError

from devices.actions import FIELDS
from flywheel.blobs import read_blob
from flywheel.models import NOT_TRAINING_LABELS
from flywheel.policies.protocol import DEFAULT_COORDS, POINT_FIELDS, HistoryEntry, build_messages, format_output
from training.exports import sha256_hex

IMAGE_PLACEHOLDER = "<image>"
# Who chose a step's action (meta "step_source"): the Teacher during a takeover (a recovery
# demonstration), an ECDM repair (the Teacher's or a person's correction), or the policy; a trainer
# keeps them apart.
TEACHER, REPAIR, POLICY = "teacher", "repair", "policy"


class SkippedSample(Exception):
    """A step that cannot become a sample (e.g. its screenshot is missing or corrupt); says why."""


@dataclass
class ChatSample:
    record: dict                                  # one data.jsonl line: messages, images, meta
    images: dict[str, bytes] = field(default_factory=dict)   # relative path -> PNG bytes
    files: dict[str, bytes] = field(default_factory=dict)    # relative path -> other bytes (the UI dump)


class FrameCache:
    """Screenshots checked by PIL, each read once while it is in use (the K-frame window moves
    along a trajectory); each becomes images/<sha256>.png."""

    def __init__(self, size: int = 256):
        self.size = size
        self._frames: OrderedDict[str, tuple[str, bytes] | SkippedSample] = OrderedDict()

    def get(self, name: str) -> tuple[str, bytes]:
        if name not in self._frames:
            try:
                self._frames[name] = _checked_png(name)
            except SkippedSample as problem:
                self._frames[name] = problem
            if len(self._frames) > self.size:
                self._frames.popitem(last=False)
        self._frames.move_to_end(name)
        frame = self._frames[name]
        if isinstance(frame, SkippedSample):
            raise frame
        return frame


def _checked_png(name: str) -> tuple[str, bytes]:
    try:
        data = read_blob(name)
    except (FileNotFoundError, OSError) as error:
        raise SkippedSample(f"screenshot {name} is missing ({type(error).__name__})")
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.verify()
        with Image.open(io.BytesIO(data)) as image:  # verify() leaves the image unusable; decode fully
            image.load()
            if image.format != "PNG":  # the files are named .png: re-encode anything else
                out = io.BytesIO()
                image.save(out, "PNG")
                data = out.getvalue()
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as error:
        raise SkippedSample(f"screenshot {name} cannot be read as an image ({error})")
    return f"images/{sha256_hex(data)}.png", data


def history_entry(step) -> HistoryEntry:
    """An executed step as the live line's history sees it (recorder.policy_state)."""
    return HistoryEntry(cot=step.cot or {}, action=step.executed_action,
                        reply=str((step.edit or {}).get("clarify_answer") or ""))


def device_context(step) -> dict:
    """What the endpoint policy passes as context: the foreground package and its top activity."""
    package = step.foreground_package or ""
    top = next((entry for entry in step.activity_stack or []
                if isinstance(entry, str) and entry.startswith(package + "/")), "")
    return {"package": package, "activity": top.split("/", 1)[1] if top else ""}


def target_action(action: dict, png: bytes) -> dict:
    """The executed action as the model is asked to emit it: only the protocol's fields (the executor
    records what it resolved besides: an open's package, a directional swipe's start and end), pixel
    points in thousandths of the screen (the system prompt's unit), so a trained model's output parses
    as the protocol says; the keys in one order ("action" first, "coords" last), whatever order the
    database returns them in."""
    allowed = set(FIELDS.get(action.get("action"), ())) | {"action", "coords"}
    if action.get("action") == "swipe" and action.get("direction"):
        allowed -= {"start", "end"}
    target = {key: value for key, value in action.items() if key in allowed}
    if target.get("coords") == "pixel" and any(name in target for name in POINT_FIELDS):
        width, height = Image.open(io.BytesIO(png)).size
        target["coords"] = DEFAULT_COORDS
        for name in POINT_FIELDS:
            point = target.get(name)
            if isinstance(point, list | tuple) and len(point) == 2:
                target[name] = [min(1000, max(0, round(point[0] * 1000 / width))),
                                min(1000, max(0, round(point[1] * 1000 / height)))]
    ordered = {"action": target.pop("action", None)} if "action" in target else {}
    coords = {"coords": target.pop("coords")} if "coords" in target else {}
    return {**ordered, **dict(sorted(target.items())), **coords}


def step_hierarchy(step) -> tuple[str, bytes]:
    """The step's stored UI dump as hierarchies/<sha256>.xml ("" when none was stored or it is gone):
    what a policy that reads the hierarchy (the compact policy) saw at that step."""
    if not step.hierarchy:
        return "", b""
    try:
        data = read_blob(step.hierarchy.name)
    except (FileNotFoundError, OSError):
        return "", b""
    return f"hierarchies/{sha256_hex(data)}.xml", data


def build_sample(goal: str, earlier: list, step, k: int, frames: FrameCache, meta: dict) -> ChatSample:
    """The sample of `step` given the executed steps before it (`earlier`, in order).

    The screenshots are chosen as policy_state chooses them: the last K-1 earlier executed steps
    (those with a frame) and the step's own, which must exist.
    """
    if step.executed_action is None:
        raise SkippedSample(f"step {step.index} was never executed")
    if not step.screenshot:
        raise SkippedSample(f"step {step.index} has no screenshot")
    window = earlier[-(k - 1):] if k > 1 else []
    chosen = [frames.get(s.screenshot.name) for s in window if s.screenshot]
    chosen.append(frames.get(step.screenshot.name))
    messages = build_messages(goal, [history_entry(s) for s in earlier], [data for _, data in chosen],
                              k=k, coords=DEFAULT_COORDS, known_path=None, context=device_context(step))
    text = messages[1]["content"][0]["text"]
    shown = chosen[-k:]
    assert len(messages[1]["content"]) - 1 == len(shown)
    hierarchy_path, hierarchy = step_hierarchy(step)
    width, height = Image.open(io.BytesIO(chosen[-1][1])).size
    record = {
        "messages": [
            {"role": "system", "content": messages[0]["content"]},
            {"role": "user", "content": text + IMAGE_PLACEHOLDER * len(shown)},
            {"role": "assistant", "content": format_output(step.cot or {},
                                                           target_action(step.executed_action, chosen[-1][1]))},
        ],
        "images": [path for path, _ in shown],
        "meta": {"trajectory": step.trajectory_id, "step": step.index, **meta,
                 "hierarchy": hierarchy_path, "screen": [width, height], "step_source": step_source(step),
                 **explanation_meta(step, chosen[-1][1])},
    }
    return ChatSample(record=record, images=dict(shown), files={hierarchy_path: hierarchy} if hierarchy_path else {})


def explanation_meta(step, png: bytes) -> dict:
    """An ECDM-corrected step's error explanation (flywheel/repair/explanations.py), beside the
    [Reflection] the assistant's output already says: the original action (the protocol's JSON, in the
    target's unit), its error class and level, and who wrote the explanation. Every sample carries the
    key with the same field types (empty for any other step): the HF json loader fixes the columns and
    their types from a file's first 10 MB and refuses a later line that adds a key or changes a type."""
    explanation = (step.edit or {}).get("explanation")
    if not isinstance(explanation, dict):
        return {"error_explanation": dict(NO_EXPLANATION)}
    original = explanation.get("original_action")
    level = explanation.get("level")
    return {"error_explanation": {
        "text": str(explanation.get("text") or ""), "source": str(explanation.get("source") or ""),
        "error_class": str(explanation.get("error_class") or ""),
        "level": level if isinstance(level, int) and not isinstance(level, bool) else 0,
        "original_action": json.dumps(target_action(original, png), ensure_ascii=False)
        if isinstance(original, dict) else ""}}


NO_EXPLANATION = {"text": "", "source": "", "error_class": "", "level": 0, "original_action": ""}


def step_source(step) -> str:
    if step.takeover:
        return TEACHER
    return REPAIR if (step.edit or {}).get("ecdm") else POLICY


def is_training_label(step) -> bool:
    """Neither masked (repetition-to-reflection) nor failed by SFT intake's consistency gate."""
    return not step.label_masked and not step.not_a_training_label


def executed_steps(trajectory) -> list:
    return list(trajectory.steps.filter(executed_action__isnull=False).order_by("index"))


def trajectory_samples(trajectory, k: int, frames: FrameCache, meta: dict, not_labels=frozenset()):
    """SFT: (step, ChatSample or SkippedSample) for each executed step that carries a loss.

    A step with label_masked (repetition-to-reflection), or one SFT intake's consistency gate found
    no training label (§2.3.6; `not_labels`: step indices a gate run for the export found so), gives
    no sample, but its text stays in the history of the steps after it, as it was when they ran.
    """
    steps = executed_steps(trajectory)
    for position, step in enumerate(steps):
        if not is_training_label(step) or step.index in not_labels:
            continue
        try:
            yield step, build_sample(trajectory.query.text, steps[:position], step, k, frames, meta)
        except SkippedSample as problem:
            yield step, problem


def step_sample(step, k: int, frames: FrameCache, meta: dict) -> ChatSample:
    """CPT: the single-step sample of one step, with the same protocol input as SFT."""
    trajectory = step.trajectory
    earlier = list(trajectory.steps.filter(executed_action__isnull=False, index__lt=step.index).order_by("index"))
    return build_sample(trajectory.query.text, earlier, step, k, frames, meta)


def masked_step_count(trajectory) -> int:
    return trajectory.steps.filter(executed_action__isnull=False, label_masked=True).count()


def not_label_step_count(trajectory) -> int:
    """Steps the consistency gate kept out of the labels (a masked one is counted as masked)."""
    return trajectory.steps.filter(executed_action__isnull=False, label_masked=False,
                                   label_gate__in=NOT_TRAINING_LABELS).count()
