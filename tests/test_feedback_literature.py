"""What the investigator may read about the literature: the keys a paragraph cites, the manuscript's .bib files,
PDFs in the user's folders, and a SearxNG-style web search (a real HTTP server on loopback) that never uses
peer-review sites."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from margin.workflows.feedback.literature import (
    BLOCKED_DOMAINS,
    Literature,
    WebSearch,
    bibliography_files,
    cited_keys,
    pdf_passages,
    read_bibliography,
)
from margin.workflows.feedback.types import Source
from margin.workflows.manuscript.model import Paragraph

from conftest import (
    FIXTURES,
    PAPER_MAIN,
    SearchServer,
    load_manuscript,
    minimal_pdf,
    only,
    paragraph_starting,
    parse_latex,
    parse_markdown,
)

LATEX_BIB = FIXTURES / "latex" / "paper" / "references.bib"


def latex_paragraph(body: str) -> Paragraph:
    return only(parse_latex("\\documentclass{article}\n\\begin{document}\n" + body + "\n\\end{document}\n"))


def markdown_paragraph(body: str) -> Paragraph:
    return only(parse_markdown(body + "\n"))


# -- cited keys --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "keys"),
    [
        ("Screening is slow~\\cite{moreau2020trials}.", ["moreau2020trials"]),
        ("Few tools are used \\citep[see][p.~3]{a,b}.", ["a", "b"]),
        ("Few tools are used \\citep[p.~3]{petrov2018eval}.", ["petrov2018eval"]),
        ("As \\textcite{lee2021} and \\citet*{smith2020} show.", ["lee2021", "smith2020"]),
        (
            "As \\citeauthor{okafor2021sparse} report \\parencite{okafor2021sparse, chen2021lexical}.",
            ["okafor2021sparse", "chen2021lexical"],
        ),
        ("Several works~\\cite{ x , y,z } and again \\cite{x}.", ["x", "y", "z"]),
        ("A multi-line \\cite{first,\n  second} citation.", ["first", "second"]),
        ("No citation here, only math $a@b$ and \\ref{sec:x}.", []),
    ],
)
def test_cited_keys_of_latex_citations(body: str, keys: list[str]) -> None:
    assert cited_keys(latex_paragraph(body)) == keys


@pytest.mark.parametrize(
    ("body", "keys"),
    [
        ("As shown [@smith2020; @doe-2019a], see also @jones21.", ["smith2020", "doe-2019a", "jones21"]),
        ("Runs are slow [@brandt2018, p. 4] as -@garcia2019 says.", ["brandt2018", "garcia2019"]),
        ("See @fig:map, @tbl:main, @eq:loss and @sec:intro for @lee2021.", ["lee2021"]),
        ("Write to ribeiro@example.org about it.", []),
        ("A key at the end of a sentence: @smith2020.", ["smith2020"]),
        ("Keys with punctuation [@Doe:2020:x; @a_b.c].", ["Doe:2020:x", "a_b.c"]),
    ],
)
def test_cited_keys_of_pandoc_citations(body: str, keys: list[str]) -> None:
    assert cited_keys(markdown_paragraph(body)) == keys


def test_cited_keys_of_one_character_pandoc_keys() -> None:
    assert cited_keys(markdown_paragraph("As shown [@a; @b] and @c, not @fig:x.")) == ["a", "b", "c"]


def test_cited_keys_of_the_fixture_paper() -> None:
    paper = load_manuscript(PAPER_MAIN)
    first = paragraph_starting(paper, "A systematic review is only as reliable")
    assert cited_keys(first) == ["moreau2020trials", "petrov2018eval"]
    second = paragraph_starting(paper, "Ranking models offer a natural framing")
    assert cited_keys(second) == [
        "lindqvist2019bm25",
        "haddad2022dense",
        "chen2021lexical",
        "okafor2021sparse",
    ]


def test_cited_keys_of_the_pandoc_fixture() -> None:
    paper = load_manuscript(FIXTURES / "markdown" / "paper.md")
    opening = paragraph_starting(paper, "Regional groundwater models sit at the centre")
    assert cited_keys(opening) == ["brandt2018", "garcia2019"]
    surrogates = paragraph_starting(paper, "Machine-learned surrogates promise")
    assert cited_keys(surrogates) == ["smith2020", "lee2021"]


# -- bibliography files ------------------------------------------------------------------------------------------


def test_the_fixture_paper_names_its_references_bib() -> None:
    assert bibliography_files(load_manuscript(PAPER_MAIN)) == [LATEX_BIB.resolve()]


def test_the_pandoc_fixture_names_its_bibliography_in_front_matter() -> None:
    found = bibliography_files(load_manuscript(FIXTURES / "markdown" / "paper.md"))
    assert found == [(FIXTURES / "markdown" / "references.bib").resolve()]


def write_bibs(folder: Path, *names: str) -> None:
    for name in names:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(f"@article{{{Path(name).stem}, title = {{{name}}}}}\n", encoding="utf-8")


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("\\bibliography{refs}", ["refs.bib"]),
        ("\\bibliography{refs.bib}", ["refs.bib"]),
        ("\\bibliography{refs, bib/more}", ["refs.bib", "bib/more.bib"]),
        ("\\addbibresource{bib/more.bib}", ["bib/more.bib"]),
        ("\\addbibresource[location=local]{refs.bib}", ["refs.bib"]),
    ],
)
def test_latex_bibliography_commands(tmp_path: Path, command: str, expected: list[str]) -> None:
    write_bibs(tmp_path, "refs.bib", "bib/more.bib", "unused.bib")
    main = tmp_path / "main.tex"
    main.write_text(
        f"\\documentclass{{article}}\n\\begin{{document}}\nText.\n{command}\n\\end{{document}}\n",
        encoding="utf-8",
    )
    found = bibliography_files(load_manuscript(main))
    assert found == [(tmp_path / name).resolve() for name in expected]


@pytest.mark.parametrize(
    ("front_matter", "expected"),
    [
        ("bibliography: refs.bib", ["refs.bib"]),
        ('bibliography: "refs.bib"', ["refs.bib"]),
        ("bibliography: [refs.bib, more.bib]", ["refs.bib", "more.bib"]),
    ],
)
def test_front_matter_bibliography(tmp_path: Path, front_matter: str, expected: list[str]) -> None:
    write_bibs(tmp_path, "refs.bib", "more.bib", "unused.bib")
    paper = tmp_path / "paper.md"
    paper.write_text(f"---\ntitle: T\n{front_matter}\n---\n\nSome text [@refs].\n", encoding="utf-8")
    assert bibliography_files(load_manuscript(paper)) == [(tmp_path / name).resolve() for name in expected]


def test_front_matter_bibliography_as_a_yaml_block_list(tmp_path: Path) -> None:
    write_bibs(tmp_path, "refs.bib", "more.bib", "unrelated.bib")
    paper = tmp_path / "paper.md"
    paper.write_text(
        "---\ntitle: T\nbibliography:\n  - refs.bib\n  - more.bib\n---\n\nSome text [@more].\n",
        encoding="utf-8",
    )
    found = bibliography_files(load_manuscript(paper))
    assert sorted(found) == sorted([(tmp_path / "refs.bib").resolve(), (tmp_path / "more.bib").resolve()])


def test_without_a_named_bibliography_the_bib_files_beside_the_manuscript_are_used(tmp_path: Path) -> None:
    write_bibs(tmp_path, "b.bib", "a.bib")
    main = tmp_path / "main.tex"
    main.write_text("\\documentclass{article}\n\\begin{document}\nText.\n\\end{document}\n", encoding="utf-8")
    assert bibliography_files(load_manuscript(main)) == [tmp_path / "a.bib", tmp_path / "b.bib"]


def test_a_named_bibliography_that_does_not_exist_falls_back_to_the_folder(tmp_path: Path) -> None:
    write_bibs(tmp_path, "present.bib")
    main = tmp_path / "main.tex"
    main.write_text(
        "\\documentclass{article}\n\\begin{document}\nText.\n\\bibliography{missing}\n\\end{document}\n",
        encoding="utf-8",
    )
    assert bibliography_files(load_manuscript(main)) == [tmp_path / "present.bib"]


# -- reading .bib files ------------------------------------------------------------------------------------------


def test_read_bibliography_of_the_fixture() -> None:
    entries = read_bibliography([LATEX_BIB])
    assert list(entries) == [
        "moreau2020trials",
        "petrov2018eval",
        "lindqvist2019bm25",
        "haddad2022dense",
        "chen2021lexical",
        "okafor2021sparse",
        "tanaka2023distill",
        "goedel2020annot",
    ]
    okafor = entries["okafor2021sparse"]
    assert okafor.key == "okafor2021sparse"
    assert okafor.title == "Learned Sparse Representations at the Cost of BM25"  # braces gone
    assert okafor.text.startswith("Learned Sparse Representations at the Cost of BM25. Okafor, Nnamdi")
    assert "2021" in okafor.text and "Proceedings of the Symposium on Neural Retrieval" in okafor.text
    assert "Version 1.2" in entries["goedel2020annot"].text  # the note
    assert "{" not in "".join(entry.text for entry in entries.values())
    assert "\\" not in "".join(entry.text for entry in entries.values())


def test_read_bibliography_includes_abstracts(tmp_path: Path) -> None:
    bib = tmp_path / "refs.bib"
    bib.write_text(
        "@inproceedings{k1,\n  title = {Sparse {SPLADE} Indexes},\n  author = {Doe, Jane},\n  year = {2022},\n"
        "  booktitle = {Proc. of \\emph{SIGIR}},\n  abstract = {We prune   posting\n lists by section.},\n}\n",
        encoding="utf-8",
    )
    entry = read_bibliography([bib])["k1"]
    assert (
        entry.text
        == "Sparse SPLADE Indexes. Doe, Jane. 2022. Proc. of SIGIR. We prune posting lists by section."
    )


def test_read_bibliography_keeps_accented_names() -> None:
    entries = read_bibliography([LATEX_BIB])
    assert "Müller, Jan" in entries["okafor2021sparse"].text
    assert "Gödel, Hanna and Gonçalves, Rui" in entries["goedel2020annot"].text


def test_a_broken_or_missing_bib_file_is_skipped(tmp_path: Path) -> None:
    broken = tmp_path / "broken.bib"
    broken.write_bytes(b"\xff\xfe@article{oops, title = {unclosed\n\x00\x00")
    entries = read_bibliography([broken, tmp_path / "missing.bib", LATEX_BIB])
    assert "okafor2021sparse" in entries


# -- PDFs --------------------------------------------------------------------------------------------------------


PDF_LINES = ["Section budgets keep rare dosage terms in the index.", "Recall improves by 6.8 points."]


def test_pdf_passages_extract_the_text_of_a_pdf(tmp_path: Path) -> None:
    (tmp_path / "library" / "nested").mkdir(parents=True)
    (tmp_path / "library" / "nested" / "zhou2021.pdf").write_bytes(minimal_pdf(PDF_LINES))
    (passage,) = pdf_passages([tmp_path / "library"])
    assert "Section budgets keep rare dosage terms in the index." in passage.text
    assert "Recall improves by 6.8 points." in passage.text
    assert passage.source is Source.LITERATURE
    assert passage.title == "zhou2021"
    assert passage.uri == (tmp_path / "library" / "nested" / "zhou2021.pdf").as_uri()


def test_pdf_passages_use_the_pdf_title_and_cut_long_text(tmp_path: Path) -> None:
    lines = [f"Line {n} says that section budgets keep rare dosage terms." for n in range(60)]
    (tmp_path / "paper.pdf").write_bytes(minimal_pdf(lines, title="Pruning by Section"))
    passages = pdf_passages([tmp_path], size=500)
    assert len(passages) > 1
    assert all(len(passage.text) <= 500 for passage in passages)
    assert {passage.title for passage in passages} == {"Pruning by Section"}
    assert len({passage.id for passage in passages}) == len(passages)
    joined = "".join(passage.text for passage in passages)
    assert "Line 0 says" in joined and "Line 59 says" in joined


def corrupt_pdfs() -> dict[str, bytes]:
    good = minimal_pdf(PDF_LINES)
    return {
        "random": bytes(range(256)) * 4,
        "empty": b"",
        "header-only": b"%PDF-1.4\n garbage garbage",
        "truncated": good[: len(good) // 2],
        "not-a-pdf": b"hello world",
        "cyclic-pages": good.replace(b"/Kids [3 0 R]", b"/Kids [2 0 R]"),
        "kids-not-an-array": good.replace(b"/Kids [3 0 R]", b"/Kids 5"),
        "encrypted": good.replace(
            b"/Root 1 0 R",
            b"/Root 1 0 R /Encrypt << /Filter /Standard /V 1 /R 2 /O (x) /U (y) /P -4 >> /ID [(a) (b)]",
        ),
    }


@pytest.mark.parametrize("name", list(corrupt_pdfs()))
def test_a_corrupt_pdf_is_skipped_and_the_others_read(tmp_path: Path, name: str) -> None:
    (tmp_path / f"{name}.pdf").write_bytes(corrupt_pdfs()[name])
    (tmp_path / "good.pdf").write_bytes(minimal_pdf(PDF_LINES))
    passages = pdf_passages([tmp_path])
    assert [passage.title for passage in passages] == ["good"]


@pytest.mark.parametrize("info", [b"/Info [1 2]", b"/Info 5"])
def test_a_pdf_with_a_broken_info_dictionary_is_skipped_not_raised(tmp_path: Path, info: bytes) -> None:
    (tmp_path / "broken-info.pdf").write_bytes(
        minimal_pdf(PDF_LINES).replace(b"/Root 1 0 R", b"/Root 1 0 R " + info)
    )
    (tmp_path / "good.pdf").write_bytes(minimal_pdf(PDF_LINES))
    passages = pdf_passages([tmp_path])
    assert "good" in [passage.title for passage in passages]


def test_pdf_passages_of_a_relative_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "library").mkdir()
    (tmp_path / "library" / "zhou.pdf").write_bytes(minimal_pdf(PDF_LINES))
    monkeypatch.chdir(tmp_path)
    (passage,) = pdf_passages([Path("library")])
    assert passage.uri == (tmp_path / "library" / "zhou.pdf").as_uri()


def test_folders_that_do_not_exist_or_are_files_have_no_pdfs(tmp_path: Path) -> None:
    (tmp_path / "file.pdf").write_bytes(minimal_pdf(PDF_LINES))
    assert pdf_passages([tmp_path / "missing", tmp_path / "file.pdf"]) == []


# -- a SearxNG-style web search on loopback ----------------------------------------------------------------------


@pytest.fixture
def search_server() -> Iterator[SearchServer]:
    server = SearchServer()
    yield server
    server.stop()


def result(url: str, title: str, content: str) -> dict[str, str]:
    return {"url": url, "title": title, "content": content}


PEER_REVIEW_RESULTS = [
    result("https://openreview.net/forum?id=abc", "Reviews of SpaRe", "Reviewer 2: the pruning is naive."),
    result("https://sub.peerj.com/review/123", "PeerJ review", "The reviewer asks for more baselines."),
    result(
        "https://www.example.org/sparse-pruning",
        "Sparse pruning explained",
        "Budgets per section help recall.",
    ),
    result("https://OpenReview.net/pdf?id=abc", "Shouting host", "Also a review."),
]


async def test_web_search_never_uses_peer_review_sites(search_server: SearchServer) -> None:
    search_server.payload = {"results": PEER_REVIEW_RESULTS}
    passages = await WebSearch(search_server.url).search("section budgets sparse retrieval")

    assert [passage.uri for passage in passages] == ["https://www.example.org/sparse-pruning"]
    (passage,) = passages
    assert passage.text == "Sparse pruning explained Budgets per section help recall."
    assert passage.title == "Sparse pruning explained"
    assert passage.source is Source.LITERATURE
    assert search_server.queries == [{"q": ["section budgets sparse retrieval"], "format": ["json"]}]
    assert {"openreview.net", "peerj.com"} <= set(BLOCKED_DOMAINS)


async def test_web_search_keeps_at_most_its_number_of_results(search_server: SearchServer) -> None:
    search_server.payload = {
        "results": [result(f"https://site{n}.org/", f"Title {n}", f"Content {n}") for n in range(10)]
    }
    passages = await WebSearch(search_server.url, results=3).search("q")
    assert [passage.title for passage in passages] == ["Title 0", "Title 1", "Title 2"]


@pytest.mark.parametrize(
    ("status", "raw"),
    [
        (500, None),
        (404, None),
        (200, b"<html>not json</html>"),
        (200, b"[1, 2]"),
        (200, b'{"results": {"a": 1}}'),
    ],
    ids=["http-500", "http-404", "not-json", "a-list", "results-not-a-list"],
)
async def test_web_search_failures_are_no_results(
    search_server: SearchServer, status: int, raw: bytes | None
) -> None:
    search_server.status = status
    search_server.raw = raw
    assert await WebSearch(search_server.url).search("q") == []


async def test_web_search_with_null_results_is_no_results(search_server: SearchServer) -> None:
    search_server.raw = b'{"results": null}'
    assert await WebSearch(search_server.url).search("q") == []


async def test_a_dead_search_url_is_no_results(dead_url: str) -> None:
    assert await WebSearch(dead_url + "/search", timeout=2.0).search("q") == []
    assert await WebSearch("not-a-url", timeout=2.0).search("q") == []


# -- Literature: what a literature question reads ----------------------------------------------------------------


async def test_literature_gathers_the_bibliography_and_the_pdf_library(tmp_path: Path) -> None:
    library = tmp_path / "library"
    library.mkdir()
    (library / "zhou2021.pdf").write_bytes(minimal_pdf(PDF_LINES))
    paper = load_manuscript(PAPER_MAIN)
    literature = await Literature.gather(paper, [library])

    assert set(literature.bibliography) >= {"okafor2021sparse", "goedel2020annot"}
    assert literature.library is not None and len(literature.library.passages) == 1
    paragraph = paragraph_starting(paper, "Ranking models offer a natural framing")
    passages = await literature.search("Which rare dosage terms do section budgets keep?", paragraph, k=5)
    titles = [passage.title for passage in passages]
    assert titles == [
        "Strong Lexical Baselines for Technology-Assisted Review",
        "Dense Passage Encoders for Biomedical Screening",
        "Lexical Matching Still Matters: An Analysis of Learned Term Weights",
        "Learned Sparse Representations at the Cost of BM25",
        "zhou2021",
    ]
    assert all(passage.source is Source.LITERATURE for passage in passages)


async def test_literature_uses_the_web_only_when_cited_works_and_pdfs_are_too_few(
    search_server: SearchServer,
) -> None:
    search_server.payload = {"results": PEER_REVIEW_RESULTS}
    paper = load_manuscript(PAPER_MAIN)
    literature = await Literature.gather(paper, web=WebSearch(search_server.url))
    cites_four = paragraph_starting(paper, "Ranking models offer a natural framing")

    assert len(await literature.search("q", cites_four, k=4)) == 4
    assert search_server.queries == []
    passages = await literature.search("section budgets", cites_four, k=5)
    assert [passage.uri for passage in passages][-1] == "https://www.example.org/sparse-pruning"
    assert len(search_server.queries) == 1
    assert not any("review" in (passage.uri or "") for passage in passages)


async def test_literature_for_a_paragraph_citing_nothing_is_empty_without_a_library() -> None:
    paper = load_manuscript(PAPER_MAIN)
    literature = await Literature.gather(paper)
    uncited = paragraph_starting(paper, "Trial reports, however, are not open-domain passages.")
    assert await literature.search("What do trial reports contain?", uncited) == []
