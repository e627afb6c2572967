"""Scholarly search for literature questions, opt-in: OpenAlex, Semantic Scholar or arXiv.

The SWIF2T paper answers a literature question by searching, reading what it finds (PDFs included) and taking
the top 5 passages. This is that step over scholarly APIs: each work found gives its abstract, and the first
open-access PDFs give their text; Literature.search ranks those passages with everything else. Peer-review
sites are never fetched, nor is any redirect to one (the paper blocks them: a review of the paper would be the
answer key). Every answer is kept in a disk cache keyed by URL, so a question asked again costs no request. A
failure (network, timeout, HTTP error, a body that is not what the API sends) is one log line and no passages.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import re
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urljoin, urlsplit

import httpx
from platformdirs import user_cache_dir

from .literature import BLOCKED_DOMAINS, is_blocked, pdf_text, text_passages
from .retrieval import _passage_id
from .types import Passage, Source

log = logging.getLogger("margin.feedback.scholarly")

OPENALEX, SEMANTIC_SCHOLAR, ARXIV = "openalex", "semanticscholar", "arxiv"
SERVICES = (OPENALEX, SEMANTIC_SCHOLAR, ARXIV)
PUBLIC_URLS = {
    OPENALEX: "https://api.openalex.org",
    SEMANTIC_SCHOLAR: "https://api.semanticscholar.org",
    ARXIV: "https://export.arxiv.org",
}
MAX_ANSWER_BYTES = 5 * 1024 * 1024  # a search answer; larger is not one
MAX_PDF_BYTES = 20 * 1024 * 1024
MAX_PDF_PAGES = 40  # a paper's body; appendices and supplements add little to one question
MAX_REDIRECTS = 5
CACHE_MAX_BYTES = 512 * 1024 * 1024
CACHE_MAX_AGE = 30 * 24 * 3600.0  # seconds: search indexes grow, so an old answer is asked again
_QUERY_WORDS = 12
_STOP_WORDS = frozenset(
    "a an and are as at be been being but by can could did do does for from had has have how if in into is it "
    "its of on or should so such than that the their them then there these they this those to was were what "
    "when where which while who whom whose why will with would about against between compared other others "
    "paper papers study studies work works".split()
)
_ATOM = "{http://www.w3.org/2005/Atom}"
_OPENALEX_FIELDS = (
    "id,doi,title,display_name,publication_year,authorships,abstract_inverted_index,best_oa_location,"
    "open_access,primary_location"
)
_SEMANTIC_SCHOLAR_FIELDS = "title,abstract,year,authors,url,openAccessPdf,externalIds"


class FetchError(Exception):
    """A URL that could not be, or must not be, fetched; the message says which and why."""


@dataclass(frozen=True, slots=True)
class Work:
    """One work a search found: what the investigator reads of it, and where its open-access PDF is."""

    title: str
    abstract: str = ""
    year: str = ""
    authors: str = ""
    url: str | None = None  # where a reader finds it: the DOI, else the service's page
    pdf_url: str | None = None

    def passage(self) -> Passage:
        """Read like a .bib entry: title, authors, year, abstract."""
        text = ". ".join(part for part in (self.title, self.authors, self.year, self.abstract) if part)
        return Passage(
            _passage_id("work", self.url or self.title), text, Source.LITERATURE, self.title, self.url
        )


def search_terms(question: str, words: int = _QUERY_WORDS) -> str:
    """A question as search words: no punctuation, question words or other stop words (APIs that match all words
    find nothing for "How expensive is ...?")."""
    found = [word for word in re.findall(r"[\w][\w'-]*", question.lower()) if word not in _STOP_WORDS]
    return " ".join(list(dict.fromkeys(found))[:words])


# -- what each service answers ----------------------------------------------------------------------------------


def openalex_works(payload: Any) -> list[Work]:
    """Works of an OpenAlex /works answer: the abstract is rebuilt from its inverted index."""
    works = []
    for item in _results(payload, "results"):
        if not isinstance(item, dict):
            continue
        title = _text(item.get("title") or item.get("display_name"))
        if not title:
            continue
        authors = [
            _text(_field(authorship, "author", "display_name"))
            for authorship in _list(item.get("authorships"))
        ]
        doi = _text(item.get("doi"))
        pdf_url = (
            _text(_field(item, "best_oa_location", "pdf_url"))
            or _text(_field(item, "primary_location", "pdf_url"))
            or _text(_field(item, "open_access", "oa_url"))  # often a landing page: kept only if it is a PDF
        )
        works.append(
            Work(
                title,
                abstract_from_inverted_index(item.get("abstract_inverted_index")),
                _text(item.get("publication_year")),
                _authors(authors),
                _first_allowed(doi, _text(item.get("id"))),
                pdf_url or None,
            )
        )
    return works


def abstract_from_inverted_index(index: Any) -> str:
    """OpenAlex stores an abstract as {word: [positions]}; this puts the words back in order."""
    if not isinstance(index, dict):
        return ""
    placed: dict[int, str] = {}
    for word, positions in index.items():
        for position in _list(positions):
            if isinstance(position, int) and 0 <= position < 100_000:
                placed[position] = str(word)
    return " ".join(placed[position] for position in sorted(placed))


def semantic_scholar_works(payload: Any) -> list[Work]:
    """Works of a Semantic Scholar /graph/v1/paper/search answer."""
    works = []
    for item in _results(payload, "data", required=False):  # a search that found nothing has no "data"
        if not isinstance(item, dict) or not _text(item.get("title")):
            continue
        ids = item.get("externalIds") if isinstance(item.get("externalIds"), dict) else {}
        doi = _text(ids.get("DOI"))
        works.append(
            Work(
                _text(item.get("title")),
                _text(item.get("abstract")),
                _text(item.get("year")),
                _authors([_text(_field(author, "name")) for author in _list(item.get("authors"))]),
                _first_allowed(f"https://doi.org/{doi}" if doi else "", _text(item.get("url"))),
                _text(_field(item, "openAccessPdf", "url")) or None,
            )
        )
    return works


def arxiv_works(feed: bytes) -> list[Work]:
    """Works of an arXiv API Atom feed (every arXiv paper has a PDF)."""
    root = ElementTree.fromstring(feed)
    if root.tag != f"{_ATOM}feed":
        raise ValueError(f"not an Atom feed: <{root.tag}>")
    works = []
    for entry in root.iter(f"{_ATOM}entry"):
        title = _atom_text(entry, "title")
        if not title:
            continue
        pdf_url = next(
            (
                link.get("href", "")
                for link in entry.iter(f"{_ATOM}link")
                if link.get("title") == "pdf" or link.get("type") == "application/pdf"
            ),
            "",
        )
        authors = [_atom_text(author, "name") for author in entry.iter(f"{_ATOM}author")]
        works.append(
            Work(
                title,
                _atom_text(entry, "summary"),
                _atom_text(entry, "published")[:4],
                _authors(authors),
                _first_allowed(_atom_text(entry, "id")),
                pdf_url or None,
            )
        )
    return works


def _results(payload: Any, key: str, required: bool = True) -> list[Any]:
    """The list of works in a JSON answer. Any other shape is not the API's answer (a proxy's, a captive
    portal's): it raises, so that it is neither used nor cached."""
    if isinstance(payload, dict) and isinstance(payload.get(key), list):
        return list(payload[key])
    if isinstance(payload, dict) and key not in payload and not required:
        return []
    raise ValueError(f"not a search answer: no list of {key!r}")


