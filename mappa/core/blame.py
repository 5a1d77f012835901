"""Does a coach blame the agent that caused a failure? Figures over counterfactual pairs.

A pair is one trajectory replayed twice from the same stored actions: once as it was and once with one
action corrupted (a wrong number, a program that raises, an empty reply...), every later action generated
anew by the same policy both times (`mappa.envs.replay`). Upstream actions are identical in both; the
corrupted action differs; downstream agents react. A coach scores both, and per seat we take the change in
its score, `drop = score(original) - score(corrupted)` (points of 10; the mean over the seat's actions, and
for the corrupted seat its corrupted action alone). MAPPA's claim is credit assignment: the corrupted seat
should lose, the others should not.

    blame accuracy        share of pairs whose corrupted seat drops strictly more than every other seat
                          (ties are misses: outcome-only gives every seat the same change, so its accuracy
                          is 0, the floor); also over the pairs whose original team succeeded alone
    innocent penalty      mean drop of the seats that did nothing differently (upstream: their actions are
                          the same text; downstream: they acted anew), in points of 10
    reporter penalty      mean drop of a downstream seat that did its part in the corrupted replay anyway
                          (the env's `seat_checks`: it reported or worked around the upstream failure)

Reference: Who&When (Zhang et al., ICML 2025) scores failure attribution on real multi-agent logs; a
replayed corruption is an easier, sharper test. Not covered: several corruptions in one trajectory.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any

from mappa.core.types import Trajectory

ORIGINAL = "original"
"""The corruption name of a plan that replays an action as stored (a pair's original)."""


@dataclass(frozen=True)
class BlamePair:
    """One corrupted replay and its original, scored by one coach.

    `original` and `corrupted` are per-seat mean scores (0-10) in the two replays, `target_original` and
    `target_corrupted` the corrupted action's own score in each; `seats` the env's seats in acting order;
    `did_part` per seat whether it did its part in the corrupted replay (None where the env cannot say)."""

    coach: str
    seat: str
    corruption: str
    seats: tuple[str, ...]
    original: dict[str, float]
    corrupted: dict[str, float]
    target_original: float
    target_corrupted: float
    did_part: dict[str, bool] = field(default_factory=dict)
    original_correct: bool | None = None
    """Whether the team succeeded in the original replay: from a success every seat did its part, so the
    corruption alone made the difference (the sharpest pairs)."""

    def drops(self) -> dict[str, float]:
        """Per seat, how much its score fell from the original to the corrupted replay (the corrupted seat:
        its corrupted action's)."""
        drops = {
            seat: self.original[seat] - self.corrupted[seat]
            for seat in self.seats
            if seat in self.original and seat in self.corrupted
        }
        drops[self.seat] = self.target_original - self.target_corrupted
        return drops

    def blamed(self) -> bool:
        """Whether the corrupted seat dropped strictly more than every other seat."""
        drops = self.drops()
        others = [drop for seat, drop in drops.items() if seat != self.seat]
        return all(drops[self.seat] > drop for drop in others)

    def innocent_drops(self) -> dict[str, list[float]]:
        """The other seats' drops, split into those upstream and downstream of the corrupted seat."""
        position = self.seats.index(self.seat)
        split: dict[str, list[float]] = {"upstream": [], "downstream": []}
        for seat, drop in self.drops().items():
            if seat != self.seat:
                split["upstream" if self.seats.index(seat) < position else "downstream"].append(drop)
        return split

    def reporter_drops(self) -> list[float]:
        """The drops of downstream seats that did their part in the corrupted replay."""
        position = self.seats.index(self.seat)
        return [
            drop
            for seat, drop in self.drops().items()
            if self.seats.index(seat) > position and self.did_part.get(seat)
        ]


def replay_pairs(
    plans: list[dict[str, Any]],
    replays: list[Trajectory],
    scores: dict[str, float],
    coach: str,
    seats: tuple[str, ...],
    seat_checks: Callable[[Trajectory], dict[str, bool]] | None = None,
) -> list[BlamePair]:
    """The pairs of one coach: each corrupted replay against the original replay of the same action.
    `plans` as the replays were planned (`id`, `seat`, `index`, `corruption`; an original's id ends in
    `:original`, a corruption's in `:<its name>`), `scores` every replayed action's score by id; the env's
    `seat_checks` say which seats did their part in a corrupted replay."""
    by_id = {trajectory.id: trajectory for trajectory in replays}
    pairs = []
    for plan in plans:
        if plan["corruption"] == ORIGINAL:
            continue
        original = by_id[plan["id"].rsplit(":", 1)[0] + f":{ORIGINAL}"]
        corrupted = by_id[plan["id"]]
        pairs.append(
            BlamePair(
                coach=coach,
                seat=plan["seat"],
                corruption=plan["corruption"],
                seats=seats,
                original=_seat_means(original, scores),
                corrupted=_seat_means(corrupted, scores),
                target_original=scores[_action_at(original, plan["index"])],
                target_corrupted=scores[_action_at(corrupted, plan["index"])],
                did_part=seat_checks(corrupted) if seat_checks else {},
                original_correct=original.correct,
            )
        )
    return pairs


def _seat_means(trajectory: Trajectory, scores: dict[str, float]) -> dict[str, float]:
    by_seat: dict[str, list[float]] = {}
    for action in trajectory.actions:
        by_seat.setdefault(action.agent, []).append(scores[action.id])
    return {seat: fmean(values) for seat, values in by_seat.items()}


def _action_at(trajectory: Trajectory, index: int) -> str:
    return next(a.id for a in trajectory.actions if a.index == index)


def blame_rows(pairs: list[BlamePair]) -> list[dict]:
    """One row per (coach, corrupted seat), in the order first seen: pairs, blame accuracy, the corrupted
    seat's mean drop, the innocent penalty up- and downstream, and the reporter penalty (None where no pair
    had such a seat)."""
    groups: dict[tuple[str, str], list[BlamePair]] = defaultdict(list)
    for pair in pairs:
        groups[pair.coach, pair.seat].append(pair)
    rows = []
    for (coach, seat), group in groups.items():
        innocent = {
            side: [d for p in group for d in p.innocent_drops()[side]] for side in ("upstream", "downstream")
        }
        reporters = [d for p in group for d in p.reporter_drops()]
        everyone = innocent["upstream"] + innocent["downstream"]
        rows.append(
            {
                "coach": coach,
                "seat": seat,
                "pairs": len(group),
                "blame_accuracy": fmean(p.blamed() for p in group),
                **_from_success(group),
                "corrupted_seat_drop": fmean(p.drops()[seat] for p in group),
                "innocent_penalty": _mean(everyone),
                "innocent_penalty_upstream": _mean(innocent["upstream"]),
                "innocent_penalty_downstream": _mean(innocent["downstream"]),
                "reporter_penalty": _mean(reporters),
                "reporters": len(reporters),
                "corruptions": sorted({p.corruption for p in group}),
                "by_corruption": _by_corruption(group),
            }
        )
    return rows


def _by_corruption(group: list[BlamePair]) -> dict[str, dict]:
    """Per corruption (sorted by name): its pairs and blame accuracy (say DSBench's `no-train-file`, the
    paper's "file not found" case, apart from the seat's other mistakes)."""
    names = sorted({pair.corruption for pair in group})
    return {
        name: {
            "pairs": len(mine := [p for p in group if p.corruption == name]),
            "blame_accuracy": fmean(p.blamed() for p in mine),
        }
        for name in names
    }


def corruption_accuracies(row: dict) -> str:
    """A row's `by_corruption` in one line, as the table and the docs show it: `name accuracy (pairs)`, ...;
    "-" when it has none."""
    figures = row.get("by_corruption", {})
    return ", ".join(f"{name} {f['blame_accuracy']:.2f} ({f['pairs']})" for name, f in figures.items()) or "-"


def _from_success(group: list[BlamePair]) -> dict:
    """Blame accuracy over the pairs whose original replay succeeded, and how many there were."""
    sharp = [pair for pair in group if pair.original_correct]
    return {
        "pairs_from_success": len(sharp),
        "blame_accuracy_from_success": _mean([p.blamed() for p in sharp]),
    }


def _mean(values: list[float]) -> float | None:
    return fmean(values) if values else None
