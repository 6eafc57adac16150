"""Screen-understanding corpora in a snapshot's mixture (BlueLM §3.1.1, Xiaomi-GUI-0 §6.1): which
corpora there are, how much of each a snapshot takes, and the thin-node weights of §2.2.6.

A corpus ratio works as a source ratio does (training/rules/mixture.py): 1 keeps every derived
sample, 0.5 a seeded half, 2 each sample twice, 0 none. No corpus is taken unless a ratio names it:
BlueLM found that past the minimum that keeps grounding from drifting, more screen data no longer
improves execution (Table 7), so the share is chosen per run for what the base model lacks.

Thin-node weight: the samples of a page are weighted by the function-tree node (gate 3's back-tags)
the pool holds the fewest samples of, w = reference / n with the reference the median n of the
nodes the pool holds, bounded to [1 / MAX_NODE_WEIGHT, MAX_NODE_WEIGHT]; a node the pool holds no
sample of gets the bound; a page no tagged query reached keeps 1.
"""
from __future__ import annotations

import random
from collections.abc import Hashable, Iterable, Mapping, Sequence

from training.rules.mixture import copies_per_row, validate_ratios

# The corpora, in the order a snapshot writes them; each sample also names its task.
GROUNDING, SCREEN_QA, CAPTIONS = "grounding", "screen_qa", "captions"
CORPORA = (GROUNDING, SCREEN_QA, CAPTIONS)
TASKS = {
    GROUNDING: ("element_to_box", "element_to_point", "point_to_element"),
    SCREEN_QA: ("page_offers", "toggle_state", "selected_item"),
    CAPTIONS: ("tap_effect",),
}
MAX_NODE_WEIGHT = 4.0


def validate_corpora(value) -> dict[str, float]:
    """{corpus: ratio} as floats, corpora in CORPORA order, zeros left out; ValueError naming the bad key."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"corpora must be a mapping of corpus to ratio, e.g. {{\"grounding\": 0.5}}, "
                         f"not {type(value).__name__}")
    unknown = sorted((name for name in value if name not in CORPORA), key=str)
    if unknown:
        raise ValueError(f"corpora: {unknown[0]!r} is not a corpus; use {', '.join(CORPORA)}")
    try:
        ratios = validate_ratios(value)
    except ValueError as error:
        raise ValueError(f"corpora: {error}") from None
    return {name: ratios[name] for name in CORPORA if ratios.get(name)}


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return float(ordered[middle]) if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def thin_node_weights(pool_samples: Mapping[Hashable, int], nodes: Iterable[Hashable],
                      max_weight: float = MAX_NODE_WEIGHT) -> dict:
    """{node: weight} for `nodes` given how many pool samples each node holds (absent: none). Fewer
    samples under a node, higher weight: reference / n within [1 / max_weight, max_weight]."""
    nodes = list(dict.fromkeys(nodes))
    held = [count for count in pool_samples.values() if count > 0]
    if not held:  # nothing to compare a node with: no steering
        return dict.fromkeys(nodes, 1.0)
    reference = median(held)
    weights = {}
    for node in nodes:
        count = pool_samples.get(node, 0)
        weight = max_weight if count <= 0 else reference / count
        weights[node] = round(min(max_weight, max(1.0 / max_weight, weight)), 4)
    return weights


def page_node(nodes: Iterable[Hashable], weights: Mapping[Hashable, float]):
    """(the node that weighs a page: its thinnest, ties to the smallest key; its weight) — (None, 1.0)
    for a page of no node."""
    nodes = sorted(set(nodes), key=lambda node: (-weights.get(node, 1.0), str(node)))
    return (nodes[0], weights.get(nodes[0], 1.0)) if nodes else (None, 1.0)


def corpus_copies(groups: Mapping[Hashable, int], ratio: float, weights: Mapping[Hashable, float],
                  seed: int, corpus: str) -> dict:
    """{group: copies of each of its samples} for one corpus: each group (a node, or None) under
    ratio × its weight, from a random stream of its own (seed, corpus, group), so re-weighting one
    node never changes what another keeps."""
    kept = {}
    for group in sorted(groups, key=str):
        rng = random.Random(f"{seed}:corpus:{corpus}:{group}")
        kept[group] = copies_per_row(groups[group], ratio * weights.get(group, 1.0), rng)
    return kept
