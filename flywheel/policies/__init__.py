"""Policies propose the next reasoning + action + confidence for a state, behind one interface.

    policy = policy_for(model_version)        # None → the built-in offline policy
    proposal = policy.propose(state)          # Proposal, or PolicyError (with model_io kept)
"""
from flywheel.models import ModelVersion
from flywheel.policies.base import Policy, PolicyError, PolicyState, Proposal
from flywheel.policies.compact import CompactPolicy
from flywheel.policies.endpoint import EndpointPolicy, check_endpoint_health
from flywheel.policies.offline import OfflinePolicy

OFFLINE_POLICY_NAME = "offline-rules-v1"


def default_policy_version():
    """The built-in offline policy's model version (created on first use)."""
    version, _ = ModelVersion.objects.get_or_create(name=OFFLINE_POLICY_NAME,
                                                    defaults={"kind": ModelVersion.Kind.OFFLINE})
    return version


def unservable_reason(model_version) -> str:
    """Why the version cannot act on a phone ("" when it can): a trained checkpoint is not served yet;
    a step reward model rates steps and never acts."""
    if model_version is not None and not model_version.is_policy:
        return f"{model_version.name} is a {model_version.get_kind_display().lower()}: it rates steps, it does not act"
    if model_version is not None and model_version.kind == ModelVersion.Kind.CHECKPOINT:
        return (f"{model_version.name} is a trained checkpoint that is not served yet: serve it with the vLLM "
                "recipe on its model page and register its endpoint")
    return ""


def policy_for(model_version=None, line: str = "") -> Policy:
    """The policy of a model version; on the RL line (`line`) a compact or endpoint policy samples its G
    rollouts (sampling["rl_temperature"], default 0.7) so a group can disagree, as GRPO's groups must;
    an endpoint also returns each token's log-probability there."""
    if model_version is None or model_version.kind == ModelVersion.Kind.OFFLINE:
        return OfflinePolicy()
    if model_version.kind == ModelVersion.Kind.COMPACT:
        if not model_version.artifact:
            raise PolicyError(f"{model_version.name} is a compact policy without an artifact directory")
        temperature = float((model_version.sampling or {}).get("rl_temperature", 0.7)) if line == "rl" else 0.0
        return CompactPolicy(model_version.artifact, name=model_version.name, temperature=temperature)
    if unservable_reason(model_version):
        raise PolicyError(unservable_reason(model_version))
    return EndpointPolicy.from_model_version(model_version, line=line)


__all__ = ["Policy", "PolicyError", "PolicyState", "Proposal", "EndpointPolicy", "OfflinePolicy",
           "check_endpoint_health", "default_policy_version", "policy_for", "unservable_reason", "OFFLINE_POLICY_NAME"]
