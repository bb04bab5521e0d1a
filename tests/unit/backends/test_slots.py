"""flipgate.backends.slots: a bound on requests in flight shared by the processes of one run."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from support.paths import REPO

from flipgate.backends.slots import Slots, _digest, run_slots_dir, slots_dir_for

# -- in one process --------------------------------------------------------------------------


def most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most of ``spans`` (start, end) that overlap at one instant (an end before a start)."""
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    now = most = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


async def many_tasks(slots: Slots, tasks: int, reps: int, hold_s: float) -> list[int]:
    """``tasks`` tasks each taking a slot ``reps`` times; the number held at each start."""
    seen: list[int] = []
    running = 0

    async def one() -> None:
        nonlocal running
        for _ in range(reps):
            async with slots:
                running += 1
                seen.append(running)
                await asyncio.sleep(hold_s)
                running -= 1

    try:
        await asyncio.gather(*(one() for _ in range(tasks)))
    finally:
        slots.close()
    return seen


@pytest.mark.parametrize("files", [False, True], ids=["in-process", "files"])
def test_never_more_than_total_in_one_process(tmp_path, files):
    slots = Slots("entry", 3, tmp_path if files else None)
    seen = asyncio.run(many_tasks(slots, tasks=20, reps=3, hold_s=0.001))
    assert len(seen) == 60
    assert max(seen) == 3
    assert slots.in_flight == 0 and slots.held == 0


def test_release_lets_the_next_in():
    async def go() -> None:
        slots = Slots("entry", 1, None)
        await slots.acquire()
        waiting = asyncio.ensure_future(slots.acquire())
        await asyncio.sleep(0.01)
        assert not waiting.done()
        slots.release()
        await asyncio.wait_for(waiting, 1)
        assert slots.in_flight == 1
        slots.release()
        assert slots.in_flight == 0
        with pytest.raises(RuntimeError):
            slots.release()

    asyncio.run(go())


@pytest.mark.parametrize("files", [False, True], ids=["in-process", "files"])
def test_a_cancelled_wait_takes_no_slot(tmp_path, files):
    async def go() -> None:
        slots = Slots("entry", 2, tmp_path if files else None)
        await slots.acquire()
        await slots.acquire()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(slots.acquire(), 0.05)
        slots.release()
        await asyncio.wait_for(slots.acquire(), 1)
        assert slots.in_flight == 2
        slots.close()
        slots.close()  # idempotent
        assert slots.in_flight == 0 and slots.held == 0
        slots.release()  # a request in flight at close() ends: ignored

    asyncio.run(go())


def test_mean_in_flight_of_a_planted_schedule():
    now = [100.0]
    slots = Slots("entry", 4, None, clock=lambda: now[0])

    async def go() -> None:
        assert slots.mean_in_flight() == 0.0
        await slots.acquire()  # t 0..1: 1
        now[0] += 1
        await slots.acquire()  # t 1..3: 2
        now[0] += 2
        slots.release()  # t 3..4: 1
        now[0] += 1
        assert slots.mean_in_flight() == pytest.approx((1 + 4 + 1) / 4)
        slots.reset_stats()
        assert slots.mean_in_flight() == 1.0  # no time has passed: the number now
        now[0] += 2
        slots.release()  # t 0..2: 1, then 0 for 2
        now[0] += 2
        assert slots.mean_in_flight() == pytest.approx(0.5)

    asyncio.run(go())


def test_keys_do_not_share_and_total_must_be_positive(tmp_path):
    async def go() -> None:
        a, b = Slots("model-a", 1, tmp_path), Slots("model-b", 1, tmp_path)
        await a.acquire()
        await asyncio.wait_for(b.acquire(), 1)
        a.close()
        b.close()

    asyncio.run(go())
    for total in (0, -1):
        with pytest.raises(ValueError):
            Slots("entry", total, None)


def test_two_slots_with_one_key_share_it_and_close_gives_back(tmp_path):
    """Two Slots of one key in one process compete like two processes (one lock file each)."""

    async def go() -> None:
        a, b = Slots("entry", 2, tmp_path), Slots("entry", 2, tmp_path)
        await a.acquire()
        await a.acquire()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(b.acquire(), 0.1)
        a.close()
        await asyncio.wait_for(b.acquire(), 1)
        await asyncio.wait_for(b.acquire(), 1)
        b.close()

    asyncio.run(go())


def test_a_slots_dropped_without_close_gives_back(tmp_path):
    async def take(slots: Slots) -> None:
        await slots.acquire()
        await slots.acquire()

    dropped = Slots("entry", 2, tmp_path)
    asyncio.run(take(dropped))
    del dropped  # no cycle holds it: collected at once
    kept = Slots("entry", 2, tmp_path)
    asyncio.run(asyncio.wait_for(take(kept), 1))
    kept.close()


