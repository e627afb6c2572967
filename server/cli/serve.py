"""`margin serve`: the language server on stdio (what editors launch), one TCP client or a Unix socket."""

from __future__ import annotations

import argparse
import sys

from .. import logs
from ..lsp import serve_stdio, serve_tcp, server
from ..transport import ServeError, serve_unix
from . import exit_status
from .usage import UsageError


def run(arguments: argparse.Namespace) -> int:
    if arguments.token_file is not None and not arguments.tcp:
        raise UsageError("--token-file is for --tcp")
    try:
        if arguments.tcp:
            return serve_tcp(arguments.port, arguments.token_file)
        if arguments.socket is not None:
            logs.configure()
            return serve_unix(server, arguments.socket)
        return serve_stdio()  # 0 after shutdown then exit, 1 if the session ended without shutdown (LSP)
    except ServeError as error:
        print(f"margin: {error}", file=sys.stderr)
        return exit_status.USAGE
