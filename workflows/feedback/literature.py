"""The literature the investigator may read: the .bib entries a paragraph cites, the user's own PDFs (and .bib
reference lists), and, only when the user opts in, a web search and a scholarly search (scholarly.py). Every
literature question ranks all of it with BM25 and reads the top 5 passages, as the SWIF2T paper's investigator
does; peer-review sites are never used, as in the paper."""

from __future__ import annotations

import asyncio
import io
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import bibtexparser
import httpx
import yaml
from pypdf import PdfReader

from margin.workflows.manuscript.latex.macros import snippet_text
from margin.workflows.manuscript.model import Manuscript, Paragraph

from .retrieval import PASSAGE_CHARACTERS, PassageIndex, _passage_id
from .types import Passage, Source

if TYPE_CHECKING:
    from .scholarly import ScholarlySearch

log = logging.getLogger("margin.feedback.literature")

# Reviews of a new paper do not exist yet: reading them would be cheating, so these sites are never used.
BLOCKED_DOMAINS = ("openreview.net", "peerj.com", "f1000research.com", "publons.com", "reviewercredits.com")
# Library passages (PDFs, given .bib files) that go on to be ranked with the cited works and what was found
# online: BM25 over the whole library picks them, BM25 over the pool orders them all on one scale.
_LIBRARY_POOL = 50
_LATEX_CITE = re.compile(r"\\[A-Za-z]*cite[A-Za-z]*\*?(?:\s*\[[^\]]*\]){0,2}\s*\{([^}]*)\}")
_PANDOC_CITE = re.compile(r"(?<![\w.])-?@([A-Za-z0-9_](?:[\w:.#$%&+?<>~/-]*\w)?)")
_BIB_REFERENCE = re.compile(r"\\(?:bibliography|addbibresource)\s*(?:\[[^\]]*\])?\s*\{([^}]*)\}")
_MAX_PDF_PAGES = 200


def is_blocked(url: str, domains: Sequence[str] = BLOCKED_DOMAINS) -> bool:
    """Whether the URL is on one of the domains (or a subdomain of one); host names are case-insensitive."""
    host = (urlsplit(url).hostname or "").lower().rstrip(".")
    return any(host == domain or host.endswith("." + domain) for domain in domains)


def cited_keys(paragraph: Paragraph) -> list[str]:
    """Citation keys in the paragraph's source (LaTeX \\cite variants or pandoc @keys), in order, once each."""
    start, end = paragraph.source_span
    text = paragraph.source.text[start:end]
    keys: list[str] = []
    for match in _LATEX_CITE.finditer(text):
        keys.extend(key.strip() for key in match.group(1).split(",") if key.strip())
    for match in _PANDOC_CITE.finditer(text):
        if ":" not in match.group(1) or not re.match(r"(?i)(fig|tbl|eq|sec|lst):", match.group(1)):
            keys.append(match.group(1))
    return list(dict.fromkeys(keys))


def bibliography_files(manuscript: Manuscript) -> list[Path]:
    """The .bib files a manuscript names (\\bibliography, \\addbibresource, front matter), else those beside it."""
    found: list[Path] = []
    for source in manuscript.files:
        path = source.path
        if path is None:
            continue
        names: list[str] = []
        for match in _BIB_REFERENCE.finditer(source.text):
            names.extend(name.strip() for name in match.group(1).split(","))
        names.extend(_front_matter_bibliographies(source.text))
        for name in names:
            if not name:
                continue
            candidate = (path.parent / name).resolve()
            for option in (candidate, candidate.with_name(candidate.name + ".bib")):
                if option.suffix == ".bib" and option.is_file() and option not in found:
                    found.append(option)
    if not found and manuscript.files and manuscript.files[0].path is not None:
        found = sorted(manuscript.files[0].path.parent.glob("*.bib"))
    return found


def _front_matter_bibliographies(text: str) -> list[str]:
    """The `bibliography` of YAML front matter: one name or a list of them."""
    match = re.match(r"---[ \t]*\r?\n(.*?\r?\n)(?:---|\.\.\.)[ \t]*(?:\r?\n|$)", text, re.S)
    if match is None:
        return []
    try:
        metadata = yaml.safe_load(match.group(1))
    except yaml.YAMLError:
        return []
    value = metadata.get("bibliography") if isinstance(metadata, dict) else None
    if isinstance(value, str):
        return [value]
    return [str(item) for item in value] if isinstance(value, list) else []


