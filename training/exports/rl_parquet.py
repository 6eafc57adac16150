"""RL queries as the parquet rows verl's RLHFDataset reads.

One row per RL-pool query: data_source, prompt (the system prompt and the goal alone: a rollout
sees no known path), ability, reward_model (the query's verification as the rule's ground truth),
extra_info and images (none: the first screen comes from the phone when the rollout starts).
"""
from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from flywheel.policies.protocol import system_prompt

ABILITY = "gui_agent"

SCHEMA = pa.schema([
    ("data_source", pa.string()),
    ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
    ("ability", pa.string()),
    ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
    ("extra_info", pa.struct([("index", pa.int64()), ("query_id", pa.int64()), ("rl_entry_id", pa.int64()),
                              ("split", pa.string()), ("success_rate", pa.float64())])),
    ("images", pa.list_(pa.struct([("image", pa.string())]))),
])


def goal_text(query) -> str:
    return f"Goal: {query.text}"


def rl_row(entry, index: int) -> dict:
    """The verl row of one RlQueryEntry (its query loaded)."""
    query = entry.query
    return {
        "data_source": f"flywheel/{entry.channel}",
        "prompt": [{"role": "system", "content": system_prompt()},
                   {"role": "user", "content": goal_text(query)}],
        "ability": ABILITY,
        "reward_model": {"style": "rule",
                         "ground_truth": json.dumps(query.verification or {}, sort_keys=True, ensure_ascii=False)},
        "extra_info": {"index": index, "query_id": query.pk, "rl_entry_id": entry.pk, "split": "train",
                       "success_rate": entry.success_rate},
        "images": [],
    }


def write_parquet(rows: list[dict], path) -> None:
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), str(path))


def read_rows(path) -> list[dict]:
    return pq.read_table(str(path)).to_pylist()