def test_run_slots_dir(monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_TESTRUNUID", raising=False)
    assert run_slots_dir() is None
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", "abc123")
    d = run_slots_dir()
    assert d == slots_dir_for("abc123")
    assert d is not None and d.parent == Path(__import__("tempfile").gettempdir())
    assert slots_dir_for("../x/y").parent == d.parent


# -- across processes ------------------------------------------------------------------------

WORKER = textwrap.dedent(
    """
    import asyncio, json, sys, time
    from pathlib import Path
    from flipgate.backends.slots import Slots

    async def main(a):
        slots = Slots(a["key"], a["total"], Path(a["run_dir"]))
        spans = []

        async def one():
            for _ in range(a["reps"]):
                async with slots:
                    t0 = time.monotonic()
                    await asyncio.sleep(a["hold_s"])
                    spans.append((t0, time.monotonic()))

        Path(a["ready"]).touch()
        if a["hold"]:  # take them and wait to be killed
            for _ in range(a["hold"]):
                await slots.acquire()
            Path(a["ready"] + ".held").touch()
            await asyncio.sleep(3600)
        while not Path(a["go"]).exists():
            await asyncio.sleep(0.002)
        try:
            await asyncio.gather(*(one() for _ in range(a["tasks"])))
        finally:
            slots.close()
        print(json.dumps(spans))

    asyncio.run(main(json.loads(sys.argv[1])))
    """
)


def start_worker(tmp_path: Path, name: str, **args) -> subprocess.Popen[str]:
    a = {"key": "entry", "run_dir": str(tmp_path / "run"), "go": str(tmp_path / "go")}
    a |= {"ready": str(tmp_path / f"ready-{name}"), "hold": 0, "tasks": 0, "reps": 0}
    a |= {"hold_s": 0.0} | args
    return subprocess.Popen(
        [sys.executable, "-c", WORKER, json.dumps(a)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )


def wait_for(path: Path, timeout_s: float = 30) -> None:
    end = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < end, f"{path.name} did not appear"
        time.sleep(0.005)


def run_workers(tmp_path: Path, n: int, **args) -> list[list[tuple[float, float]]]:
    procs = [start_worker(tmp_path, str(i), **args) for i in range(n)]
    try:
        for i in range(n):
            wait_for(tmp_path / f"ready-{i}")
        (tmp_path / "go").touch()
        outs = [p.communicate(timeout=30)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert all(p.returncode == 0 for p in procs)
    return [[tuple(s) for s in json.loads(out)] for out in outs]


def test_processes_share_the_total(tmp_path):
    started = time.monotonic()
    per_process = run_workers(tmp_path, 3, total=4, tasks=16, reps=3, hold_s=0.005)
    assert time.monotonic() - started < 30
    spans = [s for p in per_process for s in p]
    assert len(spans) == 3 * 16 * 3
    assert most_at_once(spans) == 4  # never more, and reached
    # none starved: each process started before any of them had finished
    first_done = min(max(e for _, e in p) for p in per_process)
    assert all(min(s for s, _ in p) < first_done for p in per_process)


def test_more_processes_than_slots_take_turns(tmp_path):
    per_process = run_workers(tmp_path, 3, total=2, tasks=6, reps=10, hold_s=0.01)
    spans = [s for p in per_process for s in p]
    assert most_at_once(spans) == 2
    first_done = min(max(e for _, e in p) for p in per_process)
    assert all(min(s for s, _ in p) < first_done for p in per_process)


def test_a_dead_holder_loses_no_slot(tmp_path):
    holder = start_worker(tmp_path, "holder", total=4, hold=3)
    try:
        wait_for(tmp_path / "ready-holder.held")

        async def go() -> None:
            slots = Slots("entry", 4, tmp_path / "run")
            await slots.acquire()
            with pytest.raises(asyncio.TimeoutError):  # the other three are held
                await asyncio.wait_for(slots.acquire(), 0.1)
            holder.send_signal(signal.SIGKILL)
            holder.wait()
            for _ in range(3):
                await asyncio.wait_for(slots.acquire(), 2)
            assert slots.in_flight == 4
            slots.close()

        asyncio.run(go())
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


def test_a_dead_waiter_is_not_waited_for(tmp_path):
    """A process that died waiting (its want file left behind) does not hold the others back."""

    async def go() -> None:
        slots = Slots("entry", 2, tmp_path / "run")
        await slots.acquire()
        await slots.acquire()
        waiter = start_worker(tmp_path, "waiter", total=2, hold=1)
        try:
            wait_for(tmp_path / "ready-waiter")
            key_dir = tmp_path / "run" / _digest("entry")
            end = time.monotonic() + 30
            while not any(f.startswith("want-") for f in os.listdir(key_dir)):
                assert time.monotonic() < end
                await asyncio.sleep(0.005)
            waiter.send_signal(signal.SIGKILL)
            waiter.wait()
        finally:
            if waiter.poll() is None:
                waiter.kill()
                waiter.wait()
        slots.release()
        slots.release()
        # sooner than STALE_S: it is known dead by its lock, not by its silence
        await asyncio.wait_for(slots.acquire(), 0.5)
        await asyncio.wait_for(slots.acquire(), 0.5)  # holding one, it does not defer to the dead
        slots.close()
        assert not any(f.startswith("want-") for f in os.listdir(key_dir))

    asyncio.run(go())
