"""Which candidates share one reference: `Groups` turns the group name a caller passes to `submit` into a
ticket, and says when a ticket's candidates are all back (`kernelbench.harness.reference_cache`).

A ticket is one generation of a group: every candidate submitted under the group name joins the open
generation, until one of them comes back judged by a run stage; later submissions under that name start a
new generation, with seeds and a reference of their own. Why: a judged result's feedback can carry what the
candidate saw (its inputs, printed by a runtime error) and expected values (`compare`'s mismatch positions);
a candidate written after its author read such feedback must never be judged on the same seeds. Results
decided before the run stage (format, static checks, compile errors) saw no seed and seal nothing, so a fast
format error does not split a group. When a generation's last candidate is back, its references are freed.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable


class Groups:
    """Tickets by group name; thread-safe. `on_done(ticket)` runs once a generation has no candidate left."""

    def __init__(self, on_done: Callable[[str], None]):
        self._on_done = on_done
        self._open: dict[str, str] = {}  # group name -> its open generation's ticket
        self._in_flight: dict[str, int] = {}  # ticket -> candidates submitted and not yet back
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()

    def join(self, group: str) -> str:
        """The ticket of a candidate submitted under `group` now ("" for none: nothing shared)."""
        if not group:
            return ""
        with self._lock:
            ticket = self._open.get(group)
            if ticket is None:
                ticket = self._open[group] = f"{group}#{next(self._numbers)}"
            self._in_flight[ticket] = self._in_flight.get(ticket, 0) + 1
            return ticket

    def back(self, ticket: str, judged: bool) -> None:
        """A candidate of `ticket` is back; call before its result is handed out. `judged`: its run stage ran
        (it saw the group's inputs), which closes the generation to new candidates."""
        if not ticket:
            return
        with self._lock:
            group = ticket.rpartition("#")[0]
            left = self._in_flight[ticket] - 1
            if judged or left == 0:
                if self._open.get(group) == ticket:
                    del self._open[group]
            if left:
                self._in_flight[ticket] = left
                return
            del self._in_flight[ticket]
        self._on_done(ticket)

    def open_tickets(self) -> int:
        with self._lock:
            return len(self._in_flight)