def _atom_text(element: ElementTree.Element, name: str) -> str:
    child = element.find(f"{_ATOM}{name}")
    return " ".join((child.text or "").split()) if child is not None else ""


def _text(value: Any) -> str:
    return (
        " ".join(str(value).split()) if isinstance(value, str | int) and not isinstance(value, bool) else ""
    )


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _field(value: Any, *path: str) -> Any:
    for name in path:
        value = value.get(name) if isinstance(value, dict) else None
    return value


def _authors(names: Sequence[str]) -> str:
    named = [name for name in names if name]
    return ", ".join(named[:3]) + (" et al." if len(named) > 3 else "")


def _first_allowed(*urls: str) -> str | None:
    """The first web address that is not on a peer-review site: shown as where the evidence came from."""
    return next(
        (url for url in urls if url.startswith(("http://", "https://")) and not is_blocked(url)), None
    )


# -- the disk cache -----------------------------------------------------------------------------------------------


def default_cache_folder() -> Path:
    return Path(user_cache_dir("margin", appauthor=False)) / "literature"


class DiskCache:
    """HTTP answers on disk, one file per URL (named by its hash). A file's modification time is when it was
    fetched (older than `max_age`: a miss), its access time when it was last used (when the folder outgrows
    `max_bytes`, the least recently used answers go). Disk errors are misses, never failures."""

    def __init__(
        self, folder: Path | None = None, max_bytes: int = CACHE_MAX_BYTES, max_age: float = CACHE_MAX_AGE
    ) -> None:
        self.folder = folder or default_cache_folder()
        self.max_bytes = max_bytes
        self.max_age = max_age

    def _path(self, url: str) -> Path:
        return self.folder / (hashlib.sha256(url.encode("utf-8")).hexdigest() + ".body")

    def get(self, url: str) -> bytes | None:
        path = self._path(url)
        try:
            fetched = path.stat().st_mtime
            if time.time() - fetched > self.max_age:
                return None
            body = path.read_bytes()
            os.utime(path, (time.time(), fetched))  # used now (pruned last), fetched when it was
        except OSError:
            return None
        return body

    def put(self, url: str, body: bytes) -> None:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            # Written beside, then renamed: a reader at the same moment sees the old answer or the new, never half.
            handle, temporary = tempfile.mkstemp(dir=self.folder, suffix=".part")
            with os.fdopen(handle, "wb") as file:
                file.write(body)
            os.replace(temporary, self._path(url))
            self._prune()
        except OSError as error:
            log.debug("cannot cache %s: %s", url, error)

    def _prune(self) -> None:
        entries = []
        for entry in os.scandir(self.folder):
            if entry.name.endswith(".body"):
                with contextlib.suppress(OSError):  # removed by another process meanwhile
                    stat = entry.stat()
                    entries.append((stat.st_atime, stat.st_size, entry.path))
        total = sum(size for _, size, _ in entries)
        for _, size, path in sorted(entries):
            if total <= self.max_bytes:
                break
            with contextlib.suppress(OSError):
                os.remove(path)
            total -= size


