"""Pool snapshots: the exact rows of a pool at one moment, exported to the files a trainer reads.

    create_snapshot(kind, config)  ->  TRAINING_ROOT/snapshots/<id>/
        cpt, sft: data.jsonl + images/ + dataset_info.json + manifest.json (training/exports/chat.py)
        rl:       train.parquet + images/ + manifest.json              (training/exports/rl_parquet.py)

The same pool rows and config give the same content hash: rows in pool-row order, the mixture
seeded (training/rules/mixture.py), images named by their sha256. The content hash is sha256 over,
sample by sample, its canonical JSON line and the sha256 digest of each of its images' bytes (the
digests, not the bytes again, so a verification reads each image file once).
Queries held out for the benchmark (evaluation_only) never enter an export of any kind.
"""
from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path

from django.conf import settings
from django.db import transaction

from flywheel.models import CptEntry, Destination, Line, RlQueryEntry, SftEntry, Trajectory
from flywheel.models.trajectories import GUIDED_LINES
from flywheel.policies.protocol import DEFAULT_K
from training.exports import canonical_json, sha256_hex
from training.exports.chat import (
    IMAGE_PLACEHOLDER,
    TEACHER,
    FrameCache,
    SkippedSample,
    masked_step_count,
    not_label_step_count,
    step_sample,
    trajectory_samples,
)
from training.exports.rl_parquet import read_rows, rl_row, write_parquet
from training.high_frequency_cap import DEFAULT_CAP, cap_high_frequency, validate_cap
from training.models import DataSnapshot
from training.rules.mixture import DEFAULT_KEY, mix, validate_ratios
from training.rules.screen_corpora import validate_corpora
from training.screen_corpora import corpus_samples, stored_frames
from training.single_judge import SINGLE_JUDGE_SOURCE, SYSTEMS, single_judge_rows

log = logging.getLogger(__name__)

SETTINGS = ("sources", "k", "seed", "limit", "counterfactual_queries", "success_judge", "corpora",
            "high_frequency_cap")
MAX_K = 32
RL_STATES = (RlQueryEntry.State.ACTIVE, RlQueryEntry.State.BANKED)
# The sources a mixture may name per kind (RL channels are free text).
KNOWN_SOURCES = {"cpt": set(Line.values), "sft": {*SftEntry.Intake.values, SINGLE_JUDGE_SOURCE}, "rl": None}
EMPTY_POOL = {
    "cpt": "the CPT pool has no entries yet: execute steps on a collection line (every executed step that "
           "passes the CPT cleaning enters the pool), then create the snapshot again",
    "sft": "the SFT pool has no entries yet: verify trajectories (HTSC True, adjudication, ECDM repairs or "
           "semi-automatic verification put them in the pool), then create the snapshot again",
    "rl": "the RL query pool has no active or banked queries: bank Phase 0 queries or admit queries through "
          "rollouts, then create the snapshot again",
}


# -- config ------------------------------------------------------------------------------------------

def validate_config(kind: str, config: dict | None) -> dict:
    """The snapshot settings with their defaults; ValueError naming the first bad key."""
    if kind not in DataSnapshot.Kind.values:
        raise ValueError(f"unknown snapshot kind {kind!r}; use one of {', '.join(DataSnapshot.Kind.values)}")
    config = {} if config is None else config
    if not isinstance(config, dict):
        raise ValueError(f"the snapshot config must be a JSON object, not {type(config).__name__}")
    unknown = sorted(set(config) - set(SETTINGS), key=str)
    if unknown:
        raise ValueError(f"unknown snapshot setting {unknown[0]!r}; the settings are {', '.join(SETTINGS)}")
    sources = validate_ratios(config.get("sources") or {})
    known = KNOWN_SOURCES[kind]
    for source in sources:
        if known is not None and source != DEFAULT_KEY and source not in known:
            raise ValueError(f"sources: {source!r} is not a {kind.upper()} source; "
                             f"use {', '.join(sorted(known))} or {DEFAULT_KEY!r}")
    k = _integer(config.get("k", DEFAULT_K), "k", 1, MAX_K)
    seed = _integer(config.get("seed", 0), "seed", 0, 2**63 - 1)
    limit = config.get("limit")
    limit = None if limit is None else _integer(limit, "limit", 1, None)
    counterfactual = config.get("counterfactual_queries", True)
    if not isinstance(counterfactual, bool):
        raise ValueError(f"counterfactual_queries must be true or false, not {counterfactual!r}")
    judge = config.get("success_judge") or None
    if judge is not None and (kind != DataSnapshot.Kind.SFT or judge not in SYSTEMS):
        raise ValueError(f"success_judge is one of {', '.join(SYSTEMS)} (an SFT snapshot as that judge alone "
                         f"would route it), not {judge!r}" if kind == DataSnapshot.Kind.SFT else
                         "success_judge applies to SFT snapshots only")
    corpora = validate_corpora(config.get("corpora"))  # screen corpora (training/screen_corpora.py)
    if corpora and kind == DataSnapshot.Kind.RL:
        raise ValueError("corpora apply to CPT and SFT snapshots only (an RL snapshot holds queries, not frames)")
    # Trajectories (RL: queries) per high-frequency function (training/high_frequency_cap.py).
    cap = validate_cap(config.get("high_frequency_cap", DEFAULT_CAP))
    return {"sources": sources, "k": k, "seed": seed, "limit": limit, "counterfactual_queries": counterfactual,
            "success_judge": judge, "corpora": corpora, "high_frequency_cap": cap}


