"""Dashboard and panel specs, and their Grafana JSON through the Grafana Foundation SDK's builders.

A spec is what the fabric decides (title, queries, unit, the plan's reference lines); the SDK
decides how Grafana spells it. The plan's figures are queries too (`vector(170)`, legend
"plan: expected"), so the line a reader compares with is drawn by the same panel from the same
datasource, and every query of a panel, the plan's included, goes through the same checks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from grafana_foundation_sdk.builders import common as gc
from grafana_foundation_sdk.builders import dashboard as gd
from grafana_foundation_sdk.builders import prometheus, stat, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.common import LegendDisplayMode, LegendPlacement, TooltipDisplayMode
from grafana_foundation_sdk.models.dashboard import DataSourceRef, VariableOption

DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
PANEL_WIDTH, PANEL_HEIGHT = 8, 8  # three panels a row of Grafana's 24 columns


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str


@dataclass(frozen=True)
class Panel:
    title: str
    queries: tuple[Query, ...]
    unit: str = "short"
    kind: Literal["timeseries", "stat"] = "timeseries"
    description: str = ""
    last_in_legend: bool = False  # the legend shows each line's last value ("delivering 95")


@dataclass(frozen=True)
class Row:
    title: str
    panels: tuple[Panel, ...]


@dataclass(frozen=True)
class Variable:
    """A custom variable whose values come from the plan or the site repo (not from a label query)."""

    name: str
    label: str
    values: tuple[str, ...]
    current: str | None = None  # None: all values


@dataclass
class DashboardSpec:
    uid: str
    title: str
    description: str
    variables: list[Variable]
    rows: list[Row] = field(default_factory=list)

    def panels(self) -> list[Panel]:
        return [panel for row in self.rows for panel in row.panels]


def reference(value: float, legend: str) -> Query:
    """A constant line: a figure of the plan or a target, drawn beside the measured series."""
    return Query(f"vector({value:g})", legend)


def _target(query: Query, ref: str) -> prometheus.Dataquery:
    return prometheus.Dataquery().expr(query.expr).legend_format(query.legend).ref_id(ref).datasource(DATASOURCE)


def _panel(panel: Panel) -> timeseries.Panel | stat.Panel:
    built: timeseries.Panel | stat.Panel
    if panel.kind == "timeseries":
        legend = gc.VizLegendOptions().show_legend(True).display_mode(LegendDisplayMode.LIST)
        legend = legend.calcs(["lastNotNull"] if panel.last_in_legend else [])
        built = (
            timeseries.Panel()
            .legend(legend.placement(LegendPlacement.BOTTOM))
            .tooltip(gc.VizTooltipOptions().mode(TooltipDisplayMode.MULTI))
        )
    else:  # the last value of each series
        built = stat.Panel().reduce_options(gc.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
    built = built.title(panel.title).unit(panel.unit).datasource(DATASOURCE).height(PANEL_HEIGHT).span(PANEL_WIDTH)
    if panel.description:
        built = built.description(panel.description)
    for i, query in enumerate(panel.queries):
        built = built.with_target(_target(query, chr(ord("A") + i)))
    return built


def _variable(variable: Variable) -> gd.CustomVariable:
    built = (
        gd.CustomVariable(variable.name)
        .label(variable.label)
        .values(",".join(variable.values))
        .multi(True)
        .include_all(True)
        .all_value(".*")
    )
    if variable.current is not None:
        built = built.current(VariableOption(selected=True, text=variable.current, value=variable.current))
    else:
        built = built.current(VariableOption(selected=True, text="All", value="$__all"))
    return built


def grafana_json(spec: DashboardSpec) -> dict[str, Any]:
    """The dashboard as Grafana's JSON model (what the sidecar loads from the ConfigMap)."""
    builder = (
        gd.Dashboard(spec.title)
        .uid(spec.uid)
        .description(spec.description)
        .tags(["llm-fabric", "generated"])
        .time("now-6h", "now")
        .refresh("1m")
        .readonly()
        .with_variable(gd.DatasourceVariable("datasource").label("Prometheus").type("prometheus"))
    )
    for variable in spec.variables:
        builder = builder.with_variable(_variable(variable))
    for row in spec.rows:
        builder = builder.with_row(gd.Row(row.title))
        for panel in row.panels:
            builder = builder.with_panel(_panel(panel))
    encoded: dict[str, Any] = json.loads(JSONEncoder(sort_keys=True).encode(builder.build()))
    return encoded
