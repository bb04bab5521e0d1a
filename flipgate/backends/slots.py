"""A bound on the requests in flight to one endpoint, shared by every process of one run.

A models.yaml entry's ``concurrency`` is the most requests in flight to that entry for the whole
run: under pytest-xdist all workers together, not each. :class:`Slots` is that bound, an asyncio
semaphore whose slots are shared by every process that makes one with the same ``key`` and
``run_dir`` (:func:`run_slots_dir`: one folder per xdist run), and move to whichever process has
requests waiting.

How (``run_dir/<sha256(key)[:16]>/``):

* ``slot-0`` ... ``slot-<total-1>``: empty lock files. A process holds a slot while it holds
  that file's ``flock`` (taken with ``LOCK_NB``: the event loop never blocks). Every request in
  flight uses a slot this process holds, so the total is never exceeded; the kernel drops the
  locks of a process that dies, so no slot is lost. The files are never deleted (deleting a lock
  file others may have open breaks the lock).
* A process reuses a slot it holds for its next waiting request without a system call (the common
  case under load costs microseconds); a slot with no request waiting here is unlocked at once.
* ``want-<pid>-<token>``: a process whose requests wait for a slot it cannot get says so there
  (slots held, since when, last poll), locked while it lives, and polls the slot files every
  :data:`POLL_MIN_S` to :data:`POLL_MAX_S`. Each process reads the others' at most every
  :data:`REFRESH_S`, and the slots are balanced by two rules: a free slot is taken first by the
  waiting process holding fewest (the one waiting longest among equals), and a process gives a
  slot back at a release, instead of reusing it, when a waiting process holds two fewer than it
  does, or holds none and has waited :data:`STARVE_S` (more processes than slots take turns).
  These files only steer who gets the next slot; the bound rests on the locks alone.

``run_dir`` None: the slots are this process's only (an asyncio semaphore, no files).
"""

from __future__ import annotations

import asyncio
import collections
import fcntl
import hashlib
import os
import re
import tempfile
import time
import uuid
from pathlib import Path
from types import TracebackType
from typing import Callable

#: a waiting process tries the slot files again after this, then a little later each time...
POLL_MIN_S = 0.005
#: ... up to this
POLL_MAX_S = 0.02
POLL_GROWTH = 1.3
#: how old the other processes' ``want-*`` files read last may be
REFRESH_S = 0.01
#: a waiting process holding no slot for this long gets one at the next release of a holder
STARVE_S = 0.25
#: a ``want-*`` file whose process has not polled for this long is ignored (its loop is stuck)
STALE_S = 1.0

_WANT = "want-"


