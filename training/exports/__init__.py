"""Exports of pool snapshots to the files trainers read: chat samples (CPT, SFT) and verl parquet (RL).

Every sample is hashed in its canonical JSON form, so the content hash of a snapshot can be
recomputed from its files alone (training/snapshots.py verify_snapshot).
"""
import hashlib
import json


def canonical_json(value) -> bytes:
    """One spelling of a sample: sorted keys, no spaces, UTF-8 (the data.jsonl line itself)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
