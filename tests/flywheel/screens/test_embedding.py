"""The numpy MiniLM encoder against sentence-transformers' own output for the packaged weights.

minilm_reference.json was produced once with torch (CPU) + sentence-transformers in a throwaway
environment (neither is a dependency of the web app): the sentences, the first 8 dimensions of
each normalised embedding and the full cosine matrix. The last sentence is longer than 256
tokens, so truncation is checked too.
"""
import json
import threading
from pathlib import Path

import numpy as np

from flywheel.screens.embedding import DIMENSIONS, embed, get_model

REFERENCE = json.loads((Path(__file__).parent / "minilm_reference.json").read_text())


def test_matches_sentence_transformers_to_1e_4():
    vectors = embed(REFERENCE["sentences"])
    assert vectors.shape == (len(REFERENCE["sentences"]), DIMENSIONS) and vectors.dtype == np.float32
    assert np.abs(vectors[:, :8] - np.array(REFERENCE["first_dims"])).max() < 1e-4
    assert np.abs(vectors @ vectors.T - np.array(REFERENCE["cosine"])).max() < 1e-4
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_batching_and_padding_do_not_change_a_vector():
    sentences = REFERENCE["sentences"]
    alone = np.vstack([embed([sentence]) for sentence in sentences])
    batched = embed(list(reversed(sentences)), batch_size=2)[::-1]
    assert np.abs(alone - batched).max() < 1e-5


def test_paraphrases_are_closer_than_unrelated_sentences():
    pairs = [("Search for wireless headphones in ShopMart", "look up some earbuds in the shop app",
              "Turn on Bluetooth in Settings"),
             ("Set an alarm for 7 am", "wake me up at seven tomorrow morning", "Order a large pepperoni pizza"),
             ("Send a message to Bob", "text Bob in the chat app", "Translate hello into French")]
    for anchor, paraphrase, unrelated in pairs:
        a, p, u = embed([anchor, paraphrase, unrelated])
        assert a @ p > a @ u + 0.2, (anchor, float(a @ p), float(a @ u))


def test_model_is_loaded_once_across_threads():
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(id(get_model()))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(seen)) == 1
    assert embed([]).shape == (0, DIMENSIONS)


def test_cached_vectors_are_the_model_s_and_shared_through_redis(monkeypatch):
    from flywheel.screens import embedding

    texts = ["Download the English offline pack", "Turn on dark mode"]
    direct = embedding.embed(texts)
    embedding._vectors.clear()
    first = embedding.embed_cached(texts)
    assert np.allclose(first, direct, atol=1e-6)
    # Another process: nothing in memory, the vectors come from Redis without running the model.
    embedding._vectors.clear()
    monkeypatch.setattr(embedding, "embed", lambda _texts: (_ for _ in ()).throw(AssertionError("recomputed")))
    assert np.allclose(embedding.embed_cached(list(reversed(texts))), direct[::-1], atol=1e-6)
