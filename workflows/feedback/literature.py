"""The literature the investigator may read: the user's own PDFs, the .bib entries a paragraph cites, and an
optional web search (off by default; peer-review sites are never used, as in the SWIF2T paper)."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import bibtexparser
import httpx
import yaml
from pypdf import PdfReader

from margin.workflows.manuscript.latex.macros import snippet_text
from margin.workflows.manuscript.model import Manuscript, Paragraph

from .retrieval import PASSAGE_CHARACTERS, PassageIndex, _passage_id
from .types import Passage, Source

log = logging.getLogger("margin.feedback.literature")

# Reviews of a new paper do not exist yet: reading them would be cheating, so these sites are never used.
BLOCKED_DOMAINS = ("openreview.net", "peerj.com", "f1000research.com", "publons.com", "reviewercredits.com")
_LATEX_CITE = re.compile(r"\\[A-Za-z]*cite[A-Za-z]*\*?(?:\s*\[[^\]]*\]){0,2}\s*\{([^}]*)\}")
_PANDOC_CITE = re.compile(r"(?<![\w.])-?@([A-Za-z0-9_](?:[\w:.#$%&+?<>~/-]*\w)?)")
_BIB_REFERENCE = re.compile(r"\\(?:bibliography|addbibresource)\s*(?:\[[^\]]*\])?\s*\{([^}]*)\}")
_MAX_PDF_PAGES = 200


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
    text: str  # what the investigator reads: title, authors, year, venue, abstract, notes


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
            parts = [
                title,
                _plain_bib(fields.get("author", "")),
                fields.get("year", ""),
                _plain_bib(fields.get("journal", "") or fields.get("booktitle", "")),
                _plain_bib(fields.get("abstract", "")),
                _plain_bib(fields.get("note", "") or fields.get("annote", "")),
            ]
            text = ". ".join(part for part in parts if part)
            entries[entry.key] = BibEntry(entry.key, title, text)
    return entries


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
                reader = PdfReader(pdf)
                pages = [page.extract_text() or "" for page in reader.pages[:_MAX_PDF_PAGES]]
                metadata = reader.metadata
                title = str(metadata.title) if metadata is not None and metadata.title else pdf.stem
            except (
                Exception
            ) as error:  # pypdf raises many kinds on damaged files; one bad PDF must not stop a review
                log.warning("cannot read %s: %s", pdf, error)
                continue
            text = re.sub(r"\s+", " ", " ".join(pages)).strip()
            for start in range(0, len(text), size):
                piece = text[start : start + size]
                if piece.strip():
                    passages.append(
                        Passage(
                            _passage_id(str(pdf), str(start)),
                            piece,
                            Source.LITERATURE,
                            str(title),
                            pdf.resolve().as_uri(),
                        )
                    )
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
            host = (urlsplit(url).hostname or "").lower()
            if any(host == domain or host.endswith("." + domain) for domain in self.blocked):
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
    library: PassageIndex | None = None
    web: WebSearch | None = None

    @classmethod
    async def gather(
        cls, manuscript: Manuscript, folders: Sequence[Path] = (), web: WebSearch | None = None
    ) -> Literature:
        bibliography = await asyncio.to_thread(read_bibliography, bibliography_files(manuscript))
        library = None
        if folders:
            passages = await asyncio.to_thread(pdf_passages, folders)
            library = PassageIndex(passages) if passages else None
        return cls(bibliography, library, web)

    def available_for(self, paragraph: Paragraph) -> bool:
        """Whether a literature question about this paragraph can be answered from anything at all."""
        if self.library is not None or self.web is not None:
            return True
        return any(key in self.bibliography for key in cited_keys(paragraph))

    async def search(self, question: str, paragraph: Paragraph, k: int = 5) -> list[Passage]:
        """Cited works first (their bibliography entries), then the user's PDFs, then the web."""
        found: list[Passage] = []
        for key in cited_keys(paragraph):
            entry = self.bibliography.get(key)
            if entry is not None:
                found.append(
                    Passage(_passage_id("bib", key), entry.text, Source.LITERATURE, entry.title or key)
                )
        if self.library is not None:
            found.extend(self.library.search(question, k))
        if self.web is not None and len(found) < k:
            found.extend(await self.web.search(question))
        return found[:k]
