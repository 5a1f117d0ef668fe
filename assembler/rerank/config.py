"""Reranker configuration: environment variables as section 11.3 reads them, or given directly.

``TAGURU_RERANK_URL`` and ``TAGURU_RERANK_MODEL`` must both be set (one without the other logs a
warning and leaves the reranker off); ``TAGURU_RERANK_API_KEY`` is optional (set, even empty, it
is sent as a bearer token); ``TAGURU_RERANK_TIMEOUT_SECS`` defaults to 5, is parsed as a
non-negative integer (anything else: 5, with a warning) and floored to 1. Warnings name the
variable, never its value.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "DEFAULT_TIMEOUT_SECS",
    "ENV_API_KEY",
    "ENV_MODEL",
    "ENV_TIMEOUT",
    "ENV_URL",
    "RerankConfig",
    "parse_timeout_secs",
]

log = logging.getLogger("assembler.rerank")

ENV_URL = "TAGURU_RERANK_URL"
ENV_MODEL = "TAGURU_RERANK_MODEL"
ENV_API_KEY = "TAGURU_RERANK_API_KEY"
ENV_TIMEOUT = "TAGURU_RERANK_TIMEOUT_SECS"
DEFAULT_TIMEOUT_SECS = 5
_U64_MAX = 2**64 - 1
_UNSIGNED = re.compile(r"\+?[0-9]+")  # Rust's usize::from_str: optional '+', ASCII digits, nothing else


@dataclass(frozen=True)
class RerankConfig:
    """Where the provider is and how long one attempt may take. The key never shows in ``repr``.

    ``url`` is used exactly as given (no path is appended); ``timeout_secs`` bounds each attempt
    (``min(timeout_secs, deadline remaining)``).
    """

    url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    timeout_secs: float = DEFAULT_TIMEOUT_SECS

    def __post_init__(self) -> None:
        if not self.timeout_secs > 0:
            raise ValueError("timeout_secs must be positive")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *, key_env: str = ENV_API_KEY) -> RerankConfig | None:
        """The configuration the environment describes, or None when the reranker is off.

        >>> RerankConfig.from_env({"TAGURU_RERANK_URL": "http://h/rerank", "TAGURU_RERANK_MODEL": "m"})
        RerankConfig(url='http://h/rerank', model='m', timeout_secs=5)
        >>> RerankConfig.from_env({}) is None
        True
        """
        env = os.environ if environ is None else environ
        url, model = env.get(ENV_URL), env.get(ENV_MODEL)
        if url is None or model is None:
            if url is not None or model is not None:
                missing = ENV_MODEL if model is None else ENV_URL
                present = ENV_URL if model is None else ENV_MODEL
                log.warning("%s is set but %s is not; the reranker is off", present, missing)
            return None
        timeout_secs = parse_timeout_secs(env.get(ENV_TIMEOUT))
        return cls(url=url, model=model, api_key=env.get(key_env), timeout_secs=timeout_secs)


def parse_timeout_secs(text: str | None) -> int:
    """``TAGURU_RERANK_TIMEOUT_SECS``: default 5, unparsable -> 5 with a warning, floored to 1.

    >>> parse_timeout_secs(None), parse_timeout_secs("12"), parse_timeout_secs("+3"), parse_timeout_secs("0")
    (5, 12, 3, 1)
    """
    if text is None:
        return DEFAULT_TIMEOUT_SECS
    if _UNSIGNED.fullmatch(text) is None or int(text) > _U64_MAX:
        log.warning("ignoring %s: not a non-negative integer; using %d", ENV_TIMEOUT, DEFAULT_TIMEOUT_SECS)
        return DEFAULT_TIMEOUT_SECS
    return max(1, int(text))
