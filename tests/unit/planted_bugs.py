# ruff: noqa: E501 - the mutant table quotes source lines whole
"""Plant one bug at a time in a copy of the tree; the unit tests must fail on each.

Run ``python3 tests/unit/planted_bugs.py`` (a few minutes): it copies the checkout to a
temporary folder (the checkout itself is never touched), applies each mutant below, runs
``pytest -x tests/unit`` there and prints which test caught it. Not collected by pytest.
"""

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[2]
# The lint test is left out: a mutant's long line would be "caught" by it, not by the test meant to.
PYTEST = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "tests/unit"]
PYTEST += ["--deselect", "tests/unit/test_lint.py"]
MUTANTS = [
    (
        "rubric: unknown keys accepted",
        "autograder/course/rubric.py",
        "if keys is not None and key not in keys:",
        "if False:",
    ),
    (
        "rubric: points may be text",
        "autograder/course/rubric.py",
        "if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):",
        "if False:",
    ),
    (
        "rubric: missing assignment accepted",
        "autograder/course/rubric.py",
        "        if missing:\n            raise",
        "        if False:\n            raise",
    ),
    (
        "rubric: unknown case group accepted",
        "autograder/course/rubric.py",
        "if groups is not None and cases not in groups:",
        "if False:",
    ),
    (
        "rubric: wrong line number",
        "autograder/course/rubric.py",
        'line = f":{node.start_mark.line + 1}"',
        'line = f":{node.start_mark.line}"',
    ),
    (
        "cases: zeros allowed in inputs",
        "autograder/course/cases.py",
        "        values += 0.5\n",
        "        values += 0.0\n",
    ),
    (
        "cases: outputs poisoned with 0",
        "autograder/course/cases.py",
        "        return np.nan\n",
        "        return 0.0\n",
    ),
    (
        "cases: seed ignores the case index",
        "autograder/course/cases.py",
        'f"{secret}/{assignment}/{group}/{index}/{launch}"',
        'f"{secret}/{assignment}/{group}/{launch}"',
    ),
    (
        "checks: no gating",
        "autograder/grading/checks.py",
        "    wrong = [o for o in outcomes if not o.correct]\n    if not wrong:",
        "    wrong = []\n    if not wrong:",
    ),
    (
        "checks: correctness all or nothing",
        "autograder/grading/checks.py",
        "score = item.points * passed / len(outcomes) if outcomes else 0.0",
        "score = item.points * (passed == len(outcomes))",
    ),
    (
        "compare: unwritten not counted",
        "autograder/grading/compare.py",
        "    never = unwritten(got_raw.dtype, got_raw)\n",
        "    never = np.zeros(got_raw.shape, bool)\n",
    ),
    (
        "compare: modified input ignored",
        "autograder/grading/compare.py",
        "            and not self.inputs_modified\n",
        "",
    ),
    (
        "compare: flat index only",
        "autograder/grading/compare.py",
        "if math.prod(shape) == got_raw.size and len(shape) > 1",
        "if False",
    ),
    (
        "checks: GPU findings ignored",
        "autograder/grading/checks.py",
        '        outcomes = outcomes + runs.outcomes("grading", item.cases)\n',
        "        pass\n",
    ),
    (
        "compare: unfinished launch counts as correct",
        "autograder/grading/compare.py",
        'unfinished = any(f.check == "correctness" for f in self.findings)',
        "unfinished = False",
    ),
    (
        "worker: no restart after a death",
        "autograder/backends/worker.py",
        "if self._process is None or self._process.poll() is not None:",
        "if self._process is None:",
    ),
    (
        "worker: compile log lost",
        "autograder/backends/worker.py",
        "raise CompileError(log if log is not None else message)",
        "raise CompileError(message)",
    ),
    (
        "worker: timeout reported as failure",
        "autograder/backends/worker.py",
        "    return LaunchTimeout(",
        "    return LaunchFailure(",
    ),
    (
        "pipeline: grader bug crashes the run",
        "autograder/grading/pipeline.py",
        "        except Exception as e:  # a grader bug: fail this case, grade the rest\n            return _fault(",
        "        except ZeroDivisionError as e:\n            raise\n        except Exception as e:\n            return _fault(",
    ),
    (
        "pipeline: no compile gate",
        "autograder/grading/pipeline.py",
        "        problem, regrade = _compile_problem(backends.grading, spec, source, items, filename)",
        "        problem, regrade = None, False",
    ),
    (
        "pipeline: unsupported not flagged",
        "autograder/grading/pipeline.py",
        "            return _fault(outcome, str(e))\n        except BackendError",
        "            return replace(outcome, error=str(e))\n        except BackendError",
    ),
    (
        "results: tags lack the check",
        "autograder/grading/results.py",
        "tags = [item.assignment, item.check]",
        "tags = [item.assignment]",
    ),
    (
        "results: number off by one",
        "autograder/grading/results.py",
        'return f"{assignment}.{rubric.assignments[item.assignment].index(item) + 1}"',
        'return f"{assignment}.{rubric.assignments[item.assignment].index(item)}"',
    ),
    (
        "results: fallback drops items",
        "autograder/grading/results.py",
        "items = rubric.items if rubric is not None else ()",
        "items = ()",
    ),
    (
        "cli: no results on a crash",
        "autograder/cli/grading.py",
        "        write_results(results_path, fallback_results(rubric, reason, time.monotonic() - started))\n",
        "",
    ),
    (
        "selfcheck: a scoring starter passes",
        "autograder/grading/selfcheck.py",
        "return [r for r in run if r.score > 0 or r.regrade]",
        "return []",
    ),
    ("report: no seed", "autograder/grading/report.py", '"seed": grade.seed,', '"seed": None,'),
    (
        "spec: folder and name may differ",
        "autograder/course/spec.py",
        "if spec.name != directory.name:",
        "if False:",
    ),
    (
        "spec: unknown parameters read as 0",
        "autograder/course/spec.py",
        '            raise KeyError(f"unknown parameter {node.id!r}")',
        "            return 0",
    ),
    (
        "cli: a failing report zeroes the grades",
        "autograder/cli/grading.py",
        '        optional("the TA report", write_report, report_path, graded, submission)',
        "        write_report(report_path, graded, submission)",
    ),
    (
        "policy: a digit separator opens a character literal",
        "autograder/course/policy.py",
        r"""|(?P<word>[A-Za-z_]\w*|\.?\d(?:[eEpP][+-]|'\w|[\w.])*)""",
        "|(?P<word>[A-Za-z_]\\w*)",
    ),
    (
        "policy: a comment is blanked, not one space",
        "autograder/course/policy.py",
        '        return " "\n',
        '        return re.sub(r"[^\\n]", " ", match.group(0))\n',
    ),
    (
        "policy: symbolic links followed",
        "autograder/course/policy.py",
        "    if path.is_symlink():",
        "    if False:",
    ),
    (
        "compare: an infinite reference within any tolerance",
        "autograder/grading/compare.py",
        "np.where(np.isfinite(expected), error <= atol + rtol * np.abs(expected), got == expected)",
        "error <= atol + rtol * np.abs(expected)",
    ),
    (
        "compare: integer outputs within a float tolerance",
        "autograder/grading/compare.py",
        "        rtol = atol = 0.0\n",
        "        pass\n",
    ),
    (
        "cases: a reference may leave out an output",
        "autograder/course/cases.py",
        "    if missing or unknown:",
        "    if unknown:",
    ),
    (
        "cli: SIGTERM kills the grader before results.json",
        "autograder/cli/grading.py",
        "    signal.signal(signal.SIGTERM, raise_terminated)\n",
        "",
    ),
    (
        "rubric: unknown metric accepted",
        "autograder/course/rubric.py",
        'metric = self.choice(entries["metric"], f"{check} metric", METRICS[check])',
        'metric = str(self.scalar(entries["metric"]))',
    ),
    (
        "checks: time scored where it cannot be timed",
        "autograder/grading/checks.py",
        "    if why:\n",
        "    if False:\n",
    ),
    (
        "checks: grading backend's findings ignored when apart",
        "autograder/grading/checks.py",
        '    if not runs.same_backend("grading", "safety"):\n',
        '    if runs.same_backend("grading", "safety"):\n',
    ),
    (
        "pipeline: every role on the same backend",
        "autograder/grading/pipeline.py",
        "        return self.roles[role][0] is self.roles[other][0]\n",
        "        return True\n",
    ),
    (
        "cases: group seeds ignore the input set",
        "autograder/course/cases.py",
        "case_seed(secret, spec.name, group, index, input_set))",
        "case_seed(secret, spec.name, group, index))",
    ),
    (
        "cases: prepare_group ignores the input set",
        "autograder/course/cases.py",
        "for ref in group_cases(spec, group, secret, input_set))",
        "for ref in group_cases(spec, group, secret))",
    ),
    (
        "cases: prepare_group draws a timing input set by default",
        "autograder/course/cases.py",
        "time_limit_s: float, input_set: int = 0\n) -> Iterator[Prepared]:",
        "time_limit_s: float, input_set: int = 1\n) -> Iterator[Prepared]:",
    ),
    (
        "cases: timing reuses the grading inputs",
        "autograder/course/cases.py",
        "for k in range(1, input_sets + 1)]",
        "for k in range(input_sets)]",
    ),
    (
        "worker: a stop spares the worker's process group",
        "autograder/backends/worker.py",
        "                os.killpg(self._process.pid, signal.SIGKILL)",
        "                self._process.kill()",
    ),
    (
        "sanitize: the cross-check changes the score",
        "autograder/grading/sanitize.py",
        "    return replace(result, output=",
        "    return replace(result, score=result.score * (not findings), output=",
    ),
    (
        "sanitize: the cross-check adds other checks' findings",
        "autograder/grading/sanitize.py",
        "    findings = [f for run in runs for f in run.findings if f.check == check]",
        "    findings = [f for run in runs for f in run.findings]",
    ),
    (
        "sanitize: the evidence keeps other checks' findings",
        "autograder/grading/sanitize.py",
        "tuple(recorded(f) for f in run.findings if f.check == check)",
        "tuple(recorded(f) for f in run.findings)",
    ),
    ("run_autograder: no fallback", "run_autograder", 'if [ ! -s "$results" ]; then', "if false; then"),
    (
        "reference_counters: stale counters accepted",
        "autograder/grading/reference_counters.py",
        'entry.get("case") != dict(ref.case)',
        "False",
    ),
    (
        "pipeline: recorded counters ignored",
        "autograder/grading/pipeline.py",
        "if key not in self._cache and recorded is not None:",
        "if False:",
    ),
    (
        "handout: the reference source shipped",
        "autograder/delivery/handout.py",
        '        entries[f"starter/{name}.cu"] = (course.root / "starter" / f"{name}.cu", 0o644)',
        '        entries[f"starter/{name}.cu"] = (course.root / "starter" / f"{name}.cu", 0o644)\n'
        '        entries[f"reference/{name}.cu"] = (course.reference_source(name), 0o644)',
    ),
    (
        "checks: a missing reference is not said",
        "autograder/grading/pipeline.py",
        '        if self.sources["reference"] is None:\n            return',
        "        if False:\n            return",
    ),
    (
        "occupancy: no shared memory reserved per block",
        "autograder/device.py",
        "static_shared + dynamic_shared + device.reserved_shared",
        "static_shared + dynamic_shared",
    ),
    (
        "occupancy: registers not allocated in units",
        "autograder/device.py",
        "per_warp = _round_up(registers * WARP, REG_UNIT)",
        "per_warp = registers * WARP",
    ),
    (
        "occupancy: barriers not per block slot",
        "autograder/device.py",
        "device.barriers_per_block_slot * device.blocks_per_sm // barriers",
        "device.blocks_per_sm // barriers",
    ),
    (
        "rubric: an occupancy floor over 1 accepted",
        "autograder/course/rubric.py",
        "if not 0 < at_least <= 1:",
        "if not 0 < at_least:",
    ),
]


