"""The root of every error the grader raises on purpose: ``except AutograderError`` catches
them all, and an unforeseen bug (a ``KeyError``, say) stays itself, with its traceback.

Each family is defined where it is raised and says in its message what is wrong and what to
do. They differ in who is at fault, which decides who reads the message:

The student's submission (the student reads it, in results.json):
    ``backends.base.BackendError``: the kernel did not compile (``CompileError``, and
    ``compiler.PtxasRefusal``), crashed (``LaunchFailure``) or never finished
    (``LaunchTimeout``); ``emulator.machine.BudgetError``, the emulator's instruction budget
    spent, which becomes an ``instruction_budget`` finding; ``discovery._Unsafe``, an uploaded
    .zip that is not unpacked, which becomes a note. One ``BackendError`` is the grader's
    fault though its message is for the student: ``Unsupported`` (and the emulator's
    ``NotEmulated``), what the backend cannot run though a GPU would; the pipeline tags its
    item for a TA's regrade (docs/backend-contract.md, "Failures").

The course's author, or whoever runs a command on the course's files (they read it on the
terminal, as ``Error: ...``):
    ``spec.SpecError`` (a malformed assignment spec), ``rubric.RubricError`` (a malformed
    ``rubric.yaml``), ``authoring.AuthoringError`` (a reference's markers, a scaffold that
    would overwrite), ``packaging.BuildError`` (the Gradescope package cannot be built),
    ``export.BatchError`` (a class export that cannot be graded), ``class_report.ClassReportError``
    (a folder that is not a graded class).

The grader itself (a TA or the maintainers read it; the student sees only that the item was
not graded):
    ``backends.worker.WorkerError`` (the worker's backend raised something other than a
    ``BackendError``: a grader bug, with the worker's traceback),
    ``backends.gpu_timing.ReferenceUnstableError`` (the reference kernel disagreed with
    itself, so no timing verdict is fair) and ``backends.gpu.GraderCudaFault`` (CUDA failed in
    the grader's own work on the GPU: a copy of a launch's arrays before the kernel ran or after
    it finished, a timing session's uploads and buffers).

``cli.Terminated`` is not an error but the grading run's time limit arriving as SIGTERM: it
stays a ``BaseException`` so that no ``except Exception`` swallows it.
"""


class AutograderError(Exception):
    """An error the grader raises on purpose; its message is written for whoever is at fault."""
