"""Reading the score out of a coach's answer: the last `PROCESS_SCORE: <0-10>` line.

Tolerated: any case, markdown emphasis around the label or the number (`**PROCESS_SCORE:** 7`), `=` for
`:`, brackets, decimals (`7.5`), and `7/10` or `7 out of 10`. Values outside 0-10 (and denominators other
than 10) are rejected, not clamped: a coach that says 11 or 7/100 did not follow the scale.

Not covered here: what to do when nothing parses (re-ask, then fallback: `mappa.coach.base`).
"""

from __future__ import annotations

import re

_SCORE = re.compile(
    r"PROCESS[_ ]SCORE[*_\s]*[:=][*_\s]*\[?\s*(?P<value>-?\d+(?:\.\d+)?)\s*\]?"
    r"(?:\s*(?:/|out\s+of)\s*(?P<denominator>\d+(?:\.\d+)?))?",
    re.IGNORECASE,
)


def parse_score(text: str | None) -> float | None:
    """The value of the last `PROCESS_SCORE:` with a number in `text`; None if absent or outside 0-10."""
    if not text:
        return None
    matches = list(_SCORE.finditer(text))
    if not matches:
        return None
    last = matches[-1]
    denominator = last.group("denominator")
    if denominator is not None and float(denominator) != 10.0:
        return None
    value = float(last.group("value"))
    if not 0.0 <= value <= 10.0:
        return None
    return value