def main(only=()):
    work = Path(tempfile.mkdtemp()) / "tree"
    rows = []
    for name, path, old, new in MUTANTS:
        if only and not name.startswith(tuple(only)):
            continue
        if work.exists():
            shutil.rmtree(work)
        shutil.copytree(SRC, work, ignore=shutil.ignore_patterns(".git", ".whl", "__pycache__", "*.egg-info"))
        target = work / path
        text = target.read_text()
        if text.count(old) != 1:
            rows.append((name, f"PATTERN FOUND {text.count(old)}x"))
            print(f"{name:45} {rows[-1][1]}", flush=True)
            continue
        target.write_text(text.replace(old, new))
        started = time.monotonic()
        run = subprocess.run(
            PYTEST,
            cwd=work,
            capture_output=True,
            text=True,
            timeout=300,
        )
        failed = [line for line in run.stdout.splitlines() if line.startswith("FAILED")]
        verdict = f"caught ({failed[0].split('::')[-1][:70]})" if run.returncode else "NOT CAUGHT"
        rows.append((name, f"{verdict} {time.monotonic() - started:.0f}s"))
        print(f"{name:45} {rows[-1][1]}", flush=True)
    shutil.rmtree(work.parent)
    sys.exit(any("caught" not in verdict for _name, verdict in rows))


if __name__ == "__main__":
    main(sys.argv[1:])  # optional name prefixes: run only those mutants
