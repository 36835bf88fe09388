"""The cluster that `make chaos` kills: two web instances, two queue workers, and the killer.

Each slot (web1, web2, worker1, worker2) holds one process at a time. The killer SIGKILLs
a whole web instance (master and worker), a web instance's worker alone (its master
starts another) or a queue worker, only while the other slot of its kind is up and
unarmed; the slot comes back, half the time armed with a failpoint that SIGKILLs the
process itself at a named step of the job's life. A process that dies without the killer
is a fault of the product unless its own log shows its failpoint fired, or that it ended on
a database error inside or right after a fault the run recorded (bench/chaos_logs.py).
"""

import collections
import os
import random
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import requests

from .chaos_logs import Window, death_excused, log_faults
from .common import Server, Worker, log

LEASE, HEARTBEAT, POLL, WORK, SWEEP = 2.0, 0.4, 0.5, 1.0, 1.0
SIGNUP_POINTS = 5  # modest: a storm buyer spends its packs (bench/chaos.py grants the rest)
ENV = {"JOB_EXECUTOR": "procrastinate", "MAX_CONCURRENT_JOBS": "8", "MAX_QUEUED_JOBS": "64"}
ENV |= {"JOB_LEASE_SECONDS": str(LEASE), "JOB_HEARTBEAT_SECONDS": str(HEARTBEAT)}
ENV |= {"POLL_INTERVAL_SECONDS": str(POLL), "SWEEP_INTERVAL_SECONDS": str(SWEEP)}
ENV |= {"ASSESSMENT_WORK_SECONDS": str(WORK), "SIGNUP_POINTS": str(SIGNUP_POINTS)}
# Where each kind of process passes a failpoint (app/operations/failpoints.py names them all).
FAILPOINTS = {
    "web": ("after_insert", "after_reap", "before_refund", "consume_lookup"),
    "worker": ("after_running", "after_consume", "before_success", "before_refund"),
}
ARMED_SHARE = 0.5  # of restarted processes, how many come back with a failpoint
START_TIMEOUT = 180.0  # a start on a busy machine (two cores, other work) is slow


class Slot:
    """One place in the cluster and the process that holds it now."""

    def __init__(self, kind: str, name: str, db_url: str, logs: Path, env: dict[str, str]):
        self.kind, self.name, self.db_url, self.logs, self.env = kind, name, db_url, logs, env
        self.generation = 0
        self.armed: str | None = None
        self.ready = False
        self.child: Server | Worker | None = None  # a web slot's gunicorn, or `flask worker`
        self.lock = threading.Lock()

    def start(self, armed: str | None) -> None:
        """Start a new process in this slot, with FAILPOINTS set to armed=kill if given."""
        self.generation += 1
        self.armed = armed
        env = {**ENV, **self.env, "FAILPOINTS": f"{armed}=kill" if armed else ""}
        name = f"{self.name}-{self.generation}"
        if self.kind == "web":
            log_path = self.logs / f"{name}.log"
            self.child = Server(self.db_url, name, module="wsgi:app", log_path=log_path, **env)
        else:
            self.child = Worker(self.db_url, self.logs / f"{name}.log", **env)
        self.child.start(timeout=START_TIMEOUT)
        self.ready = True

    def process(self) -> subprocess.Popen | None:
        return self.child.proc if self.child else None

    def alive(self) -> bool:
        """Tell whether the slot's process (a web slot's master) still runs."""
        proc = self.process()
        return proc is not None and proc.poll() is None

    def url(self) -> str | None:
        """The web instance's address while it answers, else None."""
        return self.child.url if self.kind == "web" and self.ready and self.alive() else None

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stop the slot's process with sig (SIGKILL after 30 s) and wait for it."""
        self.ready = False
        if self.child:
            self.child.stop(sig)


@dataclass
class Death:
    """A process that died without the killer, judged at the end against the faults."""

    slot: str
    log_path: Path
    armed: str | None
    code: int | None
    seen: float  # wall clock, when the watcher found it dead


