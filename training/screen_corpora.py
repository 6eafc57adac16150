"""The screen corpora of a CPT or SFT snapshot: grounding, screen QA and element-function captions
derived from every stored frame with its UI dump (training/exports/screen_corpora.py), deduplicated
by page identity, weighted toward thin function-tree nodes and mixed by ratio
(training/rules/screen_corpora.py).

    samples, stats = corpus_samples(config, frames, pool_queries)    # training/snapshots.py writes them
    screen_corpus_counts(snapshot)  ->  {"grounding": n, "screen_qa": n, "captions": n}

Page identity is the training side's state key (step_judge.anchor_key: the screen's elements and
their bounds, the status bar left out): two frames with the same key give the same answers, so the
first frame of a key (trajectory, then step order) speaks for all. GEM's structural identity
(flywheel/screens/page_identity.py) would be too coarse here: it ignores texts by design, so every
Settings sub-page with the same list skeleton would be one page. A caption is kept once per page
and element. The frames are those an export may hold: never a held-out query's or a benchmark
rollout's (and not a counterfactual-derived query's when the snapshot leaves those out).
"""
from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from flywheel.blobs import read_blob
from flywheel.models import Destination, Line, QueryFunction, Step
from training.exports import sha256_hex
from training.exports.chat import ChatSample, FrameCache, SkippedSample, device_context
from training.exports.screen_corpora import DERIVED, ScreenSample, corpus_record, page_samples, screen_size, tap_caption
from training.rules.screen_corpora import CAPTIONS, CORPORA, TASKS, corpus_copies, page_node, thin_node_weights
from training.step_judge import anchor_key

STEP_FIELDS = ("pk", "trajectory_id", "trajectory__query_id", "index", "screenshot", "hierarchy", "executed_action",
               "anomaly", "foreground_package", "activity_stack")
NODE_WEIGHTS_SHOWN = 100  # the stats keep the thinnest nodes; the total is kept beside them
NODE_WEIGHTS_ON_PAGE = 20


@dataclass
class Candidate:
    sample: ScreenSample
    frame: dict          # the Step values of the frame it is asked about
    page: str            # its page identity
    hierarchy: str       # hierarchies/<sha256>.xml
    screen: list


def stored_frames(counterfactual_queries: bool = True):
    """Every stored step with a screenshot and a UI dump an export may use, in trajectory and step order."""
    steps = (Step.objects.exclude(screenshot="").exclude(hierarchy="")
             .exclude(trajectory__query__evaluation_only=True)
             .exclude(trajectory__destination=Destination.BENCHMARK).exclude(trajectory__line=Line.BENCHMARK))
    if not counterfactual_queries:
        steps = steps.filter(trajectory__query__failure_class__isnull=True)
    return steps.order_by("trajectory_id", "index").values(*STEP_FIELDS)


def query_nodes() -> dict[int, set[str]]:
    """query id -> the function-tree nodes gate 3 (or a person) tagged it with, as "package:path"."""
    nodes = {}
    for link in QueryFunction.objects.values("query_id", "function__app__package", "function__path"):
        nodes.setdefault(link["query_id"], set()).add(f"{link['function__app__package']}:{link['function__path']}")
    return nodes


def _hierarchy(frame: dict) -> tuple[str, bytes] | None:
    try:
        data = read_blob(frame["hierarchy"])
    except (FileNotFoundError, OSError):
        return None
    return f"hierarchies/{sha256_hex(data)}.xml", data


def _context(frame: dict) -> dict:
    return device_context(SimpleNamespace(foreground_package=frame["foreground_package"],
                                          activity_stack=frame["activity_stack"]))


def derive(wanted: set[str], frames: FrameCache, nodes_of_query: dict, counterfactual_queries: bool = True):
    """(candidates in frame order, {page: its nodes}, counts of what was read) over every stored frame."""
    pages, seen_captions, candidates, read = {}, set(), [], Counter()
    previous = None  # (frame, its xml, its page, its hierarchy path) of the step before
    for frame in stored_frames(counterfactual_queries).iterator(chunk_size=500):
        read["frames"] += 1
        stored, png = _hierarchy(frame), _png(frame, frames)
        xml = stored[1].decode("utf-8", "replace") if stored else ""
        page = anchor_key(xml, "")
        if png is None or not page:  # unreadable, or nothing on screen but the status bar
            read["skipped_frames"] += 1
            previous = None
            continue
        if page in pages:
            read["duplicate_frames"] += 1
        else:
            pages[page] = set()
            screen = list(screen_size(png))
            candidates += [Candidate(sample, frame, page, stored[0], screen)
                           for sample in page_samples(png, xml) if sample.corpus in wanted]
        pages[page].update(nodes_of_query.get(frame["trajectory__query_id"], ()))
        if CAPTIONS in wanted and previous is not None and not frame["anomaly"] \
                and (previous[0]["trajectory_id"], previous[0]["index"] + 1) == (frame["trajectory_id"], frame["index"]):
            caption = _caption(previous, xml, frame, frames)
            if caption is not None and caption[1] not in seen_captions:
                seen_captions.add(caption[1])
                candidates.append(caption[0])
        previous = (frame, xml, page, stored[0])
    read["pages"] = len(pages)
    return candidates, pages, read


def _png(frame: dict, frames: FrameCache) -> bytes | None:
    try:
        return frames.get(frame["screenshot"])[1]
    except SkippedSample:
        return None


