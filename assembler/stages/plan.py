"""``plan.lanes`` (contract section 9.4); ``plan.reranker`` comes from :mod:`assembler.stages.reorder`.

When a lane dump carries ``plan_lanes``, its entries are used as given; a lane it does not name,
or a dump without it, gets the plan derived from the request and from which lanes are present:

* resolve: ``origins`` empty means it did not run.
* anchors: at least one origin and a ``graph_activate`` list (``null``/absent = none resolved).
* passages: a resolved ``search_limit`` of 0, else ``passages: null`` means the canonical query
  yielded no searchable term (the tool cannot tokenize like the server, so it reads the dump).
* communities: ``include_communities`` true with ``communities: null`` is the missing-artifact
  degrade (the first of the two reason strings; the manifest case needs ``plan_lanes``).
"""

from __future__ import annotations

from functools import lru_cache

from assembler.stages.lanes import PLAN_LANE_NAMES, QueryRecord, lane_plan_text

__all__ = ["derive_lane_plans", "lanes_plan_text"]

NO_ANCHORS = "no anchors resolved from 'origins'"


def _missing_artifact(context: str) -> str:
    return (
        f"no communities artifact for '{context}': context '{context}::communities' does not exist"
        " \u2014 run `taguru communities` to build it"
    )


def _plan_inputs(record: QueryRecord) -> tuple[bool, bool, bool, bool, bool, bool, bool, str]:
    """All a derived plan depends on (the key under which its text is cached)."""
    request, present = record.request, record.present_lanes
    return (
        bool(request.origins),
        "graph_activate" in present,
        bool(request.labels),
        request.search_limit == 0,
        "passages" not in present,
        request.include_communities,
        "communities" not in present,
        record.context,
    )


def _derived_plans(
    origins: bool,
    activated: bool,
    labels: bool,
    no_search: bool,
    no_passages: bool,
    include_communities: bool,
    no_communities: bool,
    context: str,
) -> dict[str, dict[str, object]]:
    anchors = origins and activated

    def off(reason: str) -> dict[str, object]:
        return {"ran": False, "reason": reason}

    ran: dict[str, object] = {"ran": True}
    return {
        "resolve": ran if origins else off("origins was empty"),
        "query": off(NO_ANCHORS) if not anchors else off("no 'labels' given") if not labels else ran,
        "activate": ran if anchors else off(NO_ANCHORS),
        "passages": (
            off("the requested limit is 0")
            if no_search
            else off("the query yields no searchable terms")
            if no_passages
            else ran
        ),
        "communities": (
            off("include_communities was false")
            if not include_communities
            else off(_missing_artifact(context))
            if no_communities
            else ran
        ),
        "citations": ran,
    }


def derive_lane_plans(record: QueryRecord) -> dict[str, dict[str, object]]:
    """Every lane's ``{ran, reason?}``, derived where ``plan_lanes`` does not say."""
    derived = _derived_plans(*_plan_inputs(record))
    return {name: dict((record.plan_lanes or {}).get(name) or derived[name]) for name in PLAN_LANE_NAMES}


def _plans_text(plans: dict[str, dict[str, object]]) -> str:
    return "{" + ",".join(f'"{name}":{lane_plan_text(plans[name])}' for name in PLAN_LANE_NAMES) + "}"


@lru_cache(maxsize=4096)
def _derived_text(inputs: tuple[bool, bool, bool, bool, bool, bool, bool, str]) -> str:
    return _plans_text(_derived_plans(*inputs))


def lanes_plan_text(record: QueryRecord) -> str:
    """The ``plan.lanes`` object as wire text.

    Called once per query; a record without ``plan_lanes`` has one of a few derived plans, so
    its text is cached by what it is derived from (a given ``plan_lanes`` is written afresh).
    """
    if record.plan_lanes is None:
        return _derived_text(_plan_inputs(record))
    return _plans_text(derive_lane_plans(record))
