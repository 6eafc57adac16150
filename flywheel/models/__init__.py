"""The data engine's records (DESIGN.md, Core data). Split by domain; import from here."""
from .catalog import App, Edge, FunctionNode, GemPage
from .queries import Query, QueryApp, QueryFunction
from .runs import CollectionRun, ModelVersion
from .trajectories import Step, Trajectory
from .judging import Adjudication, Attribution, Repair, Verdict, Vote
from .pools import CptEntry, RlQueryEntry, RlRollout, SftEntry

__all__ = [
    "App", "Edge", "FunctionNode", "GemPage", "Query", "QueryApp", "QueryFunction", "CollectionRun", "ModelVersion",
    "Step", "Trajectory", "Adjudication", "Attribution", "Repair", "Verdict", "Vote",
    "CptEntry", "RlQueryEntry", "RlRollout", "SftEntry",
]
