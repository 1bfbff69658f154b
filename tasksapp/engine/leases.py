"""Until when the leases a worker holds are surely its own, and when it renews them next.

A lease's end is measured from before the claim or renewal that set it, so the database's
lease_until is never earlier. Past it, another worker may have taken the tasks, and none is polled
until a renewal says which stay (a starved or frozen process renews late).
"""

from django.conf import settings


def span() -> float:
    """How long a claim or renewal holds a lease, in seconds (MCP_LEASE_SECONDS)."""
    return float(settings.MCP_LEASE_SECONDS)


class LeaseClock:
    """Monotonic seconds, kept by the worker around its store.adopt, store.renew and store.claim."""

    def __init__(self) -> None:
        self.until = 0.0  # every lease held is this worker's until then
        self._next_renewal = 0.0

    def held_from(self, began: float) -> None:
        """The adoption, renewal or claim that began at `began` worked: its leases last a span from then."""
        self.until = began + span()

    def renewal_due(self, now: float) -> bool:
        return now >= self._next_renewal

    def renewing(self, began: float) -> None:
        """A renewal began at `began`: the next is due a third of a span later, whether it works or not."""
        self._next_renewal = began + span() / 3

    def renew_soon(self) -> None:
        """Renew at the next refresh."""
        self._next_renewal = 0.0

    def lapsing(self, now: float) -> bool:
        """True if the leases may have lapsed by `now` (within a fifth of a span of their end); a
        renewal is then due at the next refresh."""
        if now <= self.until - span() / 5:
            return False
        self.renew_soon()
        return True
