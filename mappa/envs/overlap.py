"""Train/eval overlap: held-out problems that repeat training problems, found before any training.

Two problems overlap when their normalised texts are equal (case, whitespace, punctuation and a leading number
such as `3.`, `Problem 12:` or `(a)` ignored), or when at least half of the held-out problem's runs of 13
normalised words are found in one training problem (13-grams as in GPT-3's contamination study; a text shorter
than 13 words is one run, so short problems overlap only when equal; a lightly edited copy shares most runs, a
templated problem with other numbers and names few). Runs that recur in TEMPLATE_COUNT or more training
problems are shared wording (a task template, "It is on sale for 10% off. What is the sale price in dollars?")
and do not count. The MAPPA paper's own AIME evaluation overlapped its training pool in about 20 of 32
problems; `env.overlap` says what to do: `drop` the overlapping eval problems (default), `warn`, or stop with
an `error`.

Not covered: paraphrases that share no 13 words, or a problem rewritten throughout with other numbers.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from mappa.core.types import Problem

NGRAM = 13
NEAR_SHARE = 0.5
"""A held-out problem is a near-duplicate of the training problem it shares this share of its runs with."""
TEMPLATE_COUNT = 3
"""A run of words found in this many training problems or more is the data's template (instructions, a
generator's wording), not a problem: it is not counted as overlap."""
_NUMBERING = re.compile(
    r"^\s*(?:(?:problem|question|exercise|q)\s*#?\s*\d+\s*[.):-]?|#?\d+\s*[.):]|\(?[a-z]\))\s+", re.I
)
_WORD = re.compile(r"[a-z0-9]+|[-+*/×÷=]")  # operators count: "15 - 9" is not "15 + 9"


@dataclass(frozen=True)
class Overlap:
    eval_id: str
    train_id: str
    how: str
    """`exact` (equal normalised texts) or `13-gram` (a shared run of 13 words)."""


def normalised_words(text: str) -> tuple[str, ...]:
    return tuple(_WORD.findall(_NUMBERING.sub("", text.strip(), count=1).lower()))


def _grams(words: tuple[str, ...]) -> set[tuple[str, ...]]:
    if len(words) <= NGRAM:
        return {words} if words else set()
    return {words[i : i + NGRAM] for i in range(len(words) - NGRAM + 1)}


def find_overlap(train: Sequence[Problem], held_out: Sequence[Problem]) -> list[Overlap]:
    """One `Overlap` per held-out problem that repeats a training problem (the closest one)."""
    exact: dict[tuple[str, ...], str] = {}
    holders: dict[tuple[str, ...], set[str]] = defaultdict(set)
    for problem in train:
        words = normalised_words(problem.question)
        exact.setdefault(words, problem.id)
        for gram in _grams(words):
            holders[gram].add(problem.id)
    found = []
    for problem in held_out:
        words = normalised_words(problem.question)
        if words in exact:
            found.append(Overlap(problem.id, exact[words], "exact"))
            continue
        grams = _grams(words)
        shared: Counter = Counter()
        for gram in grams:
            if len(holders.get(gram, ())) < TEMPLATE_COUNT:
                shared.update(holders.get(gram, ()))
        if shared:
            train_id, count = shared.most_common(1)[0]
            if count / len(grams) >= NEAR_SHARE:
                found.append(Overlap(problem.id, train_id, f"{NGRAM}-gram"))
    return found


def overlap_report(train: Sequence[Problem], held_out: Sequence[Problem]) -> dict:
    """What a run records: counts and up to five examples."""
    found = find_overlap(train, held_out)
    return {
        "eval_problems": len(held_out),
        "overlapping": len(found),
        "eval_ids": [o.eval_id for o in found],
        "examples": [{"eval": o.eval_id, "train": o.train_id, "how": o.how} for o in found[:5]],
    }
