"""Meeting a query's prerequisites before its task (flywheel/rules/prerequisites.py): after the
reset, each recipe that meets one runs its known-path steps through the executor (every input
audited, as the task's own) on a phone whose profile holds the account it needs. What ran is
recorded with the trajectory (Trajectory.setup); a prerequisite no recipe meets, an account the phone
lacks, or a recipe whose step finds no target stops the trajectory as not executable, with the reason.
"""
from __future__ import annotations

from devices.observation import observe
from devices.profiles import unmet_requirements
from flywheel.models import SetupRecipe, Trajectory
from flywheel.policies.teacher_path import path_step_action
from flywheel.rules.prerequisites import Recipe, phone_requirements, resolve
from flywheel.rules.stops import Stop, StopKind

DIRECT = ("open", "system_button", "wait")   # steps that name their whole action


def run_recipe(recipe: Recipe, phone, executor) -> dict:
    """{"recipe", "actions": [...], "ok", "error"}: the steps in order, stopping at the first that fails."""
    done = {"recipe": recipe.key, "actions": [], "ok": True, "error": ""}
    for number, step in enumerate(recipe.steps, 1):
        seen = observe(phone)
        if step["action"] in DIRECT:
            action = {key: value for key, value in step.items() if key != "target"}
        else:
            action = path_step_action(step, seen.hierarchy_xml, (seen.width, seen.height))
        if action is None:
            done.update(ok=False, error=f"step {number}: its target {step.get('target')} is not on the screen")
            return done
        result = executor.execute(action, hierarchy_xml=seen.hierarchy_xml)
        done["actions"].append({"step": number, "action": result.action or action, "ok": result.ok})
        if not result.ok:
            why = f"blocked by the safety audit: {result.reason}" if result.blocked else result.error
            done.update(ok=False, error=f"step {number}: {why}"[:300])
            return done
    return done


def meet(prerequisites: list[str], recipes: list[Recipe], phone, executor, profile: dict | None = None):
    """(record, stop): run the recipes that meet the prerequisites on a freshly reset phone; stop is None
    when they all hold. `profile`: the phone's readiness profile, checked for each recipe's account and
    apps (None: not checked, as for a harness that drives one known phone)."""
    met, unmet = resolve(prerequisites, recipes)
    record = {"prerequisites": list(prerequisites), "recipes": [], "unmet": unmet}
    stop = None
    if unmet:
        stop = Stop(StopKind.PREREQUISITE_UNMET, f"no setup recipe meets: {'; '.join(unmet)}")
    for recipe in met if stop is None else []:
        missing = unmet_requirements(profile, phone_requirements([recipe])) if profile is not None else []
        if missing:
            stop = Stop(StopKind.PREREQUISITE_UNMET, f"{recipe.key}: the phone lacks {', '.join(missing)}")
            break
        done = run_recipe(recipe, phone, executor)
        record["recipes"].append(done)
        if not done["ok"]:
            stop = Stop(StopKind.PREREQUISITE_UNMET, f"{recipe.key} did not run: {done['error']}")
            break
    record["met"] = stop is None
    return record, stop


def prepare(trajectory: Trajectory, phone, executor, device=None) -> Stop | None:
    """Meet the query's prerequisites on the freshly reset phone; None when they hold (or it has none)."""
    prerequisites = list(trajectory.query.prerequisites or [])
    if not prerequisites:
        return None
    record, stop = meet(prerequisites, SetupRecipe.rules(), phone, executor,
                        profile=(device.readiness_profile or {}) if device else None)
    Trajectory.objects.filter(pk=trajectory.pk).update(setup=record)
    trajectory.setup = record
    return stop
