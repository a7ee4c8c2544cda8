"""Every exception class the package defines is an ``AutograderError`` (``autograder/errors.py``),
and that module's docstring says whose fault each one is."""

import importlib
import inspect
import pkgutil

import autograder
from autograder import errors
from autograder.errors import AutograderError

# Not errors: SIGTERM (the run's time limit) must get past every ``except Exception``.
SIGNALS = {"autograder.cli.grading.Terminated"}


def _exception_classes() -> dict[str, type]:
    found = {}
    for module in pkgutil.walk_packages(autograder.__path__, "autograder."):
        if module.name.endswith("__main__"):  # importing it runs the command line
            continue
        loaded = importlib.import_module(module.name)
        for _, cls in inspect.getmembers(loaded, inspect.isclass):
            if issubclass(cls, BaseException) and cls.__module__ == loaded.__name__:
                found[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return found


def test_every_exception_of_the_package_derives_from_the_root():
    classes = _exception_classes()
    assert len(classes) > 10  # the walk found the package's modules
    outside = [name for name, cls in classes.items() if not issubclass(cls, AutograderError)]
    assert sorted(outside) == sorted(SIGNALS)


def test_the_roots_docstring_names_every_exception():
    unnamed = [name for name, cls in _exception_classes().items() if cls.__name__ not in errors.__doc__]
    assert unnamed == []


def test_errors_that_were_runtime_errors_still_are():
    from autograder.backends.gpu_timing import ReferenceUnstableError
    from autograder.backends.worker import WorkerError

    assert issubclass(WorkerError, RuntimeError) and issubclass(ReferenceUnstableError, RuntimeError)
