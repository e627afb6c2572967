"""What the investigator may read about the literature: the keys a paragraph cites, the manuscript's .bib files,
PDFs in the user's folders, and a SearxNG-style web search (a real HTTP server on loopback) that never uses
peer-review sites; how a question ranks all of it (BM25, top 5); and the literature of `margin eval feedback`
examples (a PDF folder and a .bib per example)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from margin.server.cli import main
from margin.testing.scripted_endpoint import RecordedRequest, Reply, Rule
from margin.workflows.evaluation.datasets import FEEDBACK, DatasetError, load_examples
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
from margin.workflows.manuscript.model import Manuscript, Paragraph

from conftest import (
    FIXTURES,
    PAPER_MAIN,
    SCRIPTED_MODEL,
    ScriptedFactory,
    SearchServer,
    final_user_message,
    finding_json,
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
        "zhou2021",  # the only passage that shares words with the question
        # the paragraph's cited works fill the places left, in citation order
        "Strong Lexical Baselines for Technology-Assisted Review",
        "Dense Passage Encoders for Biomedical Screening",
        "Lexical Matching Still Matters: An Analysis of Learned Term Weights",
        "Learned Sparse Representations at the Cost of BM25",
    ]
    assert all(passage.source is Source.LITERATURE for passage in passages)


async def test_literature_asks_the_web_for_every_question_and_ranks_its_results_with_the_rest(
    search_server: SearchServer,
) -> None:
    search_server.payload = {"results": PEER_REVIEW_RESULTS}
    paper = load_manuscript(PAPER_MAIN)
    literature = await Literature.gather(paper, web=WebSearch(search_server.url))
    cites_four = paragraph_starting(paper, "Ranking models offer a natural framing")

    passages = await literature.search("How do section budgets help sparse pruning?", cites_four, k=4)
    assert len(search_server.queries) == 1
    assert passages[0].uri == "https://www.example.org/sparse-pruning"  # the best match, whatever its source
    assert len(passages) == 4
    assert not any("review" in (passage.uri or "") for passage in passages)


async def test_literature_for_a_paragraph_citing_nothing_is_empty_without_a_library() -> None:
    paper = load_manuscript(PAPER_MAIN)
    literature = await Literature.gather(paper)
    uncited = paragraph_starting(paper, "Trial reports, however, are not open-domain passages.")
    assert await literature.search("What do trial reports contain?", uncited) == []


# -- ranking: a question reads the passages that answer it, whatever their source ---------------------------------


def bib_entry(key: str, title: str, abstract: str, **fields: str) -> str:
    extra = "".join(f"  {name} = {{{value}}},\n" for name, value in fields.items())
    return f"@article{{{key},\n  title = {{{title}}},\n  abstract = {{{abstract}}},\n{extra}}}\n"


def citing_paper(folder: Path, keys: list[str], *entries: str) -> tuple[Manuscript, Paragraph]:
    """A Markdown paper in `folder` whose one paragraph cites `keys`, with the entries in refs.bib beside it."""
    (folder / "refs.bib").write_text("".join(entries), encoding="utf-8")
    citations = "; ".join(f"@{key}" for key in keys)
    paper = folder / "paper.md"
    paper.write_text(
        f"---\nbibliography: refs.bib\n---\n\nWe build on earlier retrieval work [{citations}].\n",
        encoding="utf-8",
    )
    manuscript = load_manuscript(paper)
    return manuscript, only(manuscript)


async def test_cited_works_are_ranked_by_the_question_not_by_citation_order(tmp_path: Path) -> None:
    paper, paragraph = citing_paper(
        tmp_path,
        ["first", "second"],
        bib_entry(
            "first", "Trial Screening Workloads", "Screening teams spend weeks reading trial abstracts."
        ),
        bib_entry(
            "second", "Posting List Pruning", "Budgets per section keep rare dosage terms in the index."
        ),
    )
    literature = await Literature.gather(paper)

    about_second = await literature.search("Do section budgets keep rare dosage terms?", paragraph)
    assert [passage.title for passage in about_second] == [
        "Posting List Pruning",
        "Trial Screening Workloads",
    ]
    about_first = await literature.search("How long do screening teams spend on abstracts?", paragraph)
    assert [passage.title for passage in about_first] == ["Trial Screening Workloads", "Posting List Pruning"]


async def test_keywords_and_authors_find_a_cited_work(tmp_path: Path) -> None:
    paper, paragraph = citing_paper(
        tmp_path,
        ["a", "b", "c"],
        bib_entry("a", "On Indexes", "We study indexes.", keywords="impact ordering, quantization"),
        bib_entry("b", "On Queries", "We study queries.", author="Okafor, Nnamdi", year="2021"),
        bib_entry("c", "On Collections", "We study collections."),
    )
    literature = await Literature.gather(paper)
    by_keyword = await literature.search("Does impact ordering help?", paragraph, k=1)
    assert [passage.title for passage in by_keyword] == ["On Indexes"]
    assert "Keywords: impact ordering, quantization" in by_keyword[0].text
    by_author = await literature.search("What did Okafor find in 2021?", paragraph, k=1)
    assert [passage.title for passage in by_author] == ["On Queries"]


async def test_pdfs_and_cited_works_are_ranked_together(tmp_path: Path) -> None:
    library = tmp_path / "library"
    library.mkdir()
    (library / "zhou2021.pdf").write_bytes(minimal_pdf(PDF_LINES))
    (library / "unrelated.pdf").write_bytes(
        minimal_pdf(["Graph colouring heuristics for school timetables."])
    )
    paper, paragraph = citing_paper(
        tmp_path,
        ["screening"],
        bib_entry(
            "screening", "Trial Screening Workloads", "Screening teams spend weeks reading trial abstracts."
        ),
    )
    literature = await Literature.gather(paper, [library])

    about_pdf = await literature.search("Which rare dosage terms do section budgets keep?", paragraph)
    assert [passage.title for passage in about_pdf] == ["zhou2021", "Trial Screening Workloads"]
    assert about_pdf[0].uri == (library / "zhou2021.pdf").as_uri()  # the evidence says where it came from
    about_bib = await literature.search("How long do screening teams read trial abstracts?", paragraph)
    assert [passage.title for passage in about_bib] == ["Trial Screening Workloads"]  # no PDF shares a word


QUERY_TERMS = ["posting", "pruning", "budget", "section", "dosage", "recall"]


async def test_a_question_reads_the_top_5_passages_best_first(tmp_path: Path) -> None:
    """Seven cited works share 0 to 6 of the question's words: the five that share most, best first."""
    entries = [
        bib_entry(f"w{count}", f"Work {count}", " ".join(QUERY_TERMS[:count] + ["filler"] * (6 - count)))
        for count in range(7)
    ]
    paper, paragraph = citing_paper(tmp_path, [f"w{count}" for count in range(7)], *entries)
    literature = await Literature.gather(paper)
    passages = await literature.search(" ".join(QUERY_TERMS) + "?", paragraph)
    assert [passage.title for passage in passages] == ["Work 6", "Work 5", "Work 4", "Work 3", "Work 2"]


