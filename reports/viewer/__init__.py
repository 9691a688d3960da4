"""`compare view`: a local, read-only web app over run directories (the runs, a run's overview, a task's
units and conversations, a running run followed live). `create_app` is the Starlette app; `serve` runs it in
the foreground, `start_in_background` on a thread beside a run."""

from .app import create_app
from .serve import DEFAULT_PORT, Served, is_loopback, port_free, serve, start_in_background

__all__ = ["DEFAULT_PORT", "Served", "create_app", "is_loopback", "port_free", "serve", "start_in_background"]
