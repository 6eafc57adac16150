"""The repair side of the loop (§2.5): cascaded attribution, the ECDM's paths, the human repair
queue's services, counterfactual derivation, and the self-evolution loop.

    attribution.py     attribute(trajectory) → Attribution (Level 1 → 2 → 3, with evidence)
    ecdm.py            process_failure(trajectory_id): attribute, dispatch, start the repair;
                       resolve_rule_flag: a person's answer to a verifier-defect flag
    samples.py         the ECDM-line sample trajectories that enter the SFT pool
    step_correction.py Teacher rewrite of step N, human fallback, prefix replay on a phone
    env_repair.py      "close the pop-up and resume" synthesis for Env_ERROR (§2.4.2)
    rqa.py             retroactive query alignment: Q → Q′ that fits the golden prefix
    counterfactual.py  failure classes, recurrence, adversarial queries → RL pool + generation
    loop.py            the self-evolution loop's rounds and salvage yield
"""
