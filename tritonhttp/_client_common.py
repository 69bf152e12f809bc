"""What the sync and asyncio clients share above the sans-IO core.

The two clients differ only in how a prepared request travels (a thread-safe socket
pool; an asyncio pool or httpx). Requests are built by ``tritonhttp._protocol``
(``Endpoints`` + ``RequestContext``); what is left in common is here: the User-Agent,
the answer -> result step, tritonclient's verbose line for a started request, the
static body helpers and the warning for a client dropped without ``close()``.
"""

from __future__ import annotations

import importlib.metadata
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from ._plugin import InferenceServerClientBase
from ._protocol import RESULT, Call, Response, build_infer_body, interpret
from ._tensors import InferInput, InferRequestedOutput, InferResult

__all__ = ["USER_AGENT", "ClientCommon", "print_sent", "result_of"]


def _version() -> str:
    try:
        return importlib.metadata.version("tritonhttp")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - source checkout
        return "0"


USER_AGENT = f"tritonhttp/{_version()}"


def result_of(call: Call, response: Response, verbose: bool) -> Any:
    """The method's result for ``response`` (an :class:`InferResult` for an inference);
    raises the server's error."""
    outcome = interpret(call, response.status, response.body, response.get, verbose)
    if call.kind == RESULT:
        return InferResult._from_parsed(outcome)
    return outcome


def print_sent(request_id: str) -> None:
    """The verbose line of ``async_infer`` once the request is on its way."""
    print("Sent request" + (f" '{request_id}'" if request_id != "" else ""))


class ClientCommon(InferenceServerClientBase):
    """Base of both clients: the plugin registry, the static body helpers and
    the unclosed-client warning (the subclass says how to let go in :meth:`_abandon`).
    """

    _closed = True  # until the subclass's __init__ has built everything: __del__ stays quiet

    def __del__(self) -> None:
        # No I/O and no waiting here: this may run on any thread, at any time (even
        # during interpreter shutdown, when module globals may already be gone).
        if self._closed:
            return
        self._closed = True
        try:
            warnings.warn(f"unclosed {self!r}", ResourceWarning, stacklevel=1, source=self)
        except ResourceWarning:
            raise  # warnings turned into errors (e.g. under pytest): let it show
        except Exception:  # interpreter shutdown: nothing left to warn with
            pass
        finally:
            self._abandon()

    def _abandon(self) -> None:
        """Let go of every connection at once, without I/O or waiting (for ``__del__``)."""
        raise NotImplementedError

    @staticmethod
    def generate_request_body(
        inputs: Sequence[InferInput],
        outputs: Sequence[InferRequestedOutput] | None = None,
        request_id: str = "",
        sequence_id: int | str = 0,
        sequence_start: bool = False,
        sequence_end: bool = False,
        priority: int = 0,
        timeout: int | None = None,
        parameters: Mapping[str, Any] | None = None,
    ) -> tuple[bytes, int | None]:
        """The inference request body and its JSON header length (None: JSON only).

        For sending the request with another HTTP stack; set the
        ``Inference-Header-Content-Length`` header to the length when it is not None.
        """
        body = build_infer_body(
            inputs,
            outputs,
            request_id,
            sequence_id,
            sequence_start,
            sequence_end,
            priority,
            timeout,
            parameters,
        )
        return body.joined(), body.json_size

    @staticmethod
    def parse_response_body(
        response_body: bytes | bytearray | memoryview | str,
        verbose: bool = False,
        header_length: int | str | None = None,
        content_encoding: str | None = None,
    ) -> InferResult:
        """An :class:`InferResult` from a raw response body (see ``from_response_body``)."""
        return InferResult.from_response_body(
            response_body, verbose, header_length, content_encoding
        )
