"""Delivery: how a course reaches people and machines.

The Gradescope zip (``gradescope_zip``) and the students' handout (``handout``,
``handout_profiles``) with what they share (``packaging``); a class graded on Ray (``batch``,
reading an export with ``export``) and its pages and table (``class_report``, ``class_table``);
the GPU service (``serve``) and its client (``gpu_service``); the long-running commands' log
(``logs``). The top layer below the CLI: imports any layer, and nothing imports it but the CLI.
"""
