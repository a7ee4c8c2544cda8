"""The report behind ``autograder profile``: one launch's counters by source line, with the
text of each line, and its findings; as a table for a terminal or as a JSON-able dict."""

from __future__ import annotations

from autograder.contract import Counters, LaunchResult
from autograder.feedback import counted

# (heading, counter names summed into the column); wavefront columns show "(+conflicts)"
COLUMNS = (
    ("ld req", ("global_load_requests",)),
    ("ld sectors", ("global_load_sectors",)),
    ("ld values", ("global_load_values",)),
    ("st req", ("global_store_requests",)),
    ("st sectors", ("global_store_sectors",)),
    ("st values", ("global_store_values",)),
    ("sh ld wavef", ("shared_load_wavefronts",)),
    ("sh st wavef", ("shared_store_wavefronts",)),
    ("barriers", ("barriers",)),
    ("warp instr", ("warp_instructions",)),
    ("flops", ("flops",)),
)
CONFLICTS = {
    "shared_load_wavefronts": "shared_load_conflicts",
    "shared_store_wavefronts": "shared_store_conflicts",
}
SOURCE_WIDTH = 60


def profile_data(result: LaunchResult, source: str, filename: str) -> dict:
    """Counters per line (with the line's text), totals and findings, ready for ``json.dumps``."""
    counters = result.counters or Counters()
    lines = source.splitlines()
    return {
        "file": filename,
        "totals": dict(counters.totals),
        "lines": [
            {"line": line, "source": _text(lines, line), **row}
            for line, row in sorted(counters.by_line.items())
        ],
        "findings": [
            {
                "kind": f.kind,
                "check": f.check,
                "message": f.message,
                "line": f.line,
                "thread": f.thread,
                "block": f.block,
                "array": f.array,
                "index": f.index,
                "bound": f.bound,
                "others": f.others,
            }
            for f in result.findings
        ],
        "stdout": result.stdout,
    }


def profile_table(result: LaunchResult, source: str, filename: str) -> str:
    """A plain-text table: one row per source line that did any work, then totals, findings."""
    data = profile_data(result, source, filename)
    header = ["line", *(h for h, _ in COLUMNS), "source"]
    rows = [[str(r["line"]), *(_cell(r, names) for _, names in COLUMNS), r["source"]] for r in data["lines"]]
    rows.append(["total", *(_cell(data["totals"], names) for _, names in COLUMNS), ""])
    widths = [max(len(row[k]) for row in [header, *rows]) for k in range(len(header))]
    out = [_join(header, widths), _join(["-" * w for w in widths], widths)]
    out += [_join(row, widths) for row in rows]
    out.append("")
    out.append(
        "Counts are per warp request (ld/st req), 32-byte sectors, values (bytes over the element "
        "size), shared-memory wavefronts (+ extra ones from bank conflicts), block barriers, warp "
        "instructions, flops."
    )
    if data["findings"]:
        out.append("")
        out.append(f"Findings ({len(data['findings'])}):")
        for f in data["findings"]:
            more = f" (and {counted(f['others'], 'more thread')})" if f["others"] else ""
            out.append(f"  [{f['kind']}] {f['message']}{more}")
    else:
        out.append("No findings.")
    if data["stdout"]:
        out += ["", "printf output:", data["stdout"].rstrip("\n")]
    return "\n".join(out)


def _text(lines: list[str], line: int) -> str:
    text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    return text if len(text) <= SOURCE_WIDTH else text[: SOURCE_WIDTH - 1] + "…"


def _cell(row: dict, names: tuple[str, ...]) -> str:
    value = sum(row.get(n, 0) for n in names)
    extra = sum(row.get(CONFLICTS[n], 0) for n in names if n in CONFLICTS)
    if not value:
        return ""
    return f"{value:,}" + (f" (+{extra:,})" if extra else "")


def _join(cells: list[str], widths: list[int]) -> str:
    parts = [c.rjust(w) for c, w in zip(cells[:-1], widths[:-1], strict=True)]
    return "  ".join([*parts, cells[-1]])
