"""Failover time of the ZooKeeper leader election, as a multiple of the session timeout.

Two measurements on a real embedded ZooKeeper, per session timeout:
- failover: a leader process is SIGKILLed; time until the standby process leads (epoch + 1).
  Bounded below by the server expiring the dead session (~1 session timeout).
- step_down: the ZooKeeper server is SIGSTOPped; time until the leader's watchdog declares
  the term lost on its own (kazoo cannot report LOST while the server is frozen).

Run: .venv/bin/python -m benchmarks.bench_failover [--trials 5] [--timeouts 2,4] [--out FILE]
Writes benchmarks/results/bench_failover.json (``--out``).
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from benchmarks.common import REPO, RESULTS, machine, write_json
from tiering.coord import acquire_leadership
from tiering.coord.embedded import EmbeddedZooKeeper


def contend(hosts: str, job: str, session_timeout_s: float) -> None:
    """Child mode: lead ``job`` and print the epoch, then idle until killed."""
    print("waiting", flush=True)
    term = acquire_leadership(hosts, job, session_timeout_s)
    print(f"leader {term.epoch} {time.time()}", flush=True)
    term.lost.wait()


def _spawn(hosts: str, job: str, session_timeout_s: float) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.bench_failover", "--contend", hosts, job, str(session_timeout_s)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert proc.stdout.readline().strip() == "waiting"
    return proc


def _leader_line(proc: subprocess.Popen) -> tuple[int, float]:
    _, epoch, at = proc.stdout.readline().split()
    return int(epoch), float(at)


def measure_failover(hosts: str, session_timeout_s: float) -> float:
    job = f"bench-{uuid.uuid4().hex[:8]}"
    leader = _spawn(hosts, job, session_timeout_s)
    epoch, _ = _leader_line(leader)
    standby = _spawn(hosts, job, session_timeout_s)
    time.sleep(0.5)
    killed_at = time.time()
    leader.kill()
    leader.wait()
    new_epoch, led_at = _leader_line(standby)
    assert new_epoch == epoch + 1, (epoch, new_epoch)
    standby.kill()
    standby.wait()
    return led_at - killed_at


def measure_step_down(server: EmbeddedZooKeeper, session_timeout_s: float) -> float:
    term = acquire_leadership(server.hosts, f"bench-{uuid.uuid4().hex[:8]}", session_timeout_s)
    server.kill(signal.SIGSTOP)
    frozen_at = time.monotonic()
    try:
        assert term.lost.wait(10 * session_timeout_s)
        return time.monotonic() - frozen_at
    finally:
        server.kill(signal.SIGCONT)
        term.resign()


def _summary(samples: list[float], session_timeout_s: float) -> dict:
    return {
        "seconds": [round(s, 3) for s in samples],
        "median_s": round(statistics.median(samples), 3),
        "max_s": round(max(samples), 3),
        "median_x_session_timeout": round(statistics.median(samples) / session_timeout_s, 2),
        "max_x_session_timeout": round(max(samples) / session_timeout_s, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--timeouts", default="2,4", help="session timeouts in seconds, comma-separated")
    parser.add_argument("--out", type=Path, default=RESULTS / "bench_failover.json", help="where the JSON goes")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp, EmbeddedZooKeeper() as server:
        server.start(Path(tmp))
        for session_timeout_s in (float(t) for t in args.timeouts.split(",")):
            failover = [measure_failover(server.hosts, session_timeout_s) for _ in range(args.trials)]
            step_down = [measure_step_down(server, session_timeout_s) for _ in range(args.trials)]
            results.append(
                {
                    "session_timeout_s": session_timeout_s,
                    "failover_after_sigkill": _summary(failover, session_timeout_s),
                    "step_down_when_zk_frozen": _summary(step_down, session_timeout_s),
                }
            )
            print(json.dumps(results[-1]), flush=True)
    report = {
        "benchmark": "failover",
        "trials": args.trials,
        "zk_tick_ms": 500,
        "machine": machine(),
        "results": results,
    }
    write_json(args.out, report)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--contend":
        contend(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    else:
        main()
