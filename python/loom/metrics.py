"""Reading the metrics files of `loom train ... --metrics FILE`: one JSON object a line.

Each app documents its keys (docs/LR.md, docs/MF.md, docs/LDA.md); `null` values (a test
metric without --test) read as None.
"""

import json


def read_metrics(path):
    """The lines of a metrics file as a list of dicts, in order. A line that is not a JSON
    object raises ValueError naming the file and line; an empty file gives []."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{number}: not JSON ({e.msg})") from None
            if not isinstance(row, dict):
                raise ValueError(f"{path}:{number}: a metrics line must be a JSON object")
            rows.append(row)
    return rows
