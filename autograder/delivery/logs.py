"""The log of the long-running commands, ``autograder serve`` and ``autograder batch``: Python
``logging`` on stderr, set up once by their ``--log-level`` option (``cli.log_level_option``).

Modules only log, each through ``logging.getLogger(__name__)``; this is the one place that says
where records go and how they read. uvicorn's loggers keep their own handlers and format
(``serve.log_config``) and follow the level set here. What a person reads as a command's answer
(``batch``'s progress bar and summary) is not logged: it is printed.
"""

from __future__ import annotations

import logging
import sys

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
DATE_FORMAT = "%Y-%m-%dT%H:%M:%S"


class _CurrentStderr:
    """``sys.stderr`` as it is at each write, not as it was when logging was set up: ``batch``'s
    progress bar (rich) replaces it while drawn and prints what is written there above the bar,
    where a write to the original stream would tear the bar."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure(level: str) -> None:
    """Records at ``level`` and above go to stderr, one line each; the rest are never made.

    The handler is added only where the root logger has none (``basicConfig``): under pytest,
    its capture handler stays the one that receives them.
    """
    logging.basicConfig(format=FORMAT, datefmt=DATE_FORMAT, stream=_CurrentStderr())
    logging.getLogger().setLevel(level)
