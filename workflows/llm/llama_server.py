"""Runs llama-cpp-python's OpenAI-compatible server for the embedded model, with llama.cpp's extra buffer
types (weight repacking) off: `python -m margin.workflows.llm.llama_server --model ... [server options]`.

Why: on x86-64 CPUs with AMX (Intel Sapphire Rapids and later) llama.cpp repacks the weights into AMX buffers
and the first completion dies with SIGSEGV in libggml-cpu; with `use_extra_bufts = False` the same model
answers correctly, on every CPU llama.cpp supports. llama-cpp-python's server and its `Llama` class do not expose
that model parameter (0.3.x), but `Llama` takes its model parameters from llama.cpp's
`llama_model_default_params()` on every load, so this process wraps that one function. Repacking only speeds up
some quantisations on some CPUs; for a 135M-parameter model the difference is small and correctness comes first.

The process also turns on faulthandler, so that a crash leaves a traceback in the server's log, which margin
shows to the user.
"""

from __future__ import annotations

import faulthandler
import sys
from typing import Any


def disable_extra_buffer_types() -> bool:
    """Make every model load in this process use no extra buffer types. False when llama.cpp has no such
    parameter (an older llama-cpp-python, which also has no AMX repacking to switch off)."""
    import llama_cpp.llama_cpp as bindings

    fields = {name for name, *_ in getattr(bindings.llama_model_params, "_fields_", ())}
    if "use_extra_bufts" not in fields:
        return False
    original = bindings.llama_model_default_params
    if getattr(original, "margin_no_extra_bufts", False):
        return True

    def default_params_without_extra_buffer_types() -> Any:
        params = original()
        params.use_extra_bufts = False
        return params

    default_params_without_extra_buffer_types.margin_no_extra_bufts = True  # type: ignore[attr-defined]
    bindings.llama_model_default_params = default_params_without_extra_buffer_types
    return True


def main() -> None:
    faulthandler.enable()  # a SIGSEGV in llama.cpp leaves the Python stack in the log margin reads back
    if disable_extra_buffer_types():
        print("margin: llama.cpp extra buffer types (weight repacking) are off", file=sys.stderr, flush=True)
    else:
        print(
            "margin: this llama.cpp has no use_extra_bufts parameter; left as it is",
            file=sys.stderr,
            flush=True,
        )
    from llama_cpp.server.__main__ import main as serve

    serve()


if __name__ == "__main__":
    main()
