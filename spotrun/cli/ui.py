"""`spotrun ui`: the local web dashboard (spotrun/ui), served from this machine."""

from __future__ import annotations

import sys
import threading
import webbrowser

import typer

from spotrun.cli.render import err
from spotrun.core.config import load_settings
from spotrun.core.errors import UsageError
from spotrun.core.home import default_home
from spotrun.remote_controller.record import load_record
from spotrun.service.lookup import open_ledger
from spotrun.ui import server, tunnel


def ui(
    host: str = typer.Option("127.0.0.1", "--host", help="address to listen on (loopback)"),
    port: int = typer.Option(0, "--port", help="port to listen on (default: a free one)"),
    expose: bool = typer.Option(
        False, "--expose", help="allow a --host other machines can reach (says what it exposes)"
    ),
    browser: bool = typer.Option(True, "--browser/--no-browser", help="open it in a browser"),
    end_with_input: bool = typer.Option(
        False, "--end-with-input", hidden=True, help="end when standard input ends"
    ),
) -> None:
    """A live web dashboard of runs, sweeps and costs, on this machine (Ctrl-C ends it).

    Every request needs the token in the URL it prints. Nothing is fetched from the internet.
    With the controller on another host (`spotrun controller up`), the dashboard is served
    there and reached through spotrun's ssh connection to it.

    \b
    Examples:
      spotrun ui
      spotrun ui --port 8765 --no-browser
    """
    if not 0 <= port <= 65535:
        raise UsageError(f"--port must be 0 to 65535, got {port}")
    warning = server.check_host(host, expose=expose)
    home = default_home()
    record = load_record(home)
    sock = server.bind(host, port)
    if warning:
        err.print(f"warning: {warning}", markup=False)

    def ready(address: server.Address) -> None:
        sys.stdout.write(f"{address.url}\n")
        sys.stdout.flush()
        err.print("the dashboard answers only with the token above; Ctrl-C ends it", markup=False)
        if browser:  # in the background: a slow browser start must not hold the server up
            threading.Thread(target=webbrowser.open, args=(address.url,), daemon=True).start()

    def note(line: str) -> None:
        err.print(line, markup=False)

    try:
        if record is not None:  # its runs are in the ledger there: served there
            tunnel.serve_through_host(load_settings(home), record, sock, ready=ready, log=note)
        else:
            server.serve(open_ledger(), sock, ready=ready, end_with_input=end_with_input)
    except KeyboardInterrupt:
        return  # Ctrl-C is how the dashboard ends