@dataclass(frozen=True, slots=True)
class BibEntry:
    key: str
    title: str
    text: str  # what the investigator reads: title, authors, year, venue, keywords, abstract, notes
    uri: str | None = None  # the DOI or URL, where the evidence can be looked up

    def passage(self) -> Passage:
        return Passage(
            _passage_id("bib", self.key), self.text, Source.LITERATURE, self.title or self.key, self.uri
        )


def read_bibliography(paths: Iterable[Path]) -> dict[str, BibEntry]:
    entries: dict[str, BibEntry] = {}
    for path in paths:
        try:
            library = bibtexparser.parse_string(path.read_text(encoding="utf-8", errors="replace"))
        except Exception as error:  # a broken .bib is the user's to fix; review the paper anyway
            log.warning("cannot read %s: %s", path, error)
            continue
        for entry in library.entries:
            fields = {field.key.lower(): str(field.value) for field in entry.fields}
            title = _plain_bib(fields.get("title", ""))
            keywords = _plain_bib(fields.get("keywords", ""))
            # The title, keywords and abstract carry what a question asks about; authors and year are there
            # for questions that name a work ("Okafor et al. 2021"). BM25 reads the title twice (as the
            # passage's title and in its text), which weighs it above the rest.
            parts = [
                title,
                _plain_bib(fields.get("author", "")),
                fields.get("year", ""),
                _plain_bib(fields.get("journal", "") or fields.get("booktitle", "")),
                f"Keywords: {keywords}" if keywords else "",
                _plain_bib(fields.get("abstract", "")),
                _plain_bib(fields.get("note", "") or fields.get("annote", "")),
            ]
            text = ". ".join(part for part in parts if part)
            entries[entry.key] = BibEntry(entry.key, title, text, _bib_link(fields))
    return entries


def _bib_link(fields: dict[str, str]) -> str | None:
    doi = fields.get("doi", "").strip()
    if doi:
        return doi if doi.startswith("http") else f"https://doi.org/{doi.removeprefix('doi:')}"
    url = fields.get("url", "").strip()
    return url if url.startswith(("http://", "https://")) else None


def _plain_bib(value: str) -> str:
    """BibTeX field text as plain text, accents applied (G{\\"o}del is Gödel)."""
    plain = snippet_text(value) if "\\" in value else value.replace("{", "").replace("}", "")
    return re.sub(r"\s+", " ", plain).strip()


def pdf_passages(folders: Sequence[Path], size: int = PASSAGE_CHARACTERS) -> list[Passage]:
    """Text of the PDFs in the folders (recursively), cut into passages; unreadable files are skipped."""
    passages: list[Passage] = []
    for folder in folders:
        for pdf in sorted(folder.rglob("*.pdf")) if folder.is_dir() else []:
            try:
                title, text = pdf_text(pdf)
            # pypdf raises many kinds of errors on damaged files; one bad PDF must not stop a review
            except Exception as error:
                log.warning("cannot read %s: %s", pdf, error)
                continue
            passages.extend(text_passages(text, title or pdf.stem, pdf.resolve().as_uri(), str(pdf), size))
    return passages


def pdf_text(pdf: Path | bytes, max_pages: int = _MAX_PDF_PAGES) -> tuple[str | None, str]:
    """The title in a PDF's metadata (None without one) and the text of its first pages, spaces collapsed.

    pypdf raises many kinds of errors on damaged files: the caller decides what a bad file costs."""
    reader = PdfReader(pdf if isinstance(pdf, Path) else io.BytesIO(pdf))
    pages = [page.extract_text() or "" for page in reader.pages[:max_pages]]
    metadata = reader.metadata
    title = str(metadata.title).strip() if metadata is not None and metadata.title else None
    return title or None, re.sub(r"\s+", " ", " ".join(pages)).strip()


def text_passages(text: str, title: str, uri: str, key: str, size: int = PASSAGE_CHARACTERS) -> list[Passage]:
    """A document's text cut into passages of `size` characters, each with a stable id from `key`."""
    passages = []
    for start in range(0, len(text), size):
        piece = text[start : start + size]
        if piece.strip():
            passages.append(Passage(_passage_id(key, str(start)), piece, Source.LITERATURE, title, uri))
    return passages