def _caption(previous, next_xml: str, next_frame: dict, frames: FrameCache):
    """(the caption of the tap the previous step ran, its identity: page, element, question) or None."""
    frame, xml, page, hierarchy_path = previous
    png = _png(frame, frames)
    found = png and tap_caption(png, xml, frame["executed_action"], next_xml, _context(frame), _context(next_frame))
    if not found:
        return None
    sample, node = found
    return Candidate(sample, frame, page, hierarchy_path, list(screen_size(png))), (page, node.bounds, sample.question)


def corpus_samples(config: dict, frames: FrameCache, pool_queries: list) -> tuple[Iterator[ChatSample], dict]:
    """(the ChatSamples to write after the pool's samples, made as they are written; the stats the
    snapshot page shows). `pool_queries`: the query of each pool row the snapshot exports (what a
    node's pool samples are counted from)."""
    ratios = config.get("corpora") or {}
    if not ratios:
        return iter(()), {}
    nodes_of_query = query_nodes()
    candidates, pages, read = derive(set(ratios), frames, nodes_of_query, config.get("counterfactual_queries", True))
    pool_counts = Counter(node for query in pool_queries for node in nodes_of_query.get(query, ()))
    weights = thin_node_weights(pool_counts, sorted({node for nodes in pages.values() for node in nodes}))
    weighed = {page: page_node(nodes, weights)[0] for page, nodes in pages.items()}
    kept, by_task, by_node = [], Counter(), Counter()
    for corpus in ratios:
        mine = [c for c in candidates if c.sample.corpus == corpus]
        copies = corpus_copies(Counter(weighed[c.page] for c in mine), ratios[corpus], weights, config["seed"], corpus)
        position = Counter()
        for candidate in mine:
            group = weighed[candidate.page]
            times = copies[group][position[group]]
            position[group] += 1
            kept += [candidate] * times
            by_task[candidate.sample.task] += times
            by_node[group] += times
    kept.sort(key=lambda c: (c.frame["trajectory_id"], c.frame["index"]))  # stable: corpus order within a frame
    stats = {"ratios": ratios, "frames": read["frames"], "pages": read["pages"],
             "duplicate_frames": read["duplicate_frames"], "skipped_frames": read["skipped_frames"],
             "candidates": {corpus: sum(c.sample.corpus == corpus for c in candidates) for corpus in ratios},
             "samples": {corpus: sum(by_task[task] for task in TASKS[corpus]) for corpus in ratios},
             "by_task": dict(sorted(by_task.items())),
             "nodes": len(weights), "node_weights": _node_table(weights, pool_counts, by_node)}
    return _chat_samples(kept, frames), stats


def _node_table(weights, pool_counts, by_node) -> list[dict]:
    rows = [{"node": node, "pool_samples": pool_counts.get(node, 0), "weight": weight,
             "corpus_samples": by_node.get(node, 0)} for node, weight in weights.items()]
    rows.sort(key=lambda row: (-row["weight"], row["node"]))
    return rows[:NODE_WEIGHTS_SHOWN]


def _chat_samples(kept: list[Candidate], frames: FrameCache) -> Iterator[ChatSample]:
    """The kept candidates as ChatSamples, one at a time (a frame's samples are adjacent: its
    screenshot and UI dump are read once for them)."""
    last = None
    for candidate in kept:
        if last is None or last[0] != candidate.frame["pk"]:
            stored = _hierarchy(candidate.frame)
            last = (candidate.frame["pk"], {stored[0]: stored[1]} if stored else {})
        path, png = frames.get(candidate.frame["screenshot"])
        meta = {"trajectory": candidate.frame["trajectory_id"], "step": candidate.frame["index"], "pool_row": None,
                "query": candidate.frame["trajectory__query_id"], "hierarchy": candidate.hierarchy,
                "screen": candidate.screen}
        yield ChatSample(record=corpus_record(candidate.sample, path, meta), images={path: png}, files=last[1])


def screen_corpus_counts(snapshot) -> dict[str, int]:
    """{corpus: samples} of a ready chat snapshot, counted in its data.jsonl (0 for a corpus it lacks)."""
    counts = dict.fromkeys(CORPORA, 0)
    path = Path(snapshot.directory or "/nonexistent") / "data.jsonl"
    if not path.is_file():
        return counts
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            meta = json.loads(line).get("meta") or {}
            if meta.get("step_source") == DERIVED and meta.get("source") in counts:
                counts[meta["source"]] += 1
    return counts


def corpus_mixture(snapshot) -> dict | None:
    """The screen-corpus mixture of a snapshot as its page shows it; None when it mixed in none."""
    stats = (snapshot.stats or {}).get("corpora")
    if not stats:
        return None
    total = snapshot.row_count or 0
    rows = [{"corpus": corpus, "ratio": stats["ratios"].get(corpus), "candidates": stats["candidates"].get(corpus, 0),
             "samples": samples, "share": round(100 * samples / total, 1) if total else 0.0}
            for corpus, samples in stats["samples"].items()]
    return {"rows": rows, "by_task": sorted(stats["by_task"].items()), "nodes": stats["nodes"],
            "node_weights": stats["node_weights"][:NODE_WEIGHTS_ON_PAGE],
            **{key: stats[key] for key in ("frames", "pages", "duplicate_frames", "skipped_frames")}}
