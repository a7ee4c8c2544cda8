"""Student-controlled text, bounded: what a submission prints, the compiler says about it, or the
grader finds in it never makes ``results.json`` or a report grow past its limit.

Every cut is visible: the kept text ends with ``… (truncated: N more bytes)``.
"""

from __future__ import annotations

ITEM_OUTPUT_BYTES = 16_000  # one item's feedback; a course's worth of items stays under 1 MB
LINE_BYTES = 500  # one finding's message, one printed line


def capped(text: str, limit: int) -> str:
    """``text`` when its UTF-8 form fits in ``limit`` bytes, else its head and how much was cut."""
    data = text.encode()
    if len(data) <= limit:
        return text
    head = data[:limit].decode(errors="ignore")
    return f"{head}… (truncated: {len(data) - len(head.encode())} more bytes)"