@dataclass
class WebSearch:
    """A SearxNG-style JSON search endpoint (GET url?q=...&format=json), used only when configured."""

    url: str
    timeout: float = 10.0
    results: int = 5
    blocked: tuple[str, ...] = BLOCKED_DOMAINS

    async def search(self, query: str) -> list[Passage]:
        try:
            async with httpx.AsyncClient(timeout=self.timeout) as client:
                response = await client.get(self.url, params={"q": query, "format": "json"})
                response.raise_for_status()
                payload = response.json()
        except (httpx.HTTPError, ValueError) as error:
            log.info("web search failed for %r: %s", query, error)
            return []
        items = payload.get("results") if isinstance(payload, dict) else None
        if not isinstance(items, list):
            return []
        passages = []
        for item in items:
            if not isinstance(item, dict):
                continue
            url = str(item.get("url", ""))
            if is_blocked(url, self.blocked):
                continue
            text = " ".join(str(item.get(key, "")) for key in ("title", "content")).strip()
            if text:
                passages.append(
                    Passage(
                        _passage_id(url, text[:64]), text, Source.LITERATURE, str(item.get("title", "")), url
                    )
                )
            if len(passages) == self.results:
                break
        return passages


@dataclass
class Literature:
    """Everything the investigator may read about the literature for one manuscript."""

    bibliography: dict[str, BibEntry] = field(default_factory=dict)
    # The user's PDFs, and the entries of .bib files given for every paragraph: BM25 over all of them.
    library: PassageIndex | None = None
    web: WebSearch | None = None
    scholarly: ScholarlySearch | None = None

    @classmethod
    async def gather(
        cls,
        manuscript: Manuscript,
        folders: Sequence[Path] = (),
        web: WebSearch | None = None,
        *,
        scholarly: ScholarlySearch | None = None,
        bib_files: Sequence[Path] = (),
    ) -> Literature:
        """The literature of a manuscript: the .bib files it names, the PDFs in `folders`, the entries of
        `bib_files` (a reference list given beside the text, as an evaluation example's: read for every
        paragraph, cited or not), and the online searches the user opted in to (None: not searched)."""
        named = await asyncio.to_thread(read_bibliography, bibliography_files(manuscript))
        given = await asyncio.to_thread(read_bibliography, bib_files)
        passages = [entry.passage() for entry in given.values()]
        if folders:
            passages.extend(await asyncio.to_thread(pdf_passages, folders))
        library = await asyncio.to_thread(PassageIndex, passages) if passages else None
        return cls({**named, **given}, library, web, scholarly)

    def available_for(self, paragraph: Paragraph) -> bool:
        """Whether a literature question about this paragraph can be answered from anything at all."""
        if self.library is not None or self.web is not None or self.scholarly is not None:
            return True
        return any(key in self.bibliography for key in cited_keys(paragraph))

    def cited(self, paragraph: Paragraph) -> list[Passage]:
        """The bibliography entries of the works the paragraph cites, in citation order."""
        entries = (self.bibliography.get(key) for key in cited_keys(paragraph))
        return [entry.passage() for entry in entries if entry is not None]

    async def search(self, question: str, paragraph: Paragraph, k: int = 5) -> list[Passage]:
        """The k passages that best answer the question: the cited works, the library and what the online
        searches found, ranked together by BM25. Places left (no word in common with the question) go to
        the paragraph's other cited works, which are what it is about, then to the online results."""
        cited = self.cited(paragraph)
        library = self.library.search(question, _LIBRARY_POOL) if self.library is not None else []
        online = await self._search_online(question)
        ranked = rank_passages(question, [*cited, *library, *online], k)
        return _fill(ranked, [*cited, *online], k)

    async def _search_online(self, question: str) -> list[Passage]:
        """What the opted-in searches found (each answers [] on any failure; both run at once)."""
        searches = [search.search(question) for search in (self.web, self.scholarly) if search is not None]
        found = await asyncio.gather(*searches)
        return [passage for passages in found for passage in passages]


def rank_passages(question: str, passages: Sequence[Passage], k: int) -> list[Passage]:
    """The k passages most relevant to the question by BM25 over this pool (passages with no word of the
    question in common are left out); a passage found twice counts once."""
    unique = list({passage.id: passage for passage in passages}.values())
    if not unique:
        return []
    return PassageIndex(unique).search(question, k)


def _fill(ranked: list[Passage], fallback: Sequence[Passage], k: int) -> list[Passage]:
    chosen = list(ranked)
    seen = {passage.id for passage in chosen}
    for passage in fallback:
        if len(chosen) >= k:
            break
        if passage.id not in seen:
            chosen.append(passage)
            seen.add(passage.id)
    return chosen[:k]
