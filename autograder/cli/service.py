"""``serve``: the GPU grading service that Gradescope's autograder calls, its options."""

from __future__ import annotations

from pathlib import Path

import click

from autograder.cli.shared import course_option, course_or_usage_error, log_level_option, read_tokens
from autograder.contract import BACKEND_NAMES


@click.command()
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to listen on (TLS: a reverse proxy)."
)
@click.option("--port", type=int, default=8000, show_default=True, help="Port to listen on.")
@click.option(
    "--token-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    required=True,
    help="The callers' tokens, one a line, each `token` or `name:token` (the name is for the log).",
)
@click.option(
    "--address", default=None, help="A Ray cluster to join (default: an embedded one on this machine)."
)
@click.option(
    "--backend",
    type=click.Choice(BACKEND_NAMES),
    default="gpu",
    show_default=True,
    help="Where the kernels run (auto: gpu when the Ray cluster has a GPU).",
)
@click.option(
    "--deadline",
    "deadline_s",
    type=click.FloatRange(min=1),
    default=600,
    show_default=True,
    help="Seconds a job may wait and run; past it, its items say not run.",
)
@click.option(
    "--per-minute",
    type=click.IntRange(min=1),
    default=120,
    show_default=True,
    help="Requests a minute per token.",
)
@click.option(
    "--concurrent", type=click.IntRange(min=1), default=100, show_default=True, help="Jobs at once per token."
)
@click.option(
    "--read-timeout",
    "read_s",
    type=click.FloatRange(min=0.1),
    default=30,
    show_default=True,
    help="Seconds a client has to send a request's headers, and again its body; then it is dropped.",
)
@click.option(
    "--keep-alive",
    "keep_alive_s",
    type=click.FloatRange(min=0.1),
    default=5,
    show_default=True,
    help="Seconds an idle connection stays open between requests.",
)
@click.option(
    "--connections",
    type=click.IntRange(min=1),
    default=500,
    show_default=True,
    help="Connections at once; past it, requests are answered 503.",
)
@course_option
@log_level_option
def serve(host, port, token_file, course_root, **settings):
    """The GPU grading service that Gradescope's autograder calls: POST /v1/grade, GET /v1/health.

    Each job is graded as `autograder grade` grades it, on a Ray worker (one GPU each on a GPU);
    docs/gpu-service.md says how to run it behind a TLS proxy and on a cluster.
    """
    try:  # fastapi, uvicorn and limits come with the serve extra; no grading command needs them
        import uvicorn

        from autograder.delivery import serve as service
    except ImportError as e:
        message = f"autograder serve needs {e.name}: pip install 'cuda-autograder[serve]'"
        raise click.ClickException(message) from e
    course = course_or_usage_error(course_root)
    served = service.ServeSettings(**settings)  # the other options, by name
    tokens = read_tokens(token_file)
    app = service.create_app(course, served, tokens)
    uvicorn.Server(service.server_config(app, served, tokens, host, port)).run()