async def test_bib_files_given_beside_a_text_are_read_for_every_paragraph(tmp_path: Path) -> None:
    bib = tmp_path / "example.bib"
    bib.write_text(
        bib_entry(
            "zhou", "Posting List Pruning", "Budgets per section keep rare dosage terms.", doi="10.1/zhou"
        )
        + bib_entry("other", "Graph Colouring", "Heuristics for school timetables."),
        encoding="utf-8",
    )
    paper = load_manuscript(PAPER_MAIN)
    literature = await Literature.gather(paper, bib_files=[bib])
    uncited = paragraph_starting(paper, "Trial reports, however, are not open-domain passages.")
    assert literature.available_for(uncited)
    (passage,) = await literature.search("Do section budgets keep rare dosage terms?", uncited)
    assert passage.title == "Posting List Pruning"
    assert passage.uri == "https://doi.org/10.1/zhou"


# -- margin eval feedback: a PDF folder and a .bib per example -------------------------------------------------------


EVAL_PARAGRAPH = (
    "We prune posting lists to a fixed budget per section, as earlier work on sparse indexes proposed."
)
EVAL_QUESTION = "Which rare dosage terms do section budgets keep in pruned indexes?"


def feedback_agents() -> list[Rule]:
    """Full mode with one literature question: planner, controller, investigator, reviewer."""
    plan = [{"action": "literature_question", "question": EVAL_QUESTION}, {"action": "review"}]
    decision = {"explanation": "the plan's step", "action": "literature_question"}
    finding = finding_json("fixed budget per section", "Originality", "Compare with section pruning.", "")

    def investigator(request: RecordedRequest) -> Reply:
        return Reply(json={"answer": "They keep them.", "answerable": True, "passages": [1]})

    return [
        Rule(role="planner", replies=[Reply(json={"steps": plan})]),
        Rule(role="controller", replies=[Reply(json=decision)]),
        Rule(role="investigator", respond=investigator),
        Rule(role="reviewer", replies=[Reply(json={"findings": [finding]})]),
    ]


