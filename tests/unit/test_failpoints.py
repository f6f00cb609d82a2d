"""Failpoints: an armed point kills the process and says so first; an unarmed one does nothing."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from tiering import failpoints

pytestmark = pytest.mark.unit

PROGRAM = "from tiering import failpoints; print('before', flush=True); failpoints.hit('p'); print('after')"


def run(armed: str | None) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin"} | ({failpoints.ENV: armed} if armed is not None else {})
    return subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("armed", ["p", "a,p", "p,b"])
def test_an_armed_point_says_it_fired_then_sigkills_the_process(armed):
    result = run(armed)

    assert result.returncode == -signal.SIGKILL
    assert result.stdout == "before\n", "nothing after the point ran"
    assert result.stderr.startswith(failpoints.fired("p")) and result.stderr.count("\n") == 1, result.stderr


@pytest.mark.parametrize("armed", [None, "", "q", "pp", "a,b"])
def test_a_point_not_armed_does_nothing(armed):
    result = run(armed)

    assert result.returncode == 0, result.stderr
    assert result.stdout == "before\nafter\n"
    assert "failpoint" not in result.stderr


def test_the_fired_line_names_the_point():
    assert failpoints.fired("before_delta_commit") != failpoints.fired("after_delta_commit")
    assert "before_delta_commit" in failpoints.fired("before_delta_commit")


def test_a_point_armed_to_sleep_says_so_holds_the_process_then_goes_on():
    result = run("p=sleep:0.3")

    assert result.returncode == 0 and result.stdout == "before\nafter\n"
    assert result.stderr.startswith(f"{failpoints.sleeping('p')} 0.3 s") and result.stderr.count("\n") == 1


def test_a_point_armed_to_hold_waits_while_its_file_exists_and_passes_once_it_is_gone(tmp_path):
    hold = tmp_path / "hold"
    hold.touch()
    env = {"PATH": "/usr/bin:/bin", failpoints.ENV: f"p=hold:{hold}"}
    proc = subprocess.Popen(
        [sys.executable, "-c", PROGRAM], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline() == "before\n"
        assert proc.stderr.readline().startswith(f"{failpoints.sleeping('p')} while {hold} exists")
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(0.5)  # held while the file is there
        hold.unlink()
        assert proc.wait(60) == 0
        assert proc.stdout.read() == "after\n"
    finally:
        proc.kill()


def test_a_point_armed_to_hold_on_a_missing_file_passes_silently(tmp_path):
    result = run(f"p=hold:{tmp_path / 'gone'}")

    assert result.returncode == 0 and result.stdout == "before\nafter\n"
    assert result.stderr == ""