def _integer(value, key, low, high):
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{key} must be an integer, not {value!r}")
    if value < low or (high is not None and value > high):
        raise ValueError(f"{key} must be between {low} and {high}" if high is not None else f"{key} must be ≥ {low}")
    return value


# -- the pools ------------------------------------------------------------------------------------------

QUERY_OF_ROW = {"cpt": "step__trajectory__query", "sft": "trajectory__query", "rl": "query"}


def pool_rows(kind: str, limit: int | None, counterfactual_queries: bool = True,
              success_judge: str | None = None, stats: dict | None = None) -> tuple[list, int, int]:
    """(the pool's exportable rows in id order, how many held-out rows were left out, how many rows of
    counterfactual-derived queries were left out — only when `counterfactual_queries` is False).
    `success_judge`: the SFT rows as that judge alone would have routed them (training/single_judge.py;
    what it changed goes to `stats`)."""
    if kind == DataSnapshot.Kind.CPT:
        rows = CptEntry.objects.select_related(QUERY_OF_ROW[kind])
    elif kind == DataSnapshot.Kind.SFT:
        rows = SftEntry.objects.select_related(QUERY_OF_ROW[kind])
    else:
        rows = RlQueryEntry.objects.select_related("query").filter(state__in=RL_STATES)
    held_out = {f"{QUERY_OF_ROW[kind]}__evaluation_only": True}
    excluded = rows.filter(**held_out).count()
    rows = rows.exclude(**held_out).order_by("pk")
    derived = 0
    if not counterfactual_queries:  # an adversarial query targets a failure class (§2.4.3)
        derived_rows = {f"{QUERY_OF_ROW[kind]}__failure_class__isnull": False}
        derived = rows.filter(**derived_rows).count()
        rows = rows.exclude(**derived_rows)
    if success_judge:
        # What routing could pool: a benchmark rollout's destination is its evaluation, never a pool.
        judged = Trajectory.objects.exclude(query__evaluation_only=True).exclude(destination=Destination.BENCHMARK)
        if not counterfactual_queries:
            judged = judged.filter(query__failure_class__isnull=True)
        rows, changed = single_judge_rows(success_judge, rows, judged)
        if stats is not None:
            stats["single_judge"] = changed
    return list(rows[:limit] if limit else rows), excluded, derived


def pool_order(row) -> tuple:
    """Pool rows by id, then the trajectories a single judge added (no pool row) by theirs."""
    return (row.pk is None, row.pk if row.pk is not None else row.trajectory.pk)


def source_of(kind: str, row) -> str:
    return {"cpt": lambda: row.step.trajectory.line, "sft": lambda: row.intake, "rl": lambda: row.channel}[kind]()


# -- building -------------------------------------------------------------------------------------------

def snapshot_directory(snapshot_id: int) -> Path:
    return Path(settings.TRAINING_ROOT) / "snapshots" / str(snapshot_id)


def create_snapshot(kind: str, config: dict | None = None, user=None, name: str = "",
                    background: bool | None = None) -> DataSnapshot:
    """Validate, record the snapshot (building) and export it; ValueError (the config or kind) before
    anything is written. Exported now (returned ready, empty or failed), or — `background`, or by
    default when the pool — or, with screen corpora, the stored frames they are derived from — holds
    more than TRAINING_SNAPSHOT_SYNC_ROWS rows — by a training worker after commit (returned building;
    its page follows it)."""
    config = validate_config(kind, config)
    if background is None:
        limit = settings.TRAINING_SNAPSHOT_SYNC_ROWS
        background = pool_size(kind) > limit or bool(
            config["corpora"] and stored_frames(config["counterfactual_queries"])[:limit + 1].count() > limit)
    with transaction.atomic():
        snapshot = DataSnapshot.objects.create(kind=kind, name=name[:200], config=config,
                                               status=DataSnapshot.Status.BUILDING,
                                               created_by=user if getattr(user, "pk", None) else None)
        if background:
            from training.tasks import build_snapshot_task

            transaction.on_commit(lambda: build_snapshot_task.apply_async((snapshot.pk,), queue="training"))
    return snapshot if background else build_snapshot(snapshot)