# -- the search ---------------------------------------------------------------------------------------------------


@dataclass
class ScholarlySearch:
    """Search one scholarly service for a question; the works' abstracts and open-access PDFs as passages."""

    service: str = OPENALEX
    base_url: str = ""  # empty: the service's public API
    mailto: str = ""  # OpenAlex's polite pool, and the User-Agent
    works: int = 5  # works asked for per question
    pdfs: int = 2  # open-access PDFs read per question (the first found)
    timeout: float = 15.0  # seconds for one request, a whole download included
    blocked: tuple[str, ...] = BLOCKED_DOMAINS
    cache: DiskCache = field(default_factory=DiskCache)

    def __post_init__(self) -> None:
        if self.service not in SERVICES:
            raise ValueError(
                f"unknown scholarly search service {self.service!r} (known: {', '.join(SERVICES)})"
            )

    @property
    def root(self) -> str:
        return (self.base_url or PUBLIC_URLS[self.service]).rstrip("/")

    def search_url(self, question: str) -> str:
        terms = search_terms(question)
        if self.service == OPENALEX:
            parameters = {"search": terms, "per-page": self.works, "select": _OPENALEX_FIELDS}
            if self.mailto:
                parameters["mailto"] = self.mailto
            return f"{self.root}/works?{urlencode(parameters)}"
        if self.service == SEMANTIC_SCHOLAR:
            parameters = {"query": terms, "limit": self.works, "fields": _SEMANTIC_SCHOLAR_FIELDS}
            return f"{self.root}/graph/v1/paper/search?{urlencode(parameters)}"
        # Any of the words, ranked by relevance: a whole question's words are rarely all in one abstract.
        query = " OR ".join(f"all:{word}" for word in terms.split())
        parameters = {"search_query": query, "start": 0, "max_results": self.works, "sortBy": "relevance"}
        return f"{self.root}/api/query?{urlencode(parameters)}"

    async def search(self, question: str) -> list[Passage]:
        """Passages of the works found: each abstract, then the text of the first open-access PDFs. Never raises
        for the network's, the service's or a setting's sake: a failed search is one log line and no passages,
        a failed PDF one log line and that PDF's passages missing."""
        if not search_terms(question):
            return []
        try:
            return await self._search(question)
        # network, HTTP status, timeout, a body that is not the API's answer, a mail address httpx cannot send
        except Exception as error:
            log.warning("scholarly search (%s) failed for %r: %s", self.service, question, error)
            return []

    async def _search(self, question: str) -> list[Passage]:
        agent = "margin (scientific manuscript review)" + (f"; mailto:{self.mailto}" if self.mailto else "")
        async with httpx.AsyncClient(timeout=self.timeout, headers={"User-Agent": agent}) as client:
            url = self.search_url(question)
            body, fresh = await self._get(client, url, MAX_ANSWER_BYTES)
            works = self._parse(body)
            if fresh:
                await self._keep(url, body)
            passages = [work.passage() for work in works]
            with_pdf = [work for work in works if work.pdf_url][: self.pdfs]
            for pages in await asyncio.gather(*(self._pdf_passages(client, work) for work in with_pdf)):
                passages.extend(pages)
        return passages

    def _parse(self, body: bytes) -> list[Work]:
        if self.service == ARXIV:
            return arxiv_works(body)[: self.works]
        parse = openalex_works if self.service == OPENALEX else semantic_scholar_works
        return parse(json.loads(body))[: self.works]

    async def _pdf_passages(self, client: httpx.AsyncClient, work: Work) -> list[Passage]:
        url = work.pdf_url or ""
        try:
            body, fresh = await self._get(client, url, MAX_PDF_BYTES)
            if not body.startswith(b"%PDF"):  # an "open-access URL" is often the landing page
                raise FetchError(f"{url} is not a PDF")
            title, text = await asyncio.to_thread(pdf_text, body, MAX_PDF_PAGES)
        except Exception as error:  # the network's, the server's or pypdf's many kinds: this PDF is skipped
            log.warning("cannot read the open-access PDF %s: %s", url, error)
            return []
        if fresh:
            await self._keep(url, body)
        return text_passages(text, work.title or title or url, url, url)

    async def _get(self, client: httpx.AsyncClient, url: str, limit: int) -> tuple[bytes, bool]:
        """The body at the URL and whether it is fresh (else it came from the cache); only http(s), never a
        blocked site, at most `limit` bytes, within the timeout in all (a server that trickles a body does not
        hold a review up)."""
        cached = await asyncio.to_thread(self.cache.get, url)
        if cached is not None:
            return cached, False
        async with asyncio.timeout(self.timeout):
            return await self._download(client, url, limit), True

    async def _keep(self, url: str, body: bytes) -> None:
        """Cache a body once it proved usable: an error page served with status 200 is not kept for a month."""
        await asyncio.to_thread(self.cache.put, url, body)

    async def _download(self, client: httpx.AsyncClient, url: str, limit: int) -> bytes:
        for _ in range(MAX_REDIRECTS + 1):
            self._check(url)
            async with client.stream("GET", url) as response:
                if response.is_redirect and "location" in response.headers:
                    url = urljoin(url, response.headers["location"])  # checked before it is followed
                    continue
                response.raise_for_status()
                return await _read_bounded(response, limit)
        raise FetchError(f"more than {MAX_REDIRECTS} redirects")

    def _check(self, url: str) -> None:
        if urlsplit(url).scheme not in ("http", "https"):
            raise FetchError(f"{url!r} is not an http(s) URL")
        if is_blocked(url, self.blocked):
            raise FetchError(f"{url} is on a peer-review site, which is never read")


async def _read_bounded(response: httpx.Response, limit: int) -> bytes:
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise FetchError(f"{response.url} is {int(declared)} bytes, more than {limit}")
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > limit:
            raise FetchError(f"{response.url} is more than {limit} bytes")
    return bytes(body)


def scholarly_search(service: str, base_url: str = "", mailto: str = "") -> ScholarlySearch | None:
    """The search the user opted in to (the review.scholarlySearch setting), or None for "off"."""
    if service not in SERVICES:
        return None
    return ScholarlySearch(service, base_url.strip(), mailto.strip())
