"""A stand-in for the embedded model server that behaves as llama-cpp-python did on AMX CPUs: it lists its
model, then dies with SIGSEGV on the first completion. Run as the embedded server's command by the crash tests:

    python tests/crashing_model_server.py --model FILE --port N [other llama-cpp-python options, ignored]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument(
        "--crash", choices=("segv", "exit", "start"), default=os.environ.get("CRASH_HOW", "segv")
    )
    arguments, _ = parser.parse_known_args()
    name = Path(arguments.model).name
    if arguments.crash == "start":
        print(f"llama_model_load: error: cannot load the model file {name}", file=sys.stderr, flush=True)
        sys.exit(3)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            print(format % args, file=sys.stderr, flush=True)

        def do_GET(self) -> None:
            body = json.dumps({"object": "list", "data": [{"id": name, "object": "model"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            print("llama_model_load: repacking weights into AMX buffers", file=sys.stderr, flush=True)
            print("ggml-cpu: general protection fault in the AMX kernel", file=sys.stderr, flush=True)
            if arguments.crash == "exit":
                os._exit(7)
            os.kill(os.getpid(), signal.SIGSEGV)

    print(f"stand-in model server for {name} on port {arguments.port}", file=sys.stderr, flush=True)
    HTTPServer(("127.0.0.1", arguments.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
