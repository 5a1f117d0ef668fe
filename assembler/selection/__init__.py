"""Selection policies by name: ``contract`` (the default, byte-exact) and the opt-in ``quality``.

A :class:`SelectionPolicy` decides which fused candidates are dropped, how the rest form admission
units, in which order they are offered and which are admitted (``assembler.selection.base``).
Everywhere a policy is taken, a registered name is accepted too (:func:`get_policy`).

>>> get_policy("contract") is CONTRACT
True
>>> sorted(policies())[:2]
['contract', 'quality']
"""

from __future__ import annotations

from collections.abc import Mapping as _Mapping
from typing import Any as _Any

from assembler import errors
from assembler.selection.base import Selection, SelectionInputs, SelectionPolicy, admit_units, survivor_positions
from assembler.selection.contract import CONTRACT, ContractPolicy
from assembler.selection.quality import QUALITY_POLICIES, QualityPolicy, load_policy_config

__all__ = [
    "CONTRACT",
    "QUALITY_POLICIES",
    "ContractPolicy",
    "QualityPolicy",
    "Selection",
    "SelectionInputs",
    "SelectionPolicy",
    "admit_units",
    "get_policy",
    "load_policy_config",
    "policies",
    "register_policy",
    "survivor_positions",
]


_REGISTERED: dict[str, SelectionPolicy] = {}


def policies() -> dict[str, SelectionPolicy]:
    """Every registered selection policy by name: ``contract`` (default), ``quality`` and its
    ablations, and any :func:`register_policy` added."""
    return {CONTRACT.name: CONTRACT, **{policy.name: policy for policy in QUALITY_POLICIES}, **_REGISTERED}


def register_policy(policy: SelectionPolicy) -> str:
    """Make ``policy`` (a tuned setting, say) known by its name to :func:`get_policy`; returns the
    name. A built-in name cannot be taken; registering the same name again replaces it."""
    builtin = {CONTRACT.name, *(known.name for known in QUALITY_POLICIES)}
    if policy.name in builtin:
        raise errors.UsageError(f"policy name {policy.name!r} is built in; give the tuned policy another name")
    _REGISTERED[policy.name] = policy
    return policy.name


def get_policy(policy: str | SelectionPolicy, config: _Mapping[str, _Any] | None = None) -> SelectionPolicy:
    """The policy registered under a name (a :class:`~assembler.errors.UsageError` naming the known
    ones otherwise); a policy object is returned as it is.

    ``config`` (a tuned setting, as ``assembler evaluate tune`` writes it, or its ``policy``
    object) applies to ``"quality"`` only: :meth:`QualityPolicy.from_config`.

    >>> get_policy("quality", config={"fact_lag": 1, "statement_share": None}).statement_share is None
    True
    """
    if config is not None:
        if policy != "quality":
            raise errors.UsageError(f"a policy config applies to policy 'quality' only, not {policy!r}")
        return QualityPolicy.from_config(config)
    if not isinstance(policy, str):
        return policy
    known = policies()
    try:
        return known[policy]
    except KeyError:
        raise errors.UsageError(f"unknown policy {policy!r} (known: {', '.join(sorted(known))})") from None