def pool_size(kind: str) -> int:
    return {"cpt": CptEntry, "sft": SftEntry, "rl": RlQueryEntry}[kind].objects.count()


def build_snapshot(snapshot: DataSnapshot) -> DataSnapshot:
    """Write a building snapshot's files. Nothing escapes: a failure is recorded on the snapshot."""
    directory = snapshot_directory(snapshot.pk)
    partial = directory.with_name(f"{snapshot.pk}.partial")
    try:
        config = validate_config(snapshot.kind, snapshot.config)
        stats = {}
        rows, held_out, derived = pool_rows(snapshot.kind, config["limit"], config["counterfactual_queries"],
                                            config["success_judge"], stats)
        stats.update(held_out_excluded=held_out, pool_rows=_count_by(snapshot.kind, rows), k=config["k"])
        if not config["counterfactual_queries"]:
            stats["counterfactual_excluded"] = derived
        rows, capped = cap_high_frequency(snapshot.kind, rows, config["high_frequency_cap"], config["seed"])
        if capped:
            stats["high_frequency"] = capped
        if not rows:
            return _finish(snapshot, DataSnapshot.Status.EMPTY, stats=stats, error=EMPTY_POOL[snapshot.kind])
        by_source = {}
        for row in rows:
            by_source.setdefault(source_of(snapshot.kind, row), []).append(row)
        # Pool-row order, a repeated row next to its copies (the sort is stable).
        selected = sorted(mix(by_source, config["sources"], config["seed"]), key=pool_order)
        stats["selected_rows"] = _count_by(snapshot.kind, selected)
        if not selected:
            return _finish(snapshot, DataSnapshot.Status.EMPTY, stats=stats,
                           error="the mixture ratios keep no rows of this pool: raise a ratio above 0 "
                                 f"(pool rows per source: {stats['pool_rows']})")
        shutil.rmtree(partial, ignore_errors=True)
        (partial / "images").mkdir(parents=True)
        export = _export_rl if snapshot.kind == DataSnapshot.Kind.RL else _export_chat
        written = export(snapshot, selected, config, partial)
        stats.update(written["stats"])
        if not written["rows"]:
            shutil.rmtree(partial, ignore_errors=True)
            return _finish(snapshot, DataSnapshot.Status.EMPTY, stats=stats,
                           error=f"no sample could be built from the {len(selected)} selected row(s): "
                                 f"{len(stats.get('skipped', []))} skipped (see the reasons), the rest had "
                                 "no executed unmasked step")
        _write_manifest(snapshot, config, written, partial)
        shutil.rmtree(directory, ignore_errors=True)
        partial.rename(directory)
        return _finish(snapshot, DataSnapshot.Status.READY, stats=stats, directory=str(directory),
                       row_ids=written["row_ids"], row_count=len(written["rows"]),
                       content_hash=written["content_hash"])
    except Exception as error:  # a bug or a full disk: recorded on the snapshot, no half-written files
        log.exception("snapshot %s failed", snapshot.pk)
        shutil.rmtree(partial, ignore_errors=True)
        shutil.rmtree(directory, ignore_errors=True)
        return _finish(snapshot, DataSnapshot.Status.FAILED, error=f"{type(error).__name__}: {error}")


def _count_by(kind, rows) -> dict:
    counts = {}
    for row in rows:
        source = source_of(kind, row)
        counts[source] = counts.get(source, 0) + 1
    return dict(sorted(counts.items()))


def _finish(snapshot, status, **fields) -> DataSnapshot:
    fields = {"directory": "", "row_ids": [], "row_count": 0, "content_hash": "", "error": "",
              "stats": snapshot.stats or {}, **fields}
    snapshot.status = status
    for key, value in fields.items():
        setattr(snapshot, key, value)
    snapshot.save(update_fields=["status", *fields])
    return snapshot


