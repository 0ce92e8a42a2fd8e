"""csvtally: sums a CSV file's numeric columns.

A Python tool over files: it asks for /workspace (read-only) in its
`export`, and reads only what the operator maps there.
"""

import csv
from dataclasses import dataclass
from typing import Annotated

from longhand_tool import DirRequest, Effect, InvalidInput, export, tool


@dataclass
class Tally:
    """Which CSV file."""

    path: Annotated[str, "a .csv file under /workspace, e.g. /workspace/sales.csv"]


@tool(effect=Effect.READ_ONLY)
def tally(input: Tally) -> dict:
    """Count a CSV file's rows and sum its numeric columns."""
    if not input.path.endswith(".csv"):
        raise InvalidInput(f"{input.path} is not a .csv file")
    with open(input.path, newline="") as f:
        rows = list(csv.DictReader(f))
    sums = {}
    for row in rows:
        for k, v in row.items():
            try:
                sums[k] = sums.get(k, 0) + int(v)
            except (TypeError, ValueError):
                pass
    return {"rows": len(rows), "sums": sums}


Tools = export(
    name="csvtally",
    version="0.1.0",
    description="Sums CSV files.",
    dirs=[DirRequest("/workspace", "the CSV files to sum")],
)
