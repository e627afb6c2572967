"""The opt-in scholarly search (OpenAlex, Semantic Scholar, arXiv) against a stub HTTP server on 127.0.0.1 that
speaks their JSON and Atom and serves PDFs: abstracts and open-access PDF text become passages, peer-review sites
are never fetched (redirects included), answers come from the disk cache the second time, and timeouts, HTTP
errors and bodies that are not the API's give no passages and no exception. Nothing here reaches the internet:
every request the HTTP client sends is checked to go to loopback."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from margin.server.cli import main
from margin.server.settings import DEFAULTS, parse_settings
from margin.testing.scripted_endpoint import Reply, Rule
from margin.workflows.feedback import scholarly
from margin.workflows.feedback.literature import BLOCKED_DOMAINS, Literature
from margin.workflows.feedback.scholarly import (
    ARXIV,
    OPENALEX,
    SEMANTIC_SCHOLAR,
    DiskCache,
    ScholarlySearch,
    abstract_from_inverted_index,
    scholarly_search,
    search_terms,
)
from margin.workflows.feedback.types import Source

from conftest import (
    PAPER_MAIN,
    SCRIPTED_MODEL,
    ScriptedFactory,
    final_user_message,
    finding_json,
    load_manuscript,
    minimal_pdf,
    paragraph_starting,
)

QUESTION = "How do per-section budgets treat rare dosage terms when posting lists are pruned?"
ABSTRACT = "We prune posting lists with a budget per section and keep rare dosage terms in the index."
PDF_LINES = ["Section budgets keep rare dosage terms in the pruned index.", "Recall improves by 6.8 points."]
LOOPBACK = ("127.0.0.1", "localhost")


# -- a stub of the scholarly APIs on loopback ---------------------------------------------------------------------


@dataclass
class Route:
    body: bytes
    status: int = 200
    content_type: str = "application/json"
    delay: float = 0.0  # seconds before the answer
    trickle: float = 0.0  # seconds between 256-byte chunks of the body
    location: str | None = None  # a redirect's target


class ScholarlyStub:
    """A real HTTP server on 127.0.0.1: GET routes by path (query ignored), every request recorded."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.requests: list[tuple[str, dict[str, list[str]]]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                owner.requests.append((parts.path, parse_qs(parts.query)))
                route = owner.routes.get(parts.path, Route(b"not found", 404, "text/plain"))
                time.sleep(route.delay)
                try:
                    self.send_response(route.status)
                    self.send_header("Content-Type", route.content_type)
                    self.send_header("Content-Length", str(len(route.body)))
                    if route.location is not None:
                        self.send_header("Location", route.location)
                    self.end_headers()
                    for start in range(0, len(route.body), 256):
                        self.wfile.write(route.body[start : start + 256])
                        self.wfile.flush()
                        time.sleep(route.trickle)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout under test)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def serve(self, path: str, payload: Any = None, **options: Any) -> None:
        body = options.pop("body", None)
        self.routes[path] = Route(body if body is not None else json.dumps(payload).encode(), **options)

    def paths(self) -> list[str]:
        return [path for path, _ in self.requests]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub() -> Iterator[ScholarlyStub]:
    server = ScholarlyStub()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every request the HTTP client sends, checked to go to loopback (the search swallows exceptions, so a
    request elsewhere is recorded and fails the test at its end, and is never sent)."""
    sent: list[str] = []
    elsewhere: list[str] = []
    original = httpx.AsyncClient.send

    async def send(client: httpx.AsyncClient, request: httpx.Request, **options: Any) -> httpx.Response:
        sent.append(str(request.url))
        if request.url.host not in LOOPBACK:
            elsewhere.append(str(request.url))
            raise httpx.ConnectError("tests never leave loopback", request=request)
        return await original(client, request, **options)

    monkeypatch.setattr(httpx.AsyncClient, "send", send)
    yield sent
    assert elsewhere == [], f"a test tried to reach the internet: {elsewhere}"


def inverted(text: str) -> dict[str, list[int]]:
    """An abstract as OpenAlex stores it."""
    index: dict[str, list[int]] = {}
    for position, word in enumerate(text.split()):
        index.setdefault(word, []).append(position)
    return index


def openalex_work(
    title: str,
    abstract: str = ABSTRACT,
    *,
    number: int = 1,
    doi: str | None = None,
    pdf_url: str | None = None,
    oa_url: str | None = None,
) -> dict[str, Any]:
    return {
        "id": f"https://openalex.org/W{number}",
        "doi": doi,
        "title": title,
        "display_name": title,
        "publication_year": 2021,
        "authorships": [{"author": {"display_name": name}} for name in ("Li Zhou", "Ana Ruiz")],
        "abstract_inverted_index": inverted(abstract) if abstract else None,
        "best_oa_location": {"pdf_url": pdf_url} if pdf_url else None,
        "open_access": {"is_oa": bool(pdf_url or oa_url), "oa_url": oa_url or pdf_url},
    }


def openalex(*works: dict[str, Any]) -> dict[str, Any]:
    return {"meta": {"count": len(works)}, "results": list(works)}


def search(stub: ScholarlyStub, tmp_path: Path, service: str = OPENALEX, **options: Any) -> ScholarlySearch:
    """A search of `service` at the stub, its cache under tmp_path."""
    options.setdefault("cache", DiskCache(tmp_path / "literature-cache"))
    return ScholarlySearch(service, stub.base_url, **options)


# -- OpenAlex -----------------------------------------------------------------------------------------------------


async def test_an_openalex_query_gives_the_works_abstracts_as_passages(
    stub: ScholarlyStub, tmp_path: Path
) -> None:
    stub.serve(
        "/works",
        openalex(
            openalex_work("Pruning Posting Lists by Section", doi="https://doi.org/10.1/prune"),
            openalex_work("Dense Retrieval Costs", "Nearest-neighbour indexes are large.", number=2),
        ),
    )
    passages = await search(stub, tmp_path, mailto="me@example.org").search(QUESTION)

    assert [passage.title for passage in passages] == [
        "Pruning Posting Lists by Section",
        "Dense Retrieval Costs",
    ]
    first = passages[0]
    assert first.text == f"Pruning Posting Lists by Section. Li Zhou, Ana Ruiz. 2021. {ABSTRACT}"
    assert first.uri == "https://doi.org/10.1/prune"  # where the evidence can be looked up
    assert passages[1].uri == "https://openalex.org/W2"
    assert all(passage.source is Source.LITERATURE for passage in passages)
    ((path, query),) = stub.requests
    assert path == "/works"
    assert query["search"] == ["per-section budgets treat rare dosage terms posting lists pruned"]
    assert query["per-page"] == ["5"] and query["mailto"] == ["me@example.org"]
    assert "abstract_inverted_index" in query["select"][0]


async def test_the_open_access_pdf_text_becomes_passages(stub: ScholarlyStub, tmp_path: Path) -> None:
    stub.serve("/pdf/zhou.pdf", body=minimal_pdf(PDF_LINES), content_type="application/pdf")
    stub.serve("/works", openalex(openalex_work("Pruning Posting Lists", pdf_url=stub.url("/pdf/zhou.pdf"))))
    passages = await search(stub, tmp_path).search(QUESTION)

    abstract, pdf = passages
    assert ABSTRACT in abstract.text
    assert "Section budgets keep rare dosage terms in the pruned index." in pdf.text
    assert "Recall improves by 6.8 points." in pdf.text
    assert pdf.title == "Pruning Posting Lists" and pdf.uri == stub.url("/pdf/zhou.pdf")
    assert stub.paths() == ["/works", "/pdf/zhou.pdf"]


async def test_only_the_first_open_access_pdfs_are_read(stub: ScholarlyStub, tmp_path: Path) -> None:
    for number in range(4):
        stub.serve(f"/pdf/{number}.pdf", body=minimal_pdf([f"Body of paper {number}."]))
    works = [
        openalex_work(f"Paper {number}", number=number, pdf_url=stub.url(f"/pdf/{number}.pdf"))
        for number in range(4)
    ]
    stub.serve("/works", openalex(*works))
    passages = await search(stub, tmp_path, pdfs=2).search(QUESTION)
    assert sorted(path for path in stub.paths() if path.startswith("/pdf/")) == ["/pdf/0.pdf", "/pdf/1.pdf"]
    assert len(passages) == 4 + 2


async def test_an_open_access_url_that_is_a_landing_page_gives_only_the_abstract(
    stub: ScholarlyStub, tmp_path: Path
) -> None:
    stub.serve("/landing", body=b"<html>Read the paper</html>", content_type="text/html")
    stub.serve("/works", openalex(openalex_work("Pruning Posting Lists", oa_url=stub.url("/landing"))))
    passages = await search(stub, tmp_path).search(QUESTION)
    assert [passage.text for passage in passages] == [
        f"Pruning Posting Lists. Li Zhou, Ana Ruiz. 2021. {ABSTRACT}"
    ]


def test_the_abstract_is_rebuilt_from_openalexs_inverted_index() -> None:
    assert abstract_from_inverted_index(inverted("the cat saw the dog")) == "the cat saw the dog"
    assert abstract_from_inverted_index({"b": [1], "a": [0], "bad": ["x", -1]}) == "a b"
    assert abstract_from_inverted_index(None) == ""


def test_a_question_becomes_search_words() -> None:
    assert search_terms("How expensive is the nearest-neighbour index of dense encoders?") == (
        "expensive nearest-neighbour index dense encoders"
    )
    assert search_terms("What is it?") == ""


# -- Semantic Scholar and arXiv -----------------------------------------------------------------------------------


async def test_semantic_scholar_abstracts_and_open_access_pdfs(stub: ScholarlyStub, tmp_path: Path) -> None:
    stub.serve("/pdf/s2.pdf", body=minimal_pdf(PDF_LINES))
    stub.serve(
        "/graph/v1/paper/search",
        {
            "total": 2,
            "data": [
                {
                    "paperId": "abc",
                    "title": "Pruning Posting Lists",
                    "abstract": ABSTRACT,
                    "year": 2021,
                    "authors": [{"name": "Li Zhou"}],
                    "url": "https://www.semanticscholar.org/paper/abc",
                    "externalIds": {"DOI": "10.1/prune"},
                    "openAccessPdf": {"url": stub.url("/pdf/s2.pdf")},
                },
                {"paperId": "def", "title": "No Abstract Here", "abstract": None, "openAccessPdf": None},
            ],
        },
    )
    passages = await search(stub, tmp_path, SEMANTIC_SCHOLAR).search(QUESTION)

    assert passages[0].text == f"Pruning Posting Lists. Li Zhou. 2021. {ABSTRACT}"
    assert passages[0].uri == "https://doi.org/10.1/prune"
    assert passages[1].text == "No Abstract Here"
    assert "Recall improves by 6.8 points." in passages[2].text
    path, query = stub.requests[0]
    assert path == "/graph/v1/paper/search"
    assert query["query"] == ["per-section budgets treat rare dosage terms posting lists pruned"]
    assert set(query["fields"][0].split(",")) >= {"title", "abstract", "year", "openAccessPdf", "externalIds"}


def arxiv_feed(*entries: tuple[str, str, str]) -> bytes:
    body = "".join(
        f"""<entry><id>http://arxiv.org/abs/{number}</id><published>2020-05-01T00:00:00Z</published>
        <title>{title}</title><summary>  {summary}  </summary><author><name>Li Zhou</name></author>
        <link href="http://arxiv.org/abs/{number}" rel="alternate" type="text/html"/>
        <link title="pdf" href="{pdf}" rel="related" type="application/pdf"/></entry>"""
        for number, (title, summary, pdf) in enumerate(entries, 1)
    )
    return f'<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom">{body}</feed>'.encode()


async def test_arxiv_entries_and_their_pdfs(stub: ScholarlyStub, tmp_path: Path) -> None:
    stub.serve("/pdf/2001.pdf", body=minimal_pdf(PDF_LINES))
    stub.serve(
        "/api/query",
        body=arxiv_feed(("Pruning Posting Lists", ABSTRACT, stub.url("/pdf/2001.pdf"))),
        content_type="application/atom+xml",
    )
    passages = await search(stub, tmp_path, ARXIV).search(QUESTION)

    abstract, pdf = passages
    assert abstract.text == f"Pruning Posting Lists. Li Zhou. 2020. {ABSTRACT}"
    assert abstract.uri == "http://arxiv.org/abs/1"
    assert "Section budgets keep rare dosage terms" in pdf.text
    path, query = stub.requests[0]
    assert path == "/api/query"
    assert query["search_query"] == [
        "all:per-section OR all:budgets OR all:treat OR all:rare OR all:dosage OR all:terms OR all:posting "
        "OR all:lists OR all:pruned"
    ]
    assert query["max_results"] == ["5"] and query["sortBy"] == ["relevance"]


# -- peer-review sites ----------------------------------------------------------------------------------------------


async def test_a_pdf_on_a_peer_review_site_is_never_fetched(
    stub: ScholarlyStub, tmp_path: Path, loopback_only: list[str]
) -> None:
    stub.serve("/pdf/review.pdf", body=minimal_pdf(["Reviewer 2: REVIEWER-SECRET"]))
    stub.serve(
        "/works",
        openalex(
            # "localhost" stands for a peer-review site here: were it fetched, the stub would see the request
            openalex_work("Local Review", pdf_url=stub.url("/pdf/review.pdf", host="localhost")),
            openalex_work(
                "OpenReview Copy",
                number=2,
                doi="https://openreview.net/forum?id=x",
                pdf_url="https://OpenReview.net/pdf?id=x",
            ),
            openalex_work("PeerJ Copy", number=3, pdf_url="https://sub.peerj.com/articles/1.pdf"),
        ),
    )
    passages = await search(stub, tmp_path, blocked=(*BLOCKED_DOMAINS, "localhost")).search(QUESTION)

    assert stub.paths() == ["/works"]
    assert [url for url in loopback_only if "works" not in url] == []  # nothing else was even tried
    assert not any("REVIEWER-SECRET" in passage.text for passage in passages)
    assert not any("openreview" in (passage.uri or "").lower() for passage in passages)
    assert {"openreview.net", "peerj.com", "f1000research.com"} <= set(BLOCKED_DOMAINS)


async def test_a_redirect_to_a_peer_review_site_is_not_followed(stub: ScholarlyStub, tmp_path: Path) -> None:
    stub.serve("/pdf/review.pdf", body=minimal_pdf(["REVIEWER-SECRET"]))
    stub.serve("/to-review", body=b"", status=302, location=stub.url("/pdf/review.pdf", host="localhost"))
    stub.serve("/pdf/paper.pdf", body=minimal_pdf(PDF_LINES))
    stub.serve("/moved", body=b"", status=301, location="/pdf/paper.pdf")
    stub.serve(
        "/works",
        openalex(
            openalex_work("Redirected to Reviews", pdf_url=stub.url("/to-review")),
            openalex_work("Moved Paper", number=2, pdf_url=stub.url("/moved")),
        ),
    )
    passages = await search(stub, tmp_path, blocked=(*BLOCKED_DOMAINS, "localhost")).search(QUESTION)

    assert "/pdf/review.pdf" not in stub.paths()
    assert "/pdf/paper.pdf" in stub.paths()  # an ordinary redirect is followed
    assert any("Recall improves by 6.8 points." in passage.text for passage in passages)
    assert not any("REVIEWER-SECRET" in passage.text for passage in passages)


# -- the disk cache -------------------------------------------------------------------------------------------------


async def test_the_disk_cache_answers_a_repeat_without_a_request(stub: ScholarlyStub, tmp_path: Path) -> None:
    stub.serve("/pdf/zhou.pdf", body=minimal_pdf(PDF_LINES))
    stub.serve("/works", openalex(openalex_work("Pruning Posting Lists", pdf_url=stub.url("/pdf/zhou.pdf"))))
    first = await search(stub, tmp_path).search(QUESTION)
    assert len(stub.requests) == 2

    again = await search(stub, tmp_path).search(QUESTION)  # a new search (a new run), the same cache folder
    assert again == first
    assert len(stub.requests) == 2
    await search(stub, tmp_path).search("Which dense encoders are compared?")
    assert stub.paths()[2:] == ["/works"]  # another question is another URL


def test_the_disk_cache_is_bounded_and_keeps_the_recently_used(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path / "cache", max_bytes=2500)
    cache.put("https://example.org/0", bytes(1000))
    time.sleep(0.02)  # distinct file times
    cache.put("https://example.org/1", bytes(1000))
    time.sleep(0.02)
    assert cache.get("https://example.org/0") == bytes(1000)  # used again: now the most recent
    time.sleep(0.02)
    cache.put("https://example.org/2", bytes(1000))

    assert cache.get("https://example.org/1") is None  # the least recently used went to make room
    assert cache.get("https://example.org/0") == bytes(1000)
    assert cache.get("https://example.org/2") == bytes(1000)
    assert sum(path.stat().st_size for path in (tmp_path / "cache").iterdir()) <= 2500


def test_an_old_cached_answer_is_a_miss(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path / "cache", max_age=0.0)
    cache.put("https://example.org/a", b"answer")
    time.sleep(0.01)
    assert cache.get("https://example.org/a") is None


def test_an_unwritable_cache_is_no_cache(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder", encoding="utf-8")
    cache = DiskCache(tmp_path / "file" / "cache")
    cache.put("https://example.org/a", b"answer")  # no exception
    assert cache.get("https://example.org/a") is None


def test_the_cache_lives_in_the_user_cache_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert ScholarlySearch().cache.folder == tmp_path / "xdg" / "margin" / "literature"


# -- failures -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("route", "service"),
    [
        (Route(b"{}", 500), OPENALEX),
        (Route(b'{"message": "Too Many Requests"}', 429), SEMANTIC_SCHOLAR),
        (Route(b"<html>not json</html>", content_type="text/html"), OPENALEX),
        (Route(b'{"results": {"a": 1}}'), OPENALEX),
        (Route(b"[1, 2]"), SEMANTIC_SCHOLAR),
        (Route(b"<feed><unclosed>"), ARXIV),
        (Route(b"<html><body>Sign in to the network</body></html>"), ARXIV),
    ],
    ids=["http-500", "http-429", "not-json", "results-not-a-list", "a-list", "broken-atom", "not-atom"],
)
async def test_http_errors_and_foreign_bodies_give_no_passages(
    stub: ScholarlyStub, tmp_path: Path, route: Route, service: str
) -> None:
    for path in ("/works", "/graph/v1/paper/search", "/api/query"):
        stub.routes[path] = route
    assert await search(stub, tmp_path, service).search(QUESTION) == []
    assert not list((tmp_path / "literature-cache").glob("*.body"))  # nothing kept that was not usable


async def test_a_search_that_times_out_gives_no_passages(stub: ScholarlyStub, tmp_path: Path) -> None:
    stub.serve("/works", openalex(openalex_work("Slow")), delay=2.0)
    started = time.perf_counter()
    assert await search(stub, tmp_path, timeout=0.3).search(QUESTION) == []
    assert time.perf_counter() - started < 1.5


async def test_a_pdf_that_trickles_past_the_timeout_is_skipped(stub: ScholarlyStub, tmp_path: Path) -> None:
    stub.serve("/pdf/slow.pdf", body=minimal_pdf(PDF_LINES), trickle=0.2)  # each chunk arrives in time
    stub.serve("/works", openalex(openalex_work("Pruning Posting Lists", pdf_url=stub.url("/pdf/slow.pdf"))))
    started = time.perf_counter()
    passages = await search(stub, tmp_path, timeout=0.3).search(QUESTION)
    assert [passage.title for passage in passages] == ["Pruning Posting Lists"]  # the abstract only
    assert time.perf_counter() - started < 1.5


async def test_a_pdf_larger_than_the_bound_is_not_read(
    stub: ScholarlyStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scholarly, "MAX_PDF_BYTES", 200)
    stub.serve("/pdf/big.pdf", body=minimal_pdf(PDF_LINES))
    stub.serve("/works", openalex(openalex_work("Pruning Posting Lists", pdf_url=stub.url("/pdf/big.pdf"))))
    passages = await search(stub, tmp_path).search(QUESTION)
    assert len(passages) == 1


async def test_a_broken_pdf_is_skipped(stub: ScholarlyStub, tmp_path: Path) -> None:
    stub.serve("/pdf/broken.pdf", body=b"%PDF-1.4\n garbage garbage")
    stub.serve(
        "/works", openalex(openalex_work("Pruning Posting Lists", pdf_url=stub.url("/pdf/broken.pdf")))
    )
    assert len(await search(stub, tmp_path).search(QUESTION)) == 1


async def test_a_dead_or_bad_base_url_or_mail_address_gives_no_passages(
    dead_url: str, tmp_path: Path
) -> None:
    cache = DiskCache(tmp_path / "cache")
    assert await ScholarlySearch(OPENALEX, dead_url, cache=cache, timeout=2.0).search(QUESTION) == []
    assert await ScholarlySearch(OPENALEX, "not-a-url", cache=cache).search(QUESTION) == []
    assert await ScholarlySearch(OPENALEX, "http://[::1", cache=cache).search(QUESTION) == []
    unsendable = ScholarlySearch(OPENALEX, dead_url, mailto="josé@exämple.org", cache=cache)  # not ASCII
    assert await unsendable.search(QUESTION) == []


# -- opt-in ---------------------------------------------------------------------------------------------------------


async def test_scholarly_search_is_off_by_default_and_then_sends_no_request(loopback_only: list[str]) -> None:
    assert DEFAULTS.values["review.scholarlySearch"] == "off"
    assert scholarly_search(DEFAULTS.values["review.scholarlySearch"]) is None
    paper = load_manuscript(PAPER_MAIN)
    literature = await Literature.gather(paper)
    assert literature.scholarly is None and literature.web is None
    paragraph = paragraph_starting(paper, "Ranking models offer a natural framing")
    assert await literature.search("How are dense encoders compared with BM25?", paragraph)
    assert loopback_only == []


def test_the_settings_choose_the_service_the_base_url_and_the_mail_address() -> None:
    settings, problems = parse_settings(
        {
            "review": {
                "scholarlySearch": "semanticscholar",
                "scholarlyBaseUrl": " http://mirror/ ",
                "mailto": "a@b",
            }
        }
    )
    assert problems == []
    values = settings.values
    found = scholarly_search(
        values["review.scholarlySearch"], values["review.scholarlyBaseUrl"], values["review.mailto"]
    )
    assert found is not None
    assert (found.service, found.root, found.mailto) == (SEMANTIC_SCHOLAR, "http://mirror", "a@b")
    assert ScholarlySearch(ARXIV).root == "https://export.arxiv.org"
    _, problems = parse_settings({"review": {"scholarlySearch": "google"}})
    assert problems and "scholarlySearch" in problems[0]


# -- with the rest of the literature ----------------------------------------------------------------------------------


async def test_scholarly_passages_are_ranked_with_the_cited_works(
    stub: ScholarlyStub, tmp_path: Path
) -> None:
    stub.serve(
        "/works",
        openalex(
            openalex_work("Unrelated Survey", "Graph colouring heuristics for timetables.", number=1),
            openalex_work(
                "Index Costs of Dense Encoders",
                "The nearest-neighbour index of dense encoders is costly.",
                number=2,
            ),
        ),
    )
    paper = load_manuscript(PAPER_MAIN)
    literature = await Literature.gather(paper, scholarly=search(stub, tmp_path))
    paragraph = paragraph_starting(paper, "Ranking models offer a natural framing")
    passages = await literature.search(
        "How expensive is the nearest-neighbour index of dense encoders?", paragraph
    )

    titles = [passage.title for passage in passages]
    assert titles[:2] == ["Index Costs of Dense Encoders", "Dense Passage Encoders for Biomedical Screening"]
    assert len(titles) == 5
    assert "Unrelated Survey" not in titles  # the cited works fill the places left before it


def test_margin_review_reads_the_scholarly_search_when_opted_in(
    stub: ScholarlyStub,
    scripted: ScriptedFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    stub.serve("/pdf/zhou.pdf", body=minimal_pdf(PDF_LINES))
    stub.serve("/works", openalex(openalex_work("Pruning Posting Lists", pdf_url=stub.url("/pdf/zhou.pdf"))))
    (tmp_path / "paper.md").write_text(
        "# Method\n\nWe prune each posting list of the sparse index to a fixed budget per section, and we keep "
        "that budget constant across all reviews in the collection so that the index size stays predictable.\n",
        encoding="utf-8",
    )
    plan = [{"action": "literature_question", "question": QUESTION}, {"action": "review"}]
    endpoint = scripted(
        Rule(role="planner", replies=[Reply(json={"steps": plan})]),
        Rule(role="controller", replies=[Reply(json={"explanation": "go", "action": "literature_question"})]),
        Rule(role="investigator", replies=[Reply(json={"answer": "They keep them.", "answerable": True})]),
        Rule(
            role="reviewer",
            replies=[
                Reply(
                    json={
                        "findings": [finding_json("fixed budget per section", "Originality", "Cite it.", "")]
                    }
                )
            ],
        ),
    )
    settings = tmp_path / "settings.json"
    settings.write_text(
        json.dumps(
            {
                "cache": {"path": str(tmp_path / "llm-cache.sqlite3")},
                "llm": {"retries": 0, "timeoutSeconds": 5, "model": SCRIPTED_MODEL},
                "review": {
                    "candidatePlans": 1,
                    "scholarlySearch": "openalex",
                    "scholarlyBaseUrl": stub.base_url,
                },
            }
        ),
        encoding="utf-8",
    )
    code = main(
        [
            "review",
            "paper.md",
            "--mode",
            "full",
            "--format",
            "json",
            "--endpoint",
            endpoint.base_url,
            "--settings",
            str(settings),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out

    (investigation,) = endpoint.calls("investigator")
    prompt = final_user_message(investigation)
    assert ABSTRACT in prompt and "Recall improves by 6.8 points." in prompt
    assert stub.paths() == ["/works", "/pdf/zhou.pdf"]
    assert list((tmp_path / "xdg" / "margin" / "literature").glob("*.body"))  # cached for the next run
    assert json.loads(out)["findings"][0]["evidence"][0]["source"] == "literature"