def _export_chat(snapshot, selected, config, directory: Path) -> dict:
    """data.jsonl + images/ + dataset_info.json; each selected pool row gives its samples in order, then
    the screen corpora the config mixes in (training/screen_corpora.py)."""
    frames, hasher = FrameCache(), hashlib.sha256()
    rows, row_ids, images, skipped, by_source, files, apps = [], [], {}, [], {}, {}, {}
    masked, not_labels, teacher_steps, previous, samples, queries = 0, 0, 0, None, [], []
    with open(directory / "data.jsonl", "wb") as out:

        def write(sample):
            nonlocal teacher_steps
            line = canonical_json(sample.record)
            out.write(line + b"\n")
            hasher.update(line + b"\n")
            for path in sample.record["images"]:
                if path not in images:
                    (directory / path).write_bytes(sample.images[path])
                    images[path] = sha256_hex(sample.images[path])
                hasher.update(bytes.fromhex(images[path]))
            for path, data in sample.files.items():  # the UI dump; the line names it by its sha256
                if path not in files:
                    (directory / path).parent.mkdir(exist_ok=True)
                    (directory / path).write_bytes(data)
                    files[path] = sha256_hex(data)
            meta = sample.record["meta"]
            by_source[meta["source"]] = by_source.get(meta["source"], 0) + 1
            teacher_steps += meta["step_source"] == TEACHER
            rows.append({"sample": len(rows), "pool_row": meta["pool_row"], "trajectory": meta["trajectory"],
                         "step": meta["step"], "source": meta["source"], "step_source": meta["step_source"],
                         "sha256": sha256_hex(line)})

        for row in selected:
            if row is not previous:  # a repeated row (mixture ratio > 1) reuses its samples
                previous, samples = row, []
                source = source_of(snapshot.kind, row)
                meta = {"source": source, "pool_row": row.pk}
                trajectory = row.step.trajectory if snapshot.kind == DataSnapshot.Kind.CPT else row.trajectory
                # What the policy was given with the goal (the query's apps on a guided line, the
                # phone's on a goal-only one); rows share queries and phones: each is read once.
                key = (trajectory.query_id,) if trajectory.line in GUIDED_LINES else (trajectory.device_id,)
                if key not in apps:
                    # The labels as a list beside the apps, not a {package: label} object: an object's
                    # keys would be columns, and the HF json loader refuses a later line with new ones.
                    labels = trajectory.policy_app_labels
                    apps[key] = (trajectory.policy_apps, [labels.get(app, "") for app in trajectory.policy_apps])
                meta["apps"], meta["app_labels"] = apps[key]
                if snapshot.kind == DataSnapshot.Kind.CPT:
                    meta["query"] = row.step.trajectory.query_id
                    built = [(row.step, _try(step_sample, row.step, config["k"], frames, meta))]
                else:
                    meta["query"] = row.trajectory.query_id
                    built = list(trajectory_samples(row.trajectory, config["k"], frames, meta,
                                                    getattr(row, "not_labels", frozenset())))
                    masked += masked_step_count(row.trajectory)
                    not_labels += not_label_step_count(row.trajectory)
                for step, sample in built:
                    if isinstance(sample, SkippedSample):
                        skipped.append({"pool_row": row.pk, "step": step.index, "reason": str(sample)})
                    else:
                        samples.append(sample)
            if samples and row.pk is not None:  # a single judge's added trajectory is no pool row
                row_ids.append(row.pk)
            for sample in samples:
                write(sample)
                queries.append(sample.record["meta"]["query"])
        corpora, corpus_stats = corpus_samples(config, frames, queries)  # a node's pool samples: `queries`
        for sample in corpora:
            write(sample)
    (directory / "dataset_info.json").write_text(json.dumps(dataset_info(snapshot), indent=2))
    return {"rows": rows, "row_ids": row_ids, "images": images, "content_hash": hasher.hexdigest(),
            "stats": {"by_source": dict(sorted(by_source.items())), "skipped": skipped, "masked_steps": masked,
                      "not_training_labels": not_labels, "teacher_steps": teacher_steps,
                      "images": len(images), "hierarchies": len(files),
                      **({"corpora": corpus_stats} if corpus_stats else {})}}


def _try(build, *args):
    try:
        return build(*args)
    except SkippedSample as problem:
        return problem


def dataset_info(snapshot) -> dict:
    """The LLaMA-Factory dataset_info.json entry of a chat snapshot (sharegpt with images)."""
    return {f"flywheel_{snapshot.kind}_{snapshot.pk}": {
        "file_name": "data.jsonl", "formatting": "sharegpt",
        "columns": {"messages": "messages", "images": "images"},
        "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user",
                 "assistant_tag": "assistant", "system_tag": "system"}}}


