"""Digest of everything the emulator reports, to compare before and after a change to it.

For every reference kernel and every variant in ``tests/emulator/variants/NAME/`` on every
case of the aligned, ragged and safety groups: a hash of the outputs, the findings (kind,
message, line) and the counters (totals and per line). ``--out FILE`` writes one line per
launch; ``--compare FILE`` prints the launches whose digest differs from the file's and
exits 1 if any does. An emulator speed-up must leave every digest as it was.

    python bench/emulator_digest.py --out /tmp/before.txt
    python bench/emulator_digest.py --compare /tmp/before.txt
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder.backends.emulator import EmulatorBackend  # noqa: E402
from autograder.contract import BackendError  # noqa: E402
from autograder.course.cases import GroupCase, prepare  # noqa: E402
from autograder.course.spec import load_specs  # noqa: E402

GROUPS = ("aligned", "ragged", "safety")


def digest(result) -> str:
    h = hashlib.sha256()
    for name, array in sorted(result.outputs.items()):
        h.update(name.encode() + array.tobytes())
    h.update(json.dumps([(f.kind, f.message, f.line) for f in result.findings]).encode())
    counters = result.counters
    h.update(json.dumps([counters.totals, sorted(counters.by_line.items())], default=str).encode())
    return h.hexdigest()[:16]


def launches():
    backend = EmulatorBackend()
    for name, spec in sorted(load_specs(ROOT).items()):
        sources = [ROOT / "reference" / f"{name}.cu"]
        sources += sorted((ROOT / "tests/emulator/variants" / name).glob("*.cu"))
        for source in sources:
            text = source.read_text()
            for group in GROUPS:
                for index, case in enumerate(spec.cases.get(group, ())):
                    label = f"{name} {source.name} {group}[{index}]"
                    try:
                        prepared = prepare(spec, text, GroupCase(group, index, case, 7), 600)
                        yield label, digest(backend.launch(prepared.launch))
                    except BackendError as e:
                        yield label, f"error {type(e).__name__}: {e}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--compare", type=Path)
    args = parser.parse_args()
    before = {}
    if args.compare:
        before = dict(line.rsplit("  ", 1) for line in args.compare.read_text().splitlines())
    lines, differ = [], 0
    for label, value in launches():
        lines.append(f"{label}  {value}")
        if args.compare and before.get(label) != value:
            differ += 1
            print(f"differs: {label}: {before.get(label)} -> {value}", flush=True)
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")
    print(f"{len(lines)} launches" + (f", {differ} differ" if args.compare else ""))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
