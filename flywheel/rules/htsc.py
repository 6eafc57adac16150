"""Heterogeneous Triple-System Consensus (§2.4.2): the voting rule and where each outcome goes.

Votes and outcomes use the values stored in the database: "true", "false", "env_error",
"abstain" (votes only) and "undetermined" (outcomes only).
"""
TRUE, FALSE, ENV_ERROR, ABSTAIN, UNDETERMINED = "true", "false", "env_error", "abstain", "undetermined"
VOTE_VALUES = (TRUE, FALSE, ENV_ERROR, ABSTAIN)


def htsc_consensus(vote_a: str, vote_b: str, vote_c: str, safety_violation: bool = False) -> str:
    """Stage 1 and stage 3 of HTSC.

    - Safety veto: any system's violation makes the trajectory False, bypassing the vote.
    - A can read the terminal state (did not abstain): A dominates. A failure → False (Env_ERROR
      when A names an environmental cause); A success → True unless B and C both object, then
      Undetermined. "Object" means voting False or Env_ERROR; an abstention is not an objection.
    - A abstains: B and C unanimous → their verdict; anything else → Undetermined.
    """
    for vote in (vote_a, vote_b, vote_c):
        if vote not in VOTE_VALUES:
            raise ValueError(f"unknown vote {vote!r}; expected one of {VOTE_VALUES}")
    if safety_violation:
        return FALSE
    if vote_a != ABSTAIN:
        if vote_a in (FALSE, ENV_ERROR):
            return vote_a
        objections = {vote_b, vote_c} <= {FALSE, ENV_ERROR}
        return UNDETERMINED if objections else TRUE
    if vote_b == vote_c and vote_b != ABSTAIN:
        return vote_b
    return UNDETERMINED


# Every outcome has exactly one destination; nothing is discarded.
OUTCOME_DESTINATIONS = {
    TRUE: "sft",
    FALSE: "ecdm",
    ENV_ERROR: "env_healing",      # self-healing + re-collection, and the ECDM
    UNDETERMINED: "adjudication",
}

ADJUDICATION_OUTCOMES = {"correct": TRUE, "wrong": FALSE, "environment": ENV_ERROR}


def route_outcome(outcome: str) -> str:
    return OUTCOME_DESTINATIONS[outcome]


def route_adjudication(decision: str) -> tuple[str, str]:
    """A person's decision on an Undetermined trajectory → (outcome, destination)."""
    outcome = ADJUDICATION_OUTCOMES[decision]
    return outcome, route_outcome(outcome)
