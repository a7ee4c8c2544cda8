"""Grading: a submission against a course, into a scored ``Grade``.

``pipeline`` runs the stages; ``checks`` scores each rubric item from case outcomes
(``compare``), timings (``performance``), the traffic ledger (``ledger``, with the reference's
recorded counters, ``reference_counters``) and the compiler's resources (``resources``);
``sanitize`` and ``sanitizer_report`` cross-check on a GPU; ``results`` and ``report`` write what
the student and the TA read; ``grade`` holds the values that flow out; ``glossary`` explains the
emulator's words once. Imports the course, the backends and the root; never delivery.
"""
