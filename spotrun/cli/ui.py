"""`spotrun ui`: the local web dashboard (spotrun/ui), served from this machine."""

from __future__ import annotations

import sys
import threading
import webbrowser

import typer

from spotrun.cli.render import err
from spotrun.core.errors import UsageError
from spotrun.core.home import default_home


def ui(
    host: str = typer.Option("127.0.0.1", "--host", help="address to listen on (loopback)"),
    port: int = typer.Option(0, "--port", help="port to listen on (default: a free one)"),
    expose: bool = typer.Option(
        False, "--expose", help="allow a --host other machines can reach (says what it exposes)"
    ),
    browser: bool = typer.Option(True, "--browser/--no-browser", help="open it in a browser"),
) -> None:
    """A live web dashboard of runs, sweeps and costs, on this machine (Ctrl-C ends it).

    Every request needs the token in the URL it prints. Nothing is fetched from the internet.

    \b
    Examples:
      spotrun ui
      spotrun ui --port 8765 --no-browser
    """
    # late: starlette and uvicorn (~0.2 s) load only for the dashboard, never for --help or ls
    from spotrun.core.controller_record import load_record
    from spotrun.service.lookup import open_ledger
    from spotrun.ui import server

    if not 0 <= port <= 65535:
        raise UsageError(f"--port must be 0 to 65535, got {port}")
    warning = server.check_host(host, expose=expose)
    record = load_record(default_home())
    if record is not None:
        raise UsageError(
            f"the controller lives on {record.target.login}: its runs are in the ledger there",
            hint="run `spotrun ui --no-browser` on that host and forward its port with ssh -L",
        )
    sock = server.bind(host, port)
    ledger = open_ledger()
    if warning:
        err.print(f"warning: {warning}", markup=False)

    def ready(address: server.Address) -> None:
        sys.stdout.write(f"{address.url}\n")
        sys.stdout.flush()
        err.print("the dashboard answers only with the token above; Ctrl-C ends it", markup=False)
        if browser:  # in the background: a slow browser start must not hold the server up
            threading.Thread(target=webbrowser.open, args=(address.url,), daemon=True).start()

    try:
        server.serve(ledger, sock, ready=ready)
    except KeyboardInterrupt:
        return  # Ctrl-C is how the dashboard ends
