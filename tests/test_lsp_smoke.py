from __future__ import annotations

import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from conftest import SERVER_COMMAND

TEXT = r"""\documentclass{article}
\begin{document}
\section{Intro}
Notwithstanding the aforementioned considerations regarding the methodological underpinnings of heterogeneous computational infrastructures, the investigators systematically operationalised multidimensional evaluation frameworks encompassing interdisciplinary epistemological perspectives, thereby substantiating previously unverifiable theoretical propositions concerning organisational interoperability.

Short and plain.
\end{document}
"""


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER_COMMAND))
async def client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(
        types.InitializeParams(capabilities=client_capabilities("visual-studio-code"))
    )
    yield
    await lsp_client.shutdown_session()


async def test_push(client: LanguageClient):
    uri = "file:///tmp/smoke.tex"
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="latex", version=1, text=TEXT)
        )
    )
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    diags = client.diagnostics[uri]
    print(diags)
    assert len(diags) == 1 and diags[0].code == "readability"
