"""Stopping a run from outside: SIGINT (Ctrl-C) and SIGTERM (a CI runner cancelling a job, ``kill``)
end it the same way, with ``exitcodes.INTERRUPTED`` (docs/ci.md, "Interrupting a run").

The first signal stops the run as Ctrl-C does in pytest (a ``KeyboardInterrupt`` in the running
test, or in the xdist controller's loop) and asks the session to stop at the next test boundary,
so a ``KeyboardInterrupt`` that lands where Python cannot raise it (a finaliser, a garbage-collector
callback) still stops the run. The controller remembers the signal: the run's status is then
``INTERRUPTED`` whatever its cells said, the trials store records it (flipgate.store.TrialStore.
record_end), and the cards of what finished say so. A second signal is one line and is otherwise
ignored, so the store and the cards of what finished are still written; a third ends the process
at once (the run is then left unfinished, which ``flipgate baseline`` refuses).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from flipgate.exitcodes import INTERRUPTED

#: the signals that interrupt a run
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupts:
    """This process's handler of :data:`SIGNALS`, from :meth:`install` to :meth:`uninstall`.

    ``stop`` is called (once, with a reason) on the first signal, before the ``KeyboardInterrupt``
    is raised; with ``speak`` (the controller; an xdist worker's controller speaks for it) a later
    signal is one line on the terminal's stderr (a copy of it taken at :meth:`install`, which
    pytest's output capture does not redirect)."""

    def __init__(self, stop: Callable[[str], None], speak: bool) -> None:
        self.stop, self.speak = stop, speak
        self._say: int | None = None
        #: the name of the first signal received (``SIGINT``, ``SIGTERM``), None before any
        self.received: str | None = None
        self.count = 0
        self._previous: dict[int, Any] = {}
        self._unraisable: Callable[[Any], Any] | None = None

    def install(self) -> None:
        """Handle :data:`SIGNALS` (only the main thread can: elsewhere, e.g. pytest run inside a
        thread, nothing changes)."""
        if threading.current_thread() is not threading.main_thread():
            return
        self._say = os.dup(2) if self.speak else None
        for sig in SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)
        self._unraisable = sys.unraisablehook
        sys.unraisablehook = self._swallowed

    def uninstall(self) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()
        if self._unraisable is not None and sys.unraisablehook == self._swallowed:
            sys.unraisablehook = self._unraisable
        self._unraisable = None
        if self._say is not None:
            os.close(self._say)
            self._say = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        self.count += 1
        if self.count == 1:
            self.received = name
            self.stop(f"interrupted by {name}")
            raise KeyboardInterrupt(name)
        if self.count == 2:
            self._line(
                f"flipgate: {name} again: still stopping (writing the trials store's status and "
                "the cards of what finished); a third one stops at once and leaves the run "
                "unfinished"
            )
            return
        self._line(f"flipgate: {name} a third time: stopped at once; the run is left unfinished")
        os._exit(INTERRUPTED)

    def _swallowed(self, unraisable: Any) -> None:
        """``sys.unraisablehook``: the ``KeyboardInterrupt`` this handler raised inside a finaliser
        or a garbage-collector callback, where Python cannot raise it, is dropped (the run already
        stops at the next test boundary, see :class:`Interrupts`); anything else goes to the hook
        that was in place (pytest's)."""
        if self.received is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
            return
        if self._unraisable is not None:
            self._unraisable(unraisable)

    def _line(self, text: str) -> None:
        if self._say is not None:
            try:
                os.write(self._say, f"\n{text}\n".encode())
            except OSError:
                pass
