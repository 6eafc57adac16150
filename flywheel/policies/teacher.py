"""The Teacher (§2.5.2 step-level correction; Xiaomi-GUI-0 §3.4 takeover): a stronger model that
rewrites one wrong step from its context, or takes over for a few steps.

Offline by default (GEM / known-path based); an OpenAI-compatible VLM when TEACHER_MODEL_VERSION
names an endpoint model version. The Teacher repairs data; it is not the policy being measured,
so it may use the query's known path and the GEM.

CONTRACT (owned by the Teacher helper; others call only these names):

    @dataclass TeacherContext(goal, history, screenshot, hierarchy_xml, screen_size, wrong_action,
                              foreground, apps, known_path, gem_path, target_pages, step_index)
    @dataclass TeacherAnswer(action, cot, confidence, source, rationale, model_io=None)
    class TeacherFailed(Exception): .reason (str), .model_io (dict | None)
    teacher_for(model_version=None) -> Teacher      # settings.TEACHER_MODEL_VERSION → endpoint, else offline
    Teacher.name: str
    Teacher.correct(ctx: TeacherContext) -> TeacherAnswer      # raises TeacherFailed (timeout, garbage)
    Teacher.propose(state: PolicyState) -> Proposal            # takeover: the Policy protocol
    context_for_step(trajectory, index) -> TeacherContext      # from stored steps; no screenshot → None
    dismissal_action(hierarchy_xml: str) -> dict | None        # the button that closes a pop-up / dialog

Beyond the contract (used by the takeover and the measurement; optional for other callers):
TeacherContext.history_hierarchies (the dumps of the history's steps, oldest first: they let the
Teacher check which known-path step each earlier action really did); Teacher.suggest(ctx) (the
Teacher's own next action, no wrong action to avoid: what the takeover scores a step against);
Teacher.for_query(query) (a Teacher whose propose() also knows the query's known path, GEM path
and target pages, which a PolicyState does not carry); same_choice(a, b, hierarchy_xml).

The offline Teacher lives in teacher_offline.py (known path: teacher_path.py; GEM: teacher_gem.py),
the endpoint Teacher in teacher_endpoint.py; what they share (the contract's types, contexts and
dismissal) in teacher_context.py, whose names this module re-exports.
"""
from __future__ import annotations

import logging

from django.conf import settings

from flywheel.models import ModelVersion
from flywheel.policies.teacher_context import (
    DEFAULT_SCREEN,
    TeacherAnswer,
    TeacherContext,
    TeacherFailed,
    context_for_step,
    context_from_state,
    dismissal_action,
    query_facts,
    same_choice,
)
from flywheel.policies.teacher_endpoint import EndpointTeacher
from flywheel.policies.teacher_offline import OfflineTeacher

__all__ = ["DEFAULT_SCREEN", "TeacherAnswer", "TeacherContext", "TeacherFailed", "context_for_step",
           "context_from_state", "dismissal_action", "query_facts", "same_choice", "teacher_for"]

log = logging.getLogger(__name__)


def teacher_for(model_version=None):
    """The Teacher: the given ModelVersion (or name), else settings.TEACHER_MODEL_VERSION when it
    names an endpoint model version, else the built-in offline Teacher."""
    version = model_version
    if version is None or isinstance(version, str):
        name = version if isinstance(version, str) else settings.TEACHER_MODEL_VERSION
        version = None
        if name:
            version = ModelVersion.objects.filter(name=name).first()
            if version is None:
                log.warning("TEACHER_MODEL_VERSION %r names no model version: the offline Teacher answers", name)
    if version is not None and version.kind == ModelVersion.Kind.ENDPOINT and version.endpoint_url:
        return EndpointTeacher.from_model_version(version)
    return OfflineTeacher()
