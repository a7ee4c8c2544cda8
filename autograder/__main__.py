"""``python -m autograder``: the same command as the ``autograder`` script."""

from autograder.cli import main

main()
