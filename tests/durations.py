"""Write ``tests/durations.json`` from a JUnit XML report of a test run.

    python -m tests.durations report.xml

Each test's setup, call and teardown time (what the XML's ``time`` holds) is summed per work
unit (:func:`tests.conftest.unit_of`: the test file, or one notebook), rounded to a second.
``./run test`` schedules the units longest first on the xdist workers.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

from tests.conftest import DURATIONS_FILE
from tests.conftest import unit_of as unit_of_nodeid


def unit_of(case: ET.Element) -> str:
    """The work unit of a ``<testcase>``: its file, or ``file::notebook`` for a notebook run."""
    classname, name = case.get("classname", ""), case.get("name", "")
    name = name.split("@", 1)[0]  # xdist's group suffix
    parts = classname.split(".")
    # the module is the longest prefix that names a test file
    for k in range(len(parts), 0, -1):
        path = Path(*parts[:k]).with_suffix(".py")
        if path.is_file():
            break
    else:
        path = Path(*parts).with_suffix(".py")
    return unit_of_nodeid(f"{path.as_posix()}::{name}")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    totals: dict[str, float] = defaultdict(float)
    for case in ET.parse(argv[0]).getroot().iter("testcase"):
        totals[unit_of(case)] += float(case.get("time", 0.0))
    ordered = dict(sorted(((k, round(v)) for k, v in totals.items()), key=lambda kv: -kv[1]))
    DURATIONS_FILE.write_text(json.dumps(ordered, indent=1) + "\n")
    print(f"{len(ordered)} units, {sum(ordered.values())} s in all -> {DURATIONS_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