class Cluster:
    """Two web instances and two queue workers, and a killer that keeps them dying."""

    def __init__(self, db_url: str, logs: Path, seed: int, fault: Callable[[str], None], env):
        self.logs = logs
        self.rng = random.Random(seed)  # the kill schedule; users route with their own
        self.fault = fault
        kinds = ("web", "worker")
        self.slots = [Slot(k, f"{k}{i}", db_url, logs, env) for k in kinds for i in (1, 2)]
        self.kills: collections.Counter[str] = collections.Counter()
        self.timeline: list[tuple[float, str]] = []  # (wall clock, which kill)
        self.deaths: list[Death] = []  # the processes that died without the killer
        self.gave_up: list[Death] = []  # those a database error in a recorded fault ended
        self.ends: dict[str, float] = {}  # log name: when its process was seen or made to end
        self.stopping = threading.Event()
        self.helpers: list[threading.Thread] = []
        self.lock = threading.Lock()

    def start(self) -> None:
        """Start every slot, unarmed, side by side."""
        self.logs.mkdir(parents=True, exist_ok=True)
        starting = [threading.Thread(target=s.start, args=(None,)) for s in self.slots]
        for thread in starting:
            thread.start()
        for thread in starting:
            thread.join()
        if not all(s.ready for s in self.slots):
            raise RuntimeError(f"the cluster did not start; see {self.logs}")
        threading.Thread(target=self.watch, daemon=True).start()

    def urls(self) -> list[str]:
        return [url for s in self.slots if (url := s.url())]

    def others(self, slot: Slot) -> list[Slot]:
        return [s for s in self.slots if s.kind == slot.kind and s is not slot]

    def later(self, target, *args) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        with self.lock:
            self.helpers.append(thread)
        thread.start()

    def restart(self, slot: Slot) -> None:
        """Bring a slot back, armed now and then (never both of a kind at once)."""
        with slot.lock:
            if self.stopping.is_set():
                return  # calm() brings every slot back, unarmed
            slot.stop(signal.SIGKILL)
            self.mark_ended(slot)  # (already, if it died or the killer took it)
            armed = None
            if self.rng.random() < ARMED_SHARE and not any(o.armed for o in self.others(slot)):
                armed = self.rng.choice(FAILPOINTS[slot.kind])
            while not self.stopping.is_set():  # as a supervisor would, with a pause
                try:
                    slot.start(armed)
                    return
                except RuntimeError as exc:  # a failpoint, or the database, stopped it
                    log(f"restart of {slot.name}: {exc}")
                    slot.stop(signal.SIGKILL)
                    self.mark_ended(slot)
                    time.sleep(0.5)

    def watch(self) -> None:
        """Bring back the processes that died without the killer: at failpoints, or faults.

        Each death is judged at the end (judge()), once every fault's window is recorded.
        """
        while not self.stopping.is_set():
            for slot in self.slots:
                if slot.ready and not slot.alive():
                    slot.ready = False
                    code = slot.process().returncode
                    death = Death(slot.name, slot.child.log_path, slot.armed, code, time.time())
                    self.mark_ended(slot, death.seen)
                    with self.lock:
                        self.deaths.append(death)
                    log(f"{death.slot} died (exit {code}, armed {death.armed}); judged at the end")
                    self.later(self.restart, slot)
            time.sleep(0.1)

    def mark_ended(self, slot: Slot, at: float | None = None) -> None:
        """Remember when a slot's process ended (the first time the harness knew)."""
        if slot.child is not None:
            with self.lock:
                self.ends.setdefault(slot.child.log_path.name, at or time.time())

    def judge(self, faults: list[Window]) -> list[str]:
        """Say which deaths neither a failpoint nor a database error in a recorded fault explains.

        A web instance's master never ends itself, nor passes a failpoint (its workers do,
        and it starts others): nothing explains its death.
        """
        wrong = []
        with self.lock:
            deaths = list(self.deaths)
        self.gave_up = []
        for death in deaths:
            text = death.log_path.read_text(errors="replace")
            # A web instance's master never passes a failpoint: none explains its death.
            armed = death.armed if death.slot.startswith("worker") else None
            why = death_excused(text, faults, armed, death.code, death.seen)
            if why.startswith("failpoint"):
                continue
            if why and death.slot.startswith("worker"):
                self.gave_up.append(death)
            else:
                armed = f"armed {death.armed}" if death.armed else "unarmed"
                wrong.append(
                    f"{death.log_path.name} died {armed} and unkilled (exit {death.code}) at"
                    f" {death.seen:.1f}, no failpoint or recorded fault explains it"
                )
        return wrong

    def kill_one(self) -> bool:
        """SIGKILL one process whose kind has another up and unarmed; False if none may go."""
        eligible = [
            s
            for s in self.slots
            if s.ready
            and s.alive()
            and any(o.ready and o.alive() and not o.armed for o in self.others(s))
        ]
        if not eligible:
            return False
        victim = self.rng.choice(eligible)
        if victim.kind == "worker":
            target = "queue worker"
        else:
            target = self.rng.choice(("web instance", "web worker"))
        with victim.lock:
            if not (victim.ready and victim.alive()):
                return False
            victim.ready = False
            if target == "queue worker":
                self.mark_ended(victim)
                victim.child.proc.kill()
                self.later(self.restart, victim)
            else:
                try:
                    pid = victim.child.worker_pid()
                except requests.RequestException:
                    victim.ready = True
                    return False
                os.kill(pid, signal.SIGKILL)
                if target == "web instance":
                    self.mark_ended(victim)
                    victim.child.proc.kill()
                    self.later(self.restart, victim)
                else:  # its master starts another worker
                    self.later(self.respawned, victim, pid)
        with self.lock:
            self.kills[target] += 1
            self.timeline.append((time.time(), f"{target} {victim.name} killed"))
        return True

    def respawned(self, slot: Slot, old_pid: int) -> None:
        """Mark a web slot ready once its master's new worker answers."""
        try:
            slot.child.wait_ready(timeout=START_TIMEOUT, not_pid=old_pid)
            slot.ready = True
        except RuntimeError:
            self.restart(slot)

    def failpoint_kills(self) -> collections.Counter[str]:
        """Count the processes that killed themselves at a failpoint, from their logs."""
        found: collections.Counter[str] = collections.Counter()
        for path in self.logs.glob("*.log"):
            kind = "web" if path.name.startswith("web") else "queue worker"
            for name in re.findall(rb"failpoint (\w+): kill", path.read_bytes()):
                found[f"{name.decode()} ({kind})"] += 1
        return found

    def total_kills(self) -> int:
        with self.lock:
            harness = sum(self.kills.values())
        return harness + sum(self.failpoint_kills().values())

    def calm(self) -> None:
        """Stop killing; wait for pending restarts; every slot up again and unarmed."""
        self.stopping.set()
        with self.lock:
            helpers = list(self.helpers)
        for thread in helpers:
            thread.join(START_TIMEOUT * 3)
        for slot in self.slots:
            with slot.lock:
                tries = 0  # the database is steady now: a start fails for cause
                while (slot.armed or not slot.alive() or not slot.ready) and tries < 3:
                    tries += 1
                    slot.stop(signal.SIGKILL)
                    self.mark_ended(slot)
                    try:
                        slot.start(None)
                    except RuntimeError as exc:
                        log(f"restart of {slot.name}: {exc}")
                if not slot.ready:
                    self.fault(f"{slot.name} could not be restarted after the faults")

    def stop(self) -> None:
        """Stop every process, whatever state the run is in."""
        self.stopping.set()
        for slot in self.slots:
            slot.stop()

    def log_faults(self, faults: list[Window]) -> list[str]:
        """Say what the logs show went wrong that no kill or recorded fault explains."""
        wrong = []
        for path in sorted(self.logs.glob("*.log")):
            text = path.read_text(errors="replace")
            wrong += log_faults(path.name, text, faults, self.ends.get(path.name))
        return wrong

    def tracebacks(self) -> int:
        """Count the tracebacks in every log (each one is worth reading; not a verdict)."""
        logs = self.logs.glob("*.log")
        return sum(p.read_text(errors="replace").count("Traceback") for p in logs)
