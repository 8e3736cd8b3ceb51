"""`--format json`: the versioned report document (schema in findings.REPORT_SCHEMA)."""

from __future__ import annotations

import json


def render_json(report) -> str:
    return json.dumps(report.to_dict(), indent=2)
