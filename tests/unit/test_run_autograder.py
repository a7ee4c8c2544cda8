import json
import os
import subprocess
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
