"""The data engine's records (DESIGN.md, Core data). Split by domain; import from here."""
from flywheel.models.catalog import App, DevicePrior, Edge, FunctionNode, GemPage
from flywheel.models.exploration import ExplorationRun, GenerationRun, RunStatus
from flywheel.models.judge_sets import JudgeCase, JudgeEvaluation, ScreenKind
from flywheel.models.judging import Adjudication, Attribution, Repair, Verdict, Vote, VoteValue
from flywheel.models.pools import CptEntry, HandbackSample, RlQueryEntry, RlRollout, SftEntry
from flywheel.models.queries import Query, QueryApp, QueryFunction, QueryLocked, Risk, SetupRecipe, Source, Tier
from flywheel.models.repair import CalibrationRound, EvolutionLoop, FailureClass, LoopRound, RuleFlag
from flywheel.models.runs import CollectionRun, ModelVersion
from flywheel.models.summaries import LedgerSnapshot, Tally, TallyMark
from flywheel.models.trajectories import (
    NOT_TRAINING_LABELS,
    Destination,
    LabelGate,
    Line,
    Outcome,
    Step,
    Trajectory,
)

__all__ = [
    "App", "DevicePrior", "Edge", "ExplorationRun", "GenerationRun", "RunStatus", "FunctionNode", "GemPage", "Query", "QueryApp", "QueryLocked", "QueryFunction", "SetupRecipe", "CollectionRun", "ModelVersion",
    "Step", "Trajectory", "Adjudication", "Attribution", "Repair", "Verdict", "Vote",
    "CptEntry", "HandbackSample", "RlQueryEntry", "RlRollout", "SftEntry",
    "CalibrationRound", "JudgeCase", "JudgeEvaluation", "EvolutionLoop", "FailureClass", "LoopRound", "RuleFlag", "LedgerSnapshot", "Tally", "TallyMark",
    # the choices that several tables share
    "Destination", "LabelGate", "Line", "NOT_TRAINING_LABELS", "Outcome", "Risk", "ScreenKind", "Source", "Tier", "VoteValue",
]
