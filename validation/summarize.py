"""The table of ``validation/README.md`` from the SBC results in ``validation/results/*.json``.

Usage::

    .venv/bin/python validation/summarize.py            # prints the markdown table
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

RESULTS = Path(__file__).parent / "results"


def rows(results: Path = RESULTS) -> list[str]:
    out = [
        "| path | what is fitted | sims (failed) | divergent sims | low ESS | parameter | "
        "ECDF p | χ² p | mean rank / L | verdict | time |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for f in sorted(results.glob("*.json")):
        s = json.loads(f.read_text())
        if "uniformity" not in s:  # not an SBC result (predictive_calibration.json)
            continue
        first = True
        for name, u in s["uniformity"].items():
            head = (
                [f"`{s['path']}`", s["what"], f"{s['n_simulations']} ({s['n_failed']})",
                 str(s["divergent_simulations"]), str(s["low_ess"])]
                if first else [""] * 5
            )  # fmt: skip
            tail = (
                ["passes" if s["passed"] else "**fails**", f"{s['seconds'] / 60:.0f} min"]
                if first else ["", ""]
            )  # fmt: skip
            out.append(
                "| " + " | ".join([*head, f"`{name}`", f"{u['ecdf_p']:.3g}", f"{u['chi2_p']:.3g}",
                                   f"{u['mean_fraction']:.3f}", *tail]) + " |"
            )  # fmt: skip
            first = False
    return out


def main() -> int:
    print("\n".join(rows()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
