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

from assembler.stages.lanes import PLAN_LANE_NAMES, QueryRecord, lane_plan_text

__all__ = ["derive_lane_plans", "lanes_plan_text"]

NO_ANCHORS = "no anchors resolved from 'origins'"


def _missing_artifact(context: str) -> str:
    return (
        f"no communities artifact for '{context}': context '{context}::communities' does not exist"
        " \u2014 run `taguru communities` to build it"
    )


def derive_lane_plans(record: QueryRecord) -> dict[str, dict[str, object]]:
    """Every lane's ``{ran, reason?}``, derived where ``plan_lanes`` does not say."""
    request, present = record.request, record.present_lanes
    anchors = bool(request.origins) and "graph_activate" in present

    def off(reason: str) -> dict[str, object]:
        return {"ran": False, "reason": reason}

    ran: dict[str, object] = {"ran": True}
    derived: dict[str, dict[str, object]] = {
        "resolve": ran if request.origins else off("origins was empty"),
        "query": off(NO_ANCHORS) if not anchors else off("no 'labels' given") if not request.labels else ran,
        "activate": ran if anchors else off(NO_ANCHORS),
        "passages": (
            off("the requested limit is 0")
            if request.search_limit == 0
            else off("the query yields no searchable terms")
            if "passages" not in present
            else ran
        ),
        "communities": (
            off("include_communities was false")
            if not request.include_communities
            else off(_missing_artifact(record.context))
            if "communities" not in present
            else ran
        ),
        "citations": ran,
    }
    return {name: dict((record.plan_lanes or {}).get(name) or derived[name]) for name in PLAN_LANE_NAMES}


def lanes_plan_text(record: QueryRecord) -> str:
    """The ``plan.lanes`` object as wire text."""
    plans = derive_lane_plans(record)
    return "{" + ",".join(f'"{name}":{lane_plan_text(plans[name])}' for name in PLAN_LANE_NAMES) + "}"