def feedback_dataset(folder: Path) -> Path:
    """Two examples: one names a folder of PDFs, the other a .bib file (paths relative to the dataset)."""
    (folder / "papers" / "ex1").mkdir(parents=True)
    (folder / "papers" / "ex1" / "zhou.pdf").write_bytes(
        minimal_pdf(["PDF-ONLY: section budgets keep rare dosage terms."])
    )
    (folder / "refs").mkdir()
    (folder / "refs" / "ex2.bib").write_text(
        bib_entry(
            "chen", "Section Budgets", "BIB-ONLY: section budgets keep rare dosage terms in pruned indexes."
        ),
        encoding="utf-8",
    )
    common = {"paragraph": EVAL_PARAGRAPH, "review": "Cite the section pruning work.", "label": "Originality"}
    records = [
        {"id": "ex1", **common, "literature": "../papers/ex1"},  # relative to data/, where the dataset is
        {"id": "ex2", **common, "bib": "../refs/ex2.bib"},
        {"id": "ex3", **common},
    ]
    dataset = folder / "data" / "reviews.jsonl"
    dataset.parent.mkdir()
    dataset.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return dataset


def test_the_eval_dataset_names_literature_relative_to_itself(tmp_path: Path) -> None:
    examples = {example.id: example for example in load_examples(feedback_dataset(tmp_path), FEEDBACK)}
    assert examples["ex1"].texts("literature") == [str((tmp_path / "papers" / "ex1").resolve())]
    assert examples["ex2"].texts("bib") == [str((tmp_path / "refs" / "ex2.bib").resolve())]
    assert "literature" not in examples["ex3"].fields and "bib" not in examples["ex3"].fields


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"literature": "missing-folder"}, "its literature folder .*missing-folder does not exist"),
        ({"bib": "missing.bib"}, "its bib file .*missing.bib does not exist"),
        ({"bib": ["../refs/ex2.bib", 3]}, "bib must be a path or a list of paths"),
    ],
)
def test_an_eval_example_naming_literature_that_is_not_there_is_refused(
    tmp_path: Path, extra: dict[str, object], message: str
) -> None:
    dataset = feedback_dataset(tmp_path)
    record = {"id": "bad", "paragraph": EVAL_PARAGRAPH, "review": "r", "label": "Originality", **extra}
    dataset.write_text(json.dumps(record) + "\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=message):
        load_examples(dataset, FEEDBACK)


def test_margin_eval_feedback_reads_each_examples_pdf_folder_and_bib(
    scripted: ScriptedFactory, tmp_path: Path
) -> None:
    endpoint = scripted(*feedback_agents())
    dataset = feedback_dataset(tmp_path)
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"review": {"mode": "full", "candidatePlans": 1}}), encoding="utf-8")
    out = tmp_path / "out"
    code = main(
        ["eval", FEEDBACK, "--dataset", str(dataset), "--out", str(out), "--settings", str(settings),
         "--endpoint", endpoint.base_url, "--model", SCRIPTED_MODEL, "--no-cache"]
    )  # fmt: skip
    assert code == 0

    prompts = [final_user_message(request) for request in endpoint.calls("investigator")]
    assert len(prompts) == 2  # ex3 names no literature: its literature question is not asked
    assert sum("PDF-ONLY" in prompt and "BIB-ONLY" not in prompt for prompt in prompts) == 1
    assert sum("BIB-ONLY" in prompt and "PDF-ONLY" not in prompt for prompt in prompts) == 1
    assert all(EVAL_QUESTION in prompt for prompt in prompts)
    predictions = [
        json.loads(line) for line in (out / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert {prediction["id"]: prediction["status"] for prediction in predictions} == {
        "ex1": "reviewed",
        "ex2": "reviewed",
        "ex3": "reviewed",
    }