def _export_rl(snapshot, selected, config, directory: Path) -> dict:
    hasher, records, rows, by_source = hashlib.sha256(), [], [], {}
    for row in selected:
        record = rl_row(row, index=len(records))
        line = canonical_json(record)
        hasher.update(line + b"\n")
        records.append(record)
        rows.append({"sample": len(rows), "pool_row": row.pk, "trajectory": None, "step": None,
                     "source": row.channel, "sha256": sha256_hex(line)})
        by_source[row.channel] = by_source.get(row.channel, 0) + 1
    write_parquet(records, directory / "train.parquet")
    return {"rows": rows, "row_ids": [row.pk for row in selected], "images": {},
            "content_hash": hasher.hexdigest(),
            "stats": {"by_source": dict(sorted(by_source.items())), "skipped": []}}


def _write_manifest(snapshot, config, written, directory: Path) -> None:
    manifest = {"snapshot": snapshot.pk, "kind": snapshot.kind, "content_hash": written["content_hash"],
                "config": config, "rows": written["rows"], "images": written["images"],
                "protocol": {"k": config["k"]}}
    (directory / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False))


# -- verifying --------------------------------------------------------------------------------------------

def verify_snapshot(snapshot: DataSnapshot) -> list[str]:
    """Recompute every hash from the files; the problems found ([] when the export is intact)."""
    if snapshot.status != DataSnapshot.Status.READY:
        return [f"the snapshot is {snapshot.status}: it has no files to verify"]
    directory = Path(snapshot.directory)
    try:
        manifest = json.loads((directory / "manifest.json").read_text())
    except (OSError, ValueError) as error:
        return [f"manifest.json cannot be read ({error})"]
    problems = []
    if manifest.get("content_hash") != snapshot.content_hash:
        problems.append("manifest.json's content hash differs from the snapshot's")
    try:
        lines, digests = _sample_lines(snapshot.kind, directory, problems)
    except (OSError, ValueError) as error:
        return [*problems, f"the samples cannot be read ({type(error).__name__}: {error})"]
    listed = manifest.get("rows") or []
    if len(lines) != snapshot.row_count or len(lines) != len(listed):
        problems.append(f"{len(lines)} samples in the files, {snapshot.row_count} recorded, "
                        f"{len(listed)} in the manifest")
    hasher = hashlib.sha256()
    for number, (line, paths) in enumerate(lines):
        hasher.update(line + b"\n")
        if number < len(listed) and listed[number].get("sha256") != sha256_hex(line):
            problems.append(f"sample {number} differs from its manifest hash")
        for path in paths:
            hasher.update(bytes.fromhex(digests.get(path) or "00"))
    for path, digest in sorted(digests.items()):
        if digest and (path != f"images/{digest}.png" or (manifest.get("images") or {}).get(path) != digest):
            problems.append(f"{path} does not match its sha256")
    if hasher.hexdigest() != snapshot.content_hash:
        problems.append("the content hash recomputed from the files differs from the snapshot's")
    return problems


def _sample_lines(kind, directory: Path, problems: list) -> tuple[list, dict]:
    """[(canonical sample bytes, image paths)] in file order, and {image path: sha256 of the file}."""
    if kind == DataSnapshot.Kind.RL:
        return [(canonical_json(record), []) for record in read_rows(directory / "train.parquet")], {}
    lines, digests = [], {}
    with open(directory / "data.jsonl", "rb") as handle:
        for number, raw in enumerate(handle):
            record = json.loads(raw)
            paths = list(record.get("images") or [])
            user = next((m["content"] for m in record.get("messages", []) if m.get("role") == "user"), "")
            if user.count(IMAGE_PLACEHOLDER) != len(paths):
                problems.append(f"sample {number}: {user.count(IMAGE_PLACEHOLDER)} placeholders "
                                f"for {len(paths)} images")
            hierarchy = (record.get("meta") or {}).get("hierarchy") or ""
            if hierarchy and f"hierarchies/{_file_sha256(directory / hierarchy)}.xml" != hierarchy:
                problems.append(f"sample {number}: {hierarchy} is missing or does not match its sha256")
            for path in paths:
                if path not in digests:
                    digests[path] = _file_sha256(directory / path)
                    if digests[path] is None:
                        problems.append(f"{path} is missing")
            lines.append((canonical_json(record), paths))
    return lines, digests


def _file_sha256(path: Path) -> str | None:
    if not path.is_file():
        return None
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
