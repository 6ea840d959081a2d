"""The tolerance report: every path x dtype x input family compared to the reference.

``rows`` runs the comparisons and holds the text formats (``table``, ``markdown``, ``json``);
``html`` renders the self-contained page from ``templates/``. ``render(report, fmt)`` picks one.
"""
from __future__ import annotations

from equiv.ops.draft_topk.report.html import format_html
from equiv.ops.draft_topk.report.rows import format_json, format_markdown, format_table

FORMATS = ("table", "markdown", "json", "html")


def render(report, fmt: str, mtp_section=None) -> str:
    """``report`` (``rows.Report``) in ``fmt``; the HTML page embeds ``mtp_section`` (an MTP run's
    histogram and records, ``equiv.mtp.report.html_section``) when given."""
    if fmt == "html":
        return format_html(report, mtp_section)

    return {"table": format_table, "markdown": format_markdown, "json": format_json}[fmt](report)
