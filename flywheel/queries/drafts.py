"""A generated query before it is written: what generation produces and the intake gates judge.

Generation (flywheel/queries/generation/planner.py) makes drafts; the gates (gates.py) judge, polish and
back-tag them; only then is a Query row written, so a rejected draft is stored with its gate and
reason and nothing half-made reaches collection.
"""
from dataclasses import dataclass, field


@dataclass
class QueryDraft:
    text: str
    apps: list[str]                                   # packages, the first is where the task starts
    tier: str                                         # L1 | L2 | L3
    subclass: str                                     # vocabulary.SUBCLASSES
    persona: str                                      # vocabulary.PERSONAS key
    capabilities: list[str] = field(default_factory=list)
    functions: list[int] = field(default_factory=list)   # FunctionNode ids it was generated for
    gem_path: list[int] = field(default_factory=list)    # Edge ids of the known path, in order
    known_path: dict | None = None                    # query-format known_path {"steps": [...]}
    verification: dict = field(default_factory=dict)  # draft spec (terminal checks, milestones)
    labels: dict = field(default_factory=dict)        # relation, slots used, step_depth, ...
    risk: str = "low"
    prerequisites: list[str] = field(default_factory=list)
    origin: str = "offline"                           # offline | llm
    styled: bool = False                              # the persona's style is in the text already (grammar.py)
    gate_results: dict = field(default_factory=dict)  # filled by gates.run_gates
    rejected_by: str = ""                             # "gate1" | "gate2" | "gate3" | ""
    rejection_reason: str = ""

    @property
    def passed(self) -> bool:
        return not self.rejected_by
