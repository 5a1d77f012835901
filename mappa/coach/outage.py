"""One outage clock per coach endpoint: how long it has not answered, when to try it again, when to give up.

A coach server that restarts (a vLLM server reloading its model: 1-5 minutes) refuses connections, times
out or answers 502/503/504 for a while and then answers again. `EndpointOutage` lets the requests of one
coach ride that out together: the first failure starts the clock; each failure after the scheduled try
schedules the next one (waits doubling from `first_wait_s`, at most `max_wait_s` apart, a numeric
`Retry-After` honoured within that cap) and logs one line; a request that fails in the meantime waits for
that same try instead of starting its own schedule, so the endpoint sees at most `max_concurrency`
requests per try, not a storm. Any HTTP answer other than 502/503/504 ends the outage. Once the outage has
lasted `budget_s`, `wait_s` says to give up, and the caller raises `CoachOutageError`.

Not covered: waits without jitter (the tries of one coach are meant to go together; separate runs against
one endpoint are not spread apart), and outages of a local coach's Ray worker (`mappa.cluster`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

OUTAGE_STATUS = frozenset({502, 503, 504})
"""HTTP answers that mean the server (or the proxy in front of it) is down or starting, not that the
request was wrong: retried within the outage budget like a refused connection."""

log = logging.getLogger(__name__)


class EndpointOutage:
    """The outage clock of one endpoint, shared by all requests of one coach (one asyncio loop)."""

    def __init__(
        self,
        url: str,
        budget_s: float,
        first_wait_s: float = 0.5,
        max_wait_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        say: Callable[[str], None] = log.warning,
    ) -> None:
        self.url = url
        self.budget_s = budget_s
        self.first_wait_s = first_wait_s
        self.max_wait_s = max_wait_s
        self.clock = clock
        self.say = say
        self.since: float | None = None  # when the current outage's first failure was seen
        self.next_try = 0.0  # when the requests waiting on this outage try again
        self.tries = 0  # scheduled tries so far in this outage
        self.last = ""  # the latest failure, as the error message will name it

    @property
    def down_s(self) -> float:
        """How long the current outage has lasted (0 when the endpoint answers)."""
        return 0.0 if self.since is None else self.clock() - self.since

    def answered(self) -> None:
        """The endpoint answered: the outage, if any, is over."""
        if self.since is not None and self.tries:
            self.say(f"coach endpoint {self.url} answers again after {self.down_s:.0f} s")
        self.since, self.next_try, self.tries = None, 0.0, 0

    def wait_s(self, failure: str, retry_after: float | None = None) -> float | None:
        """Record a failed request (`failure`: what went wrong); the seconds to wait before trying again, or
        None once the outage has lasted `budget_s` (give up)."""
        now = self.clock()
        if self.since is None:
            self.since, self.next_try, self.tries = now, now, 0
        self.last = failure
        down = now - self.since
        left = self.budget_s - down
        if left <= 0:
            return None
        if now >= self.next_try:  # the first failure since the last scheduled try: schedule the next one
            wait = self.first_wait_s * 2**self.tries if retry_after is None else retry_after
            wait = min(wait, self.max_wait_s, left)
            self.next_try = now + wait
            self.tries += 1
            budget = f"coach.outage_budget_s={self.budget_s:g}"
            if self.tries == 1:
                self.say(
                    f"coach endpoint {self.url} does not answer ({failure}); trying again in {wait:.2g} s, "
                    f"for up to {left:.0f} s ({budget})"
                )
            elif wait < left:
                self.say(
                    f"coach endpoint {self.url} unreachable for {down:.0f} s ({failure}); trying again in "
                    f"{wait:.2g} s, for up to {left:.0f} s more ({budget})"
                )
            else:
                self.say(
                    f"coach endpoint {self.url} unreachable for {down:.0f} s ({failure}); a last try in "
                    f"{wait:.2g} s ({budget})"
                )
        return self.next_try - now
