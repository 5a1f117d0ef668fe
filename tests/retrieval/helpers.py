"""A hashing bag-of-tokens encoder (no model needed) and a tiny hand-made corpus."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from assembler.retrieval import Paragraph
from assembler.retrieval.text import tokens

DIM = 64


class HashEncoder:
    """Deterministic stand-in for e5: token counts hashed into 64 dimensions, L2-normalized."""

    name = "hash-encoder-64"

    def __init__(self) -> None:
        self.calls = 0

    def _encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls += 1
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in tokens(text):
                out[row, int(hashlib.sha1(token.encode()).hexdigest(), 16) % DIM] += 1.0
            norm = float(np.linalg.norm(out[row]))
            out[row] = out[row] / norm if norm else out[row]
        return out

    def query(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self._encode(texts)

    def passage(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self._encode(texts)


TINY = [
    Paragraph(
        "films",
        "Rush (band)",
        0,
        "Rush was a Canadian rock band formed in Toronto. Neil Peart joined in 1974.",
        title="Rush (band)",
    ),
    Paragraph(
        "films",
        "Neil Peart",
        0,
        "Neil Peart was the drummer of Rush and entered the Modern Drummer Hall of Fame.",
        title="Neil Peart",
    ),
    Paragraph(
        "films",
        "Counterparts",
        0,
        "Counterparts is the fifteenth studio album by Rush, released in 1993.",
        title="Counterparts",
    ),
    Paragraph("films", "Toto", 0, "Toto is an American rock band. Jeff Porcaro was its drummer.", title="Toto"),
    Paragraph(
        "films",
        "Jeff Porcaro",
        0,
        "Jeff Porcaro entered the Modern Drummer Hall of Fame in 1993.",
        title="Jeff Porcaro",
    ),
    Paragraph(
        "films", "Jeff Porcaro", 1, "Porcaro played on Thriller. Jeff Porcaro died in 1992.", title="Jeff Porcaro"
    ),
]
