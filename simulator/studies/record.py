"""The one-record kinds' outputs (predict, startup, graph_memory): their record as a result's row, result.json and a
report.html table. A record's lists and dicts (sizes, notes, per-graph figures) stay out of the row and the table."""

from __future__ import annotations

from pathlib import Path


def flat(d: dict) -> dict:
    """The record without its list and dict values (a table row)."""
    return {k: v for k, v in d.items() if not isinstance(v, (list, dict))}


def write_record(out: Path | None, sc, d: dict, key: str, caption: str) -> None:
    """OUT/result.json ({scenario, KEY: record, rows: [record], summary_columns}) and OUT/report.html (one table)."""
    if out is None:
        return
    from simulator.common.jsonfile import write_json
    from simulator.report.html import table_html, write_html

    row = flat(d)
    write_json(out / "result.json", {"scenario": sc.model_dump(mode="json"), key: d, "rows": [d],
                                     "summary_columns": list(row)[:12]})
    write_html(out / "report.html", f"launchsim: {sc.name} ({sc.kind})", [], [table_html([row], caption)],
               intro=sc.description)


def as_result(d: dict, key: str) -> dict:
    """What `launchsim run` prints of a one-record kind: the record as the result's one row."""
    row = flat(d)
    return {key: d, "rows": [row], "summary_columns": list(row)[:12]}