def slots_dir_for(testrunuid: str) -> Path:
    """The slots folder of the pytest-xdist run ``testrunuid``, under ``tempfile.gettempdir()``
    (the controller can remove it when the run ends: ``shutil.rmtree(..., ignore_errors=True)``)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", testrunuid)[:64]
    return Path(tempfile.gettempdir()) / f"flipgate-slots-{safe}"


def run_slots_dir() -> Path | None:
    """The folder shared by the workers of this pytest-xdist run (:func:`slots_dir_for` of
    ``PYTEST_XDIST_TESTRUNUID``, which xdist sets alike in every worker); None outside xdist."""
    uid = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    return slots_dir_for(uid) if uid else None


class Slots:
    """At most ``total`` holders at once across every process that makes a Slots with the same
    ``key`` and ``run_dir`` (None: this process only). ``await acquire()`` before a request and
    ``release()`` after it (or ``async with slots:``); ``close()`` when the batch ends or fails.
    One event loop at a time; after :meth:`close` it can serve the next batch (another loop).
    Call ``close()`` in a ``finally`` once every request task has ended: until then this process
    keeps the slots it holds (a Slots dropped unclosed closes when collected, a process that
    dies loses its slots to the kernel). Processes sharing a key should pass the same ``total``
    (the bound is the largest one)."""

    def __init__(
        self,
        key: str,
        total: int,
        run_dir: Path | None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if total < 1:
            raise ValueError(f"slots: total must be at least 1, not {total}")
        self.key = key
        self.total = total
        self._dir = None if run_dir is None else Path(run_dir) / _digest(key)
        self._held = 0  # slots this process holds (locked slot files)
        self._busy = 0  # of them, in use by a request (all, but for a moment)
        self._stale = 0  # requests still in flight at close(): their release() is ignored
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._poller: asyncio.Task[None] | None = None
        # the slot files: one descriptor each while open, which of them this process has locked
        self._fds: list[int] = []
        self._mine: list[int] = []
        self._is_mine = [False] * total
        self._start = os.getpid() % total  # where this process's scan of the files begins
        # this process's want file, and what it last said: slots held while waiting, or -1
        self._want_fd: int | None = None
        self._want_name = ""
        self._shown = -1
        self._since = 0.0
        # the other processes' want files, as last read: [held, since] each
        self._others: list[list[float]] = []
        self._read_at = -float("inf")
        # statistics: the integral of _busy over time since the last reset
        self._clock = clock
        self._reset_at = self._changed_at = clock()
        self._area = 0.0

    # -- the interface --------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        """Requests of this process holding a slot now."""
        return self._busy

    @property
    def held(self) -> int:
        """Slots this process holds now (in flight, or being handed to the next request)."""
        return self._held

    async def acquire(self) -> None:
        """Wait until this process may start one more request."""
        if not self._waiters and self._busy < self._held:
            self._count(1)
            return
        if not self._waiters and self._may_take() and self._lease():
            self._count(1)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        if self._dir is not None:
            self._publish()
            self._start_poller()
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # handed a slot, then cancelled: pass it on
                self.release()
            else:
                try:
                    self._waiters.remove(fut)
                except ValueError:
                    pass
                self._publish()
            raise

    def release(self) -> None:
        """One request ended: its slot goes to this process's next waiting request, or back."""
        if self._stale:
            self._stale -= 1
            return
        if self._busy <= 0:
            raise RuntimeError("slots: release() without acquire()")
        waiters = self._waiters
        while waiters:
            fut = waiters[0]
            if fut.done():  # cancelled while waiting; its task removes it
                waiters.popleft()
                continue
            if self._dir is not None and self._owe():
                break
            waiters.popleft()
            fut.set_result(None)  # the slot stays in use: _busy is unchanged
            if not waiters:
                self._publish()
            return
        self._count(-1)
        self._unlease()
        self._publish()

    def close(self) -> None:
        """Give back every slot this process holds, and end its waiting (idempotent). A request
        still in flight may release after this; that release is ignored."""
        poller, self._poller = self._poller, None
        if poller is not None and not poller.done():
            try:
                poller.cancel()
            except RuntimeError:  # its loop is closed
                pass
        waiters, self._waiters = list(self._waiters), collections.deque()
        for fut in waiters:
            if not fut.done():
                try:
                    fut.cancel()
                except RuntimeError:
                    pass
        self._stale += self._busy
        self._count(-self._busy)
        while self._mine:
            self._unlease()
        self._held = 0
        fds, self._fds = self._fds, []
        for fd in fds:
            os.close(fd)
        if self._want_fd is not None and self._dir is not None:
            try:
                os.unlink(self._dir / self._want_name)
            except FileNotFoundError:
                pass
            os.close(self._want_fd)
            self._want_fd = None
            self._shown = -1

    def __del__(self) -> None:  # dropped without close(): its slots go back all the same
        try:
            self.close()
        except Exception:
            pass

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def mean_in_flight(self) -> float:
        """The time-weighted mean of this process's requests in flight since the last
        :meth:`reset_stats` (or since it was made); the number now if no time has passed."""
        now = self._clock()
        span = now - self._reset_at
        if span <= 0:
            return float(self._busy)
        return (self._area + self._busy * (now - self._changed_at)) / span

    def reset_stats(self) -> None:
        self._reset_at = self._changed_at = self._clock()
        self._area = 0.0

    # -- in this process --------------------------------------------------------------------

    def _count(self, delta: int) -> None:
        now = self._clock()
        self._area += self._busy * (now - self._changed_at)
        self._changed_at = now
        self._busy += delta

    def _lease(self) -> bool:
        """Hold one more slot, if one is free: a slot file no process has locked."""
        if self._dir is None:
            if self._held >= self.total:
                return False
            self._held += 1
            return True
        if not self._fds:
            self._open()
        for k in range(self.total):
            i = (self._start + k) % self.total
            if self._is_mine[i]:
                continue
            try:
                fcntl.flock(self._fds[i], fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            self._is_mine[i] = True
            self._mine.append(i)
            self._held += 1
            return True
        return False

    def _unlease(self) -> None:
        self._held -= 1
        if self._mine:
            i = self._mine.pop()
            self._is_mine[i] = False
            # unlocked explicitly: a forked child sharing the descriptor would keep the lock
            fcntl.flock(self._fds[i], fcntl.LOCK_UN)

    def _open(self) -> None:
        assert self._dir is not None
        self._dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
        self._fds = [os.open(self._dir / f"slot-{i}", flags, 0o600) for i in range(self.total)]

    def _start_poller(self) -> None:
        loop = asyncio.get_running_loop()
        p = self._poller
        if p is None or p.done() or p.get_loop() is not loop:
            self._poller = loop.create_task(self._poll())

    async def _poll(self) -> None:
        """While requests here wait, try the slot files now and then and hand each slot taken
        to the first of them; an error fails them all (none waits forever)."""
        delay = POLL_MIN_S
        try:
            while self._waiters:
                await asyncio.sleep(delay)
                took = False
                while self._first_waiter() is not None and self._may_take() and self._lease():
                    fut = self._waiters.popleft()
                    self._count(1)
                    fut.set_result(None)
                    took = True
                self._first_waiter()
                self._publish(beat=True)
                delay = POLL_MIN_S if took else min(delay * POLL_GROWTH, POLL_MAX_S)
        except Exception as exc:
            waiters, self._waiters = list(self._waiters), collections.deque()
            for fut in waiters:
                if not fut.done():
                    fut.set_exception(exc)
            try:
                self._publish()
            except OSError:
                pass

    def _first_waiter(self) -> asyncio.Future[None] | None:
        while self._waiters and self._waiters[0].done():
            self._waiters.popleft()
        return self._waiters[0] if self._waiters else None

    # -- with the other processes -----------------------------------------------------------

    def _may_take(self) -> bool:
        """Whether this process may take a free slot: no waiting process holds fewer, or as
        many and has waited longer (checked against the want files read last)."""
        if self._dir is None:
            return True
        self._read_others(time.monotonic())
        me = (self._held, self._since if self._shown >= 0 else float("inf"))
        return not any((held, since) < me for held, since in self._others)

    def _owe(self) -> bool:
        """Whether the slot being released should go back for a waiting process elsewhere."""
        now = time.monotonic()
        self._read_others(now)
        for other in self._others:
            held, since = other
            if held <= self._held - 2 or (held == 0 and now - since >= STARVE_S):
                other[0], other[1] = held + 1, now  # counted as served until read again
                return True
        return False

    def _read_others(self, now: float) -> None:
        if now - self._read_at < REFRESH_S:
            return
        self._read_at = now
        assert self._dir is not None
        others: list[list[float]] = []
        try:
            entries = list(os.scandir(self._dir))
        except FileNotFoundError:
            entries = []
        for entry in entries:
            if not entry.name.startswith(_WANT) or entry.name == self._want_name:
                continue
            try:
                fd = os.open(entry.path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                except BlockingIOError:  # its process lives
                    text = os.pread(fd, 64, 0)
                else:  # its process died: the name is never used again
                    try:
                        os.unlink(entry.path)
                    except FileNotFoundError:
                        pass
                    continue
            finally:
                os.close(fd)
            try:
                held, since, beat = (float(f) for f in text.split())
            except ValueError:
                continue
            if held >= 0 and now - beat <= STALE_S:
                others.append([held, since])
        self._others = others

    def _publish(self, beat: bool = False) -> None:
        """Say in this process's want file how many slots it holds while requests wait here
        (-1: none waits). Written only when that changes, or at a poll (``beat``)."""
        if self._dir is None:
            return
        shown = self._held if self._waiters else -1
        if shown == self._shown and not beat:
            return
        now = time.monotonic()
        if shown != self._shown:
            self._since = now
            self._shown = shown
        line = f"{shown:6d} {self._since:18.6f} {now:18.6f}\n".encode()
        if self._want_fd is None:
            if shown < 0:
                return
            self._make_want_file(line)
        else:
            os.pwrite(self._want_fd, line, 0)

    def _make_want_file(self, line: bytes) -> None:
        """Written and locked under a hidden name, then renamed: a ``want-*`` file not locked
        is one whose process died, and its name (pid and a random token) is never used again."""
        assert self._dir is not None
        self._dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        name = f"{_WANT}{os.getpid()}-{uuid.uuid4().hex[:12]}"
        hidden = self._dir / f".{name}"
        fd = os.open(hidden, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new file: nobody else has it
        os.pwrite(fd, line, 0)
        os.rename(hidden, self._dir / name)
        self._want_fd, self._want_name = fd, name


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16]
