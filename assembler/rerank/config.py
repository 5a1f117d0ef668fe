"""Reranker configuration: environment variables as section 11.3 reads them, or given directly.

``TAGURU_RERANK_URL`` and ``TAGURU_RERANK_MODEL`` must both be set (one without the other logs a
warning and leaves the reranker off); ``TAGURU_RERANK_API_KEY`` is optional (set, even empty, it
is sent as a bearer token); ``TAGURU_RERANK_TIMEOUT_SECS`` defaults to 5, is parsed as a
non-negative integer (anything else: 5, with a warning) and floored to 1. Warnings name the
variable, never its value.

URL safety: a URL with userinfo (``http://user:password@host/``) is refused with a ``UsageError``
(httpx would send it as Basic credentials in place of the configured key); a non-empty key sent
over plain ``http://`` to a host that is not loopback (``127.0.0.0/8``, ``::1``, ``localhost``)
logs one warning per process and host. Neither message repeats the URL, its userinfo or the key.

Configurations that could never send a request are refused too, at start-up rather than by every
query falling back: a URL that is not ``http://`` or ``https://`` (``file://``, ``ftp://``, no
scheme), has no host, an invalid port (not 1 to 65535), spaces or control characters
(:func:`url_problem`); a key holding a control character such as CR or LF, which no HTTP header
can carry (:func:`key_problem`).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from assembler.errors import UsageError

__all__ = [
    "DEFAULT_TIMEOUT_SECS",
    "ENV_API_KEY",
    "ENV_MODEL",
    "ENV_TIMEOUT",
    "ENV_URL",
    "RerankConfig",
    "has_userinfo",
    "is_loopback_host",
    "key_problem",
    "parse_timeout_secs",
    "plain_http_to_remote_host",
    "url_problem",
]

log = logging.getLogger("assembler.rerank")

ENV_URL = "TAGURU_RERANK_URL"
ENV_MODEL = "TAGURU_RERANK_MODEL"
ENV_API_KEY = "TAGURU_RERANK_API_KEY"
ENV_TIMEOUT = "TAGURU_RERANK_TIMEOUT_SECS"
DEFAULT_TIMEOUT_SECS = 5
_U64_MAX = 2**64 - 1
_UNSIGNED = re.compile(r"\+?[0-9]+")  # Rust's usize::from_str: optional '+', ASCII digits, nothing else
_SCHEMES = ("http", "https")
_URL_UNSAFE = re.compile(r"[\x00-\x20\x7f-\x9f]")  # controls and spaces: never raw in a URL
_KEY_UNSAFE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # what an HTTP field value cannot hold (tab can)
_warned_plain_http: set[str] = set()  # hosts already warned about (once per process and host)
_warned_lock = threading.Lock()


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
        if has_userinfo(self.url):
            raise UsageError(
                "url must not carry userinfo (user:password@ before the host): it would replace api_key; "
                "give the key as api_key"
            )
        problem = url_problem(self.url)
        if problem is not None:
            raise UsageError(f"url {problem}")
        if self.api_key is not None and (problem := key_problem(self.api_key)) is not None:
            raise UsageError(f"api_key {problem}")
        if self.api_key and plain_http_to_remote_host(self.url):
            _warn_plain_http_once(urlsplit(self.url).hostname or "")

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


def url_problem(url: str) -> str | None:
    """The rule ``url`` breaks, in words that do not repeat it, or None when a request can be sent.

    >>> [url_problem(u) for u in ("http://127.0.0.1:8080/rerank", "https://rerank.example/v1/rerank")]
    [None, None]
    >>> url_problem("file:///etc/passwd"), url_problem("http:///rerank")
    ('must be an http:// or https:// URL', 'has no host')
    >>> url_problem("http://h:99999/rerank")
    'has an invalid port (a port is a number from 1 to 65535)'
    """
    if _URL_UNSAFE.search(url):
        return "must not contain spaces or control characters (percent-encode them)"
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unclosed IPv6 literal
        return "is not a valid URL"
    if parts.scheme.lower() not in _SCHEMES:
        return "must be an http:// or https:// URL"
    try:
        host, port = parts.hostname, parts.port
    except ValueError:  # a port out of range or not a number
        return "has an invalid port (a port is a number from 1 to 65535)"
    if not host:
        return "has no host"
    if port == 0:
        return "has an invalid port (a port is a number from 1 to 65535)"
    return None


def key_problem(key: str) -> str | None:
    """The rule an API key breaks (without repeating the key), or None.

    A key is sent as ``Authorization: Bearer <key>``; a header cannot carry CR, LF or another
    control character (a tab aside), so such a key would send nothing and every query fall back.

    >>> key_problem("sk-1234"), key_problem("sk-1234\\r\\n")
    (None, 'holds a control character (such as CR or LF), which an HTTP header cannot carry')
    """
    if _KEY_UNSAFE.search(key):
        return "holds a control character (such as CR or LF), which an HTTP header cannot carry"
    return None


def has_userinfo(url: str) -> bool:
    """Whether ``url``'s authority carries userinfo (an ``@`` before the host, even an empty one).

    >>> has_userinfo("http://u:p@h/rerank"), has_userinfo("http://@h/"), has_userinfo("http://h/?a=@b")
    (True, True, False)
    """
    try:
        return "@" in urlsplit(url).netloc
    except ValueError:  # unparsable (e.g. a bad IPv6 literal): the transport refuses it per attempt
        return False


def is_loopback_host(host: str) -> bool:
    """``localhost``, ``127.0.0.0/8``, ``::1`` (and IPv4-mapped ``::ffff:127.x.y.z``).

    >>> [is_loopback_host(h) for h in ("localhost", "127.3.2.1", "::1", "10.0.0.1", "rerank.example")]
    [True, True, True, False, False]
    """
    host = host.lower().rstrip(".")
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def plain_http_to_remote_host(url: str) -> bool:
    """Whether ``url`` is plain ``http://`` to a host that is not loopback.

    >>> plain_http_to_remote_host("http://rerank.example/r"), plain_http_to_remote_host("https://rerank.example/r")
    (True, False)
    >>> plain_http_to_remote_host("http://127.0.0.1:8080/r"), plain_http_to_remote_host("http://[::1]/r")
    (False, False)
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        return False
    return parts.scheme == "http" and host is not None and not is_loopback_host(host)


def _warn_plain_http_once(host: str) -> None:
    with _warned_lock:
        if host in _warned_plain_http:
            return
        _warned_plain_http.add(host)
    log.warning(
        "the reranker's API key is sent over plain http:// to a host that is not loopback; "
        "anyone on the path can read it (use https://)"
    )
