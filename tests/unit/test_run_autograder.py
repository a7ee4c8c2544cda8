import json
import os
import signal
import subprocess
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "run_autograder"


def test_results_json_exists_even_when_the_grader_cannot_start(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "autograder").write_text("#!/bin/sh\nexit 127\n")
    (bin_dir / "autograder").chmod(0o755)
    env = {**os.environ, "AUTOGRADER_ROOT": str(tmp_path / "ag"), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    run = subprocess.run([str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0
    results = json.loads((tmp_path / "ag/results/results.json").read_text())
    assert results["score"] == 0 and "could not start (exit status 127)" in results["output"]


def _terminable():
    """A signal ignored when a shell starts cannot be trapped there, and CI may start us so."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def test_a_sigterm_to_the_script_reaches_the_grader(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    marker = tmp_path / "got-term"
    # a stand-in grader that notes the signal (the real one then writes its fallback results)
    (bin_dir / "autograder").write_text(
        f"#!/bin/sh\ntrap 'echo term > {marker}; exit 2' TERM\nwhile true; do sleep 0.05; done\n"
    )
    (bin_dir / "autograder").chmod(0o755)
    env = {**os.environ, "AUTOGRADER_ROOT": str(tmp_path / "ag"), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    script = subprocess.Popen([str(SCRIPT)], env=env, preexec_fn=_terminable)
    deadline = time.monotonic() + 10
    while not (tmp_path / "ag/results").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    script.send_signal(signal.SIGTERM)
    try:
        assert script.wait(timeout=20) == 0
    finally:
        script.kill()
        subprocess.run(["pkill", "-f", str(bin_dir)], check=False)
    assert marker.read_text().strip() == "term"
    assert json.loads((tmp_path / "ag/results/results.json").read_text())["score"] == 0


def _recording_grader(tmp_path):
    """A stand-in grader that writes its arguments, one a line, and a results.json."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    results = tmp_path / "ag/results/results.json"
    (bin_dir / "autograder").write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$@" > {tmp_path}/args\necho \'{{"score": 0}}\' > {results}\n'
    )
    (bin_dir / "autograder").chmod(0o755)
    return {**os.environ, "AUTOGRADER_ROOT": str(tmp_path / "ag"), "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def _assignments_passed(tmp_path, env):
    run = subprocess.run([str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    args = (tmp_path / "args").read_text().splitlines()
    return [args[i + 1] for i, arg in enumerate(args) if arg == "--assignment"]


def test_every_assignment_of_assignments_txt_is_graded_submitted_or_not(tmp_path):
    env = _recording_grader(tmp_path)
    env.pop("AUTOGRADER_ASSIGNMENTS", None)
    (tmp_path / "ag/source").mkdir(parents=True)
    (tmp_path / "ag/source/assignments.txt").write_text("# a comment\nvector_add\n\nwindow_sum")
    assert _assignments_passed(tmp_path, env) == ["vector_add", "window_sum"]


def test_the_environment_names_the_assignments_first(tmp_path):
    env = {**_recording_grader(tmp_path), "AUTOGRADER_ASSIGNMENTS": "transpose  reduction"}
    (tmp_path / "ag/source").mkdir(parents=True)
    (tmp_path / "ag/source/assignments.txt").write_text("vector_add\n")
    assert _assignments_passed(tmp_path, env) == ["transpose", "reduction"]


def test_without_either_the_submitted_assignments_are_graded(tmp_path):
    env = _recording_grader(tmp_path)
    env.pop("AUTOGRADER_ASSIGNMENTS", None)
    assert _assignments_passed(tmp_path, env) == []  # the Dockerfile route: as before
