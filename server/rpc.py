"""JSON-RPC 2.0 and LSP rules that pygls leaves to chance, enforced before a message reaches pygls.

pygls answers a request whose id is an object or a list with an internal error, serves one whose id is a float
or null, answers malformed JSON with a window/showMessage instead of a ParseError, ignores every request after
`shutdown` without answering, and exits 0 after `exit` even without `shutdown`. Here each decoded message is
checked first: an unusable message gets the error response JSON-RPC prescribes (id null when its id cannot be
used), and only well-formed ones are handed to pygls. The transport (transport.py) feeds this class decoded
JSON values and reports of bad frames; it also tells it when the session is over.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from lsprotocol.types import ResponseErrorMessage
from pygls.exceptions import JsonRpcException
from pygls.protocol import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    LanguageServerProtocol,
    lsp_method,
)

from . import logs

log = logging.getLogger(f"{logs.LOGGER_NAME}.rpc")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
# Each bad frame is logged once, but a client that sends nothing else must not fill the log: after this many,
# one line says the rest are not logged (each still gets its error response).
LOGGED_PROBLEMS = 20

MsgId = int | str

# A mixin (MarginProtocol lists LanguageServerProtocol itself); type checkers see what it extends.
_Base = LanguageServerProtocol if TYPE_CHECKING else object


def usable_id(value: object) -> bool:
    """LSP ids are integers or strings (JSON-RPC's floats and null are not accepted; bool is not an int here)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


class HardenedProtocol(_Base):
    """Mixin for a LanguageServerProtocol fed by margin's transport: it validates each message and tracks the
    session. Use it first: class P(HardenedProtocol, LanguageServerProtocol)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Before pygls' __init__: it reads every attribute (exit_code too) to find the builtin features.
        self.shutdown_requested = False
        self._end_session: Callable[[int], None] | None = None
        self._problems_logged = 0
        self._client_lost = False
        super().__init__(*args, **kwargs)

    # -- session ---------------------------------------------------------------------------------------------

    def open_session(self, writer: Any, end: Callable[[int], None]) -> None:
        """Start talking to a client through `writer`; `end(code)` stops the server with that exit code."""
        self.set_writer(writer)
        self._end_session = end
        self._client_lost = False

    @property
    def exit_code(self) -> int:
        """LSP's rule: 0 if the client asked for shutdown before the session ended, else 1."""
        return 0 if self.shutdown_requested else 1

    def end_session(self) -> None:
        end, self._end_session = self._end_session, None
        if end is not None:
            end(self.exit_code)

    def client_lost(self, reason: str) -> None:
        """The writer cannot reach the client any more: say so once and end the session (nothing can be sent)."""
        if self._client_lost:
            return
        self._client_lost = True
        log.warning("%s; shutting down", reason)
        self.end_session()

    @lsp_method(types.EXIT)
    def lsp_exit(self, *args: Any) -> Generator[Any, Any, None]:
        # pygls calls sys.exit from inside a handler and its start_io swallows the SystemExit, so the exit code
        # was always 0; here the transport ends the session, flushes what is queued and returns the code.
        if (user_handler := self.fm.features.get(types.EXIT)) is not None:
            yield user_handler, args, None
        if self._end_session is None:  # not run by margin's transport (an in-process test): what pygls does
            sys.exit(self.exit_code)
        self.end_session()

    def _run_generator(self, future: Any, *, gen: Generator[Any, Any, Any], result_future: Any) -> None:
        # pygls calls future.result() on a handler step that was cancelled (by $/cancelRequest, or by asyncio
        # when the session ends): CancelledError escapes into the event loop, one traceback per handler.
        if future is not None and future.cancelled():
            gen.close()
            result_future.cancel()
            return
        super()._run_generator(future, gen=gen, result_future=result_future)

    # -- incoming --------------------------------------------------------------------------------------------

    def bad_frame(self, reason: str) -> None:
        """A frame that could not be read as one JSON value: ParseError with id null, and it is logged."""
        self._log_problem("bad frame from the client: %s", reason)
        self._reply_error(None, PARSE_ERROR, f"Parse error: {reason}")

    def receive(self, data: Any) -> None:
        """One decoded JSON value from the client. Never raises: the next message must still be read."""
        try:
            self._receive(data)
        except Exception:
            log.exception("failed to handle a message from the client")

    def _receive(self, data: Any) -> None:
        if not isinstance(data, dict):
            batch = " (batches are not supported)" if isinstance(data, list) else ""
            self._invalid(None, f"a message must be a JSON object{batch}")
            return
        msg_id = data.get("id")
        answer_to = msg_id if usable_id(msg_id) else None
        if data.get("jsonrpc") != "2.0":
            self._invalid(answer_to, 'jsonrpc must be "2.0"')
            return
        if "method" in data:
            self._receive_call(data, answer_to)
        elif "result" in data or "error" in data:
            self._receive_response(data)
        else:
            self._invalid(answer_to, "a message needs a method, a result or an error")

    def _receive_call(self, data: dict[str, Any], answer_to: MsgId | None) -> None:
        method = data["method"]
        is_request = "id" in data
        if not isinstance(method, str):
            self._invalid(answer_to, "method must be a string")
            return
        if is_request and answer_to is None:
            self._invalid(None, "id must be an integer or a string")
            return
        if data.get("params") is not None and not isinstance(data["params"], dict | list):
            self._invalid(answer_to, "params must be an object or an array")
            return
        if self.shutdown_requested and method != types.EXIT:
            # LSP: after shutdown, requests get InvalidRequest and notifications are dropped.
            if is_request:
                self._reply_error(answer_to, INVALID_REQUEST, f"Invalid Request: {method} after shutdown")
            else:
                log.debug("dropped %s after shutdown", method)
            return
        if method == types.SHUTDOWN and is_request:
            # From receipt, not from pygls' reply: a request sent right behind shutdown is already refused.
            self.shutdown_requested = True
        message_type = self.get_message_type(method) or (
            JsonRPCRequestMessage if is_request else JsonRPCNotification
        )
        try:
            message = self._converter.structure(data, message_type)
        except Exception as error:  # the params do not fit the method's LSP type
            if is_request:
                self._reply_error(answer_to, INVALID_PARAMS, f"Invalid params for {method}: {error}")
            else:
                self._log_problem("ignored %s with invalid params: %s", method, error)
            return
        self.handle_message(message)

    def _receive_response(self, data: dict[str, Any]) -> None:
        msg_id = data.get("id")
        if not usable_id(msg_id):
            # The client could not use something we sent (id null): nothing to match it with.
            self._log_problem("response without a usable id from the client: %.200s", data.get("error"))
            return
        waiting = self._request_futures.get(msg_id)
        if waiting is not None and waiting.done():
            # margin gave up on this request (the work that asked was cancelled, or the answer came after its
            # timeout): pygls would set the result of a cancelled future and raise. Nobody needs the answer.
            self._request_futures.pop(msg_id, None)
            self._result_types.pop(msg_id, None)
            log.debug("a late answer to request %r, which margin no longer waits for", msg_id)
            return
        try:
            if "error" in data:
                message = self._converter.structure(data, ResponseErrorMessage)
            else:
                result_type = self._result_types.pop(msg_id, None) or JsonRPCResponseMessage
                message = self._converter.structure(data, result_type)
        except Exception as error:
            # Whoever awaits this answer gets the failure instead of waiting forever.
            future = self._request_futures.pop(msg_id, None)
            if future is not None and not future.done():
                future.set_exception(JsonRpcException(f"unusable response from the client: {error}"))
            self._log_problem("unusable response %r from the client: %s", msg_id, error)
            return
        self.handle_message(message)

    # -- outgoing --------------------------------------------------------------------------------------------

    def _invalid(self, msg_id: MsgId | None, reason: str) -> None:
        self._log_problem("invalid message from the client: %s", reason)
        self._reply_error(msg_id, INVALID_REQUEST, f"Invalid Request: {reason}")

    def _reply_error(self, msg_id: MsgId | None, code: int, message: str) -> None:
        # A plain dict: lsprotocol's ResponseErrorMessage drops "id" when it is None, and JSON-RPC requires
        # "id": null in an error about a message whose id could not be read.
        self._send_data({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})

    def _log_problem(self, template: str, *args: object) -> None:
        self._problems_logged += 1
        if self._problems_logged <= LOGGED_PROBLEMS:
            log.warning(template, *args)
        elif self._problems_logged == LOGGED_PROBLEMS + 1:
            log.warning("more bad messages from the client; they are answered but no longer logged")
