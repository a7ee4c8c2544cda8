"""The grader's words, each defined once and checked when ``rubric.yaml`` loads.

Check kinds (what a rubric item checks), the metrics a ratio item may name, what a resources
item may require, and item visibilities. The backend contract (``backends/base.py``) defines
the words a backend reports in: finding kinds (with the check each counts against) and counter
names; backend names are defined where backends are chosen (``backends/__init__.py``).
"""

from __future__ import annotations

from autograder.contract import COUNTER_NAMES

CHECKS = ("correctness", "bounds", "barriers", "traffic", "performance", "resources")
TIME = "time"  # a performance item's metric measured as device time
# The metrics each ratio check may name: traffic is counted, performance timed or counted.
METRICS = {"traffic": COUNTER_NAMES, "performance": (TIME, *COUNTER_NAMES)}
# What a resources item requires of the compiled kernel (ptxas's figures for sm_90):
# no spills, or an occupancy of at least ``at_least`` of the SM's warps.
SPILLS, OCCUPANCY = "spills", "occupancy"
RESOURCE_METRICS = (SPILLS, OCCUPANCY)
VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")
