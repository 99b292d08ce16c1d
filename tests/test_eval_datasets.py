"""Tests for unirag.eval.datasets: every benchmark layout, limits, errors. No network."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.dev_sets import DevSets
from unirag.errors import ConfigError, SourceError
from unirag.eval.datasets import Dataset, Question, load_dataset
from unirag.text.chunking import chunk_document
from unirag.text.tokenizer import get_tokenizer

DATA = Path(__file__).resolve().parent / "data" / "eval"


def load(folder: str, **kwargs: object) -> Dataset:
    return load_dataset(DATA / folder, **kwargs)  # type: ignore[arg-type]


def copy(folder: str, tmp_path: Path) -> Path:
    """A writable copy of a hand-made dataset folder, to break."""
    return Path(shutil.copytree(DATA / folder, tmp_path / folder))


def write_json(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def write_jsonl(path: Path, records: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


# ---------------------------------------------------------------- the dev sets (tests/data samples; shared files)


def test_hotpotqa_dev_set(dev_sets: DevSets) -> None:
    ds = load_dataset("hotpotqa", data_dir=dev_sets.root)
    assert (ds.name, ds.fmt, len(ds)) == ("hotpotqa", "hotpotqa", dev_sets.hotpotqa_questions)
    assert ds.corpus_paths == [dev_sets.root / "hotpotqa" / "hotpotqa_train_corpus.json"]
    assert all(q.answers and q.evidence and q.kind == "factoid" for q in ds.questions)
    first = ds.questions[0]
    assert first.question == "If Gallu is a demon Lilu is what?"
    assert first.answers == ["a spirit"]
    assert first.evidence == ["Alû", "Lilu (mythology)"]
    assert first.meta["level"] == "easy"
    docs = list(ds.documents())
    assert len(docs) == dev_sets.hotpotqa_passages and all(d.presplit for d in docs)
    by_id = {d.id: d for d in docs}
    titles = {d.title for d in docs}
    for q in ds.questions[:10]:
        assert set(q.evidence) <= titles
        assert [by_id[i].title for i in q.evidence_ids] == q.evidence
        assert q.evidence_texts == [by_id[i].text for i in q.evidence_ids]


def test_musique_dev_set(dev_sets: DevSets) -> None:
    ds = load_dataset("musique", data_dir=dev_sets.root)
    assert (ds.fmt, len(ds)) == ("musique", dev_sets.musique_questions)
    first = ds.questions[0]
    assert first.id == "2hop__150763_14904"
    assert first.answers == ["G. Stanley Hall", "Stanley Hall"]  # answer_aliases merged after the answer
    assert first.evidence == ["Journal of Psychotherapy Integration", "Adolescence"]
    assert len(first.meta["question_decomposition"]) == 2
    assert all(q.answers and q.evidence for q in ds.questions)
    docs = list(ds.documents())
    assert len(docs) == dev_sets.musique_passages and all(d.presplit for d in docs)
    by_id = {d.id: d for d in docs}
    for q in ds.questions[:10]:
        # Ids pin the exact supporting paragraphs, even where two share a title.
        assert all(i in by_id for i in q.evidence_ids)
        assert {by_id[i].title for i in q.evidence_ids} == set(q.evidence)


def test_limit_keeps_the_whole_corpus(dev_sets: DevSets) -> None:
    ds = load_dataset(dev_sets.root / "hotpotqa" / "hotpotqa_train.json", limit=2)
    assert len(ds) == 2 and ds.name == "hotpotqa_train"
    assert sum(1 for _ in ds.documents()) == dev_sets.hotpotqa_passages


def test_2wiki_dev_set_has_no_questions(dev_sets: DevSets) -> None:
    with pytest.raises(SourceError, match=r"2wikimultihopqa: no question file found \(only corpus files: "):
        load_dataset("2wiki", data_dir=dev_sets.root)


# ---------------------------------------------------------------- HotpotQA-style and MuSiQue layouts


def test_2wiki_native_with_aliases() -> None:
    ds = load_dataset("2wiki", data_dir=DATA)  # the name resolves to DATA/2wikimultihopqa
    assert (ds.name, ds.fmt, len(ds)) == ("2wikimultihopqa", "2wiki", 2)
    q = ds.questions[0]
    assert q.answers == ["Małgorzata Braunek", "Malgorzata Braunek", "Małgorzata Braunek-Żuławska"]
    assert q.evidence == ["Polish-Russian War (film)", "Xawery Żuławski"]
    assert q.meta["type"] == "compositional" and q.meta["evidences"][0][1] == "director"
    docs = {d.title: d for d in ds.documents()}
    assert len(docs) == 5 and all(d.presplit for d in docs.values())
    # Sentences without leading spaces are joined with one.
    assert "film director. In 1995" in docs["Xawery Żuławski"].text
    assert [docs[t].id for t in q.evidence] == q.evidence_ids


def test_hotpotqa_hugging_face_layout(tmp_path: Path) -> None:
    record = {
        "id": "5a8b57f25542995d1e6f1371",
        "question": "Were Scott Derrickson and Ed Wood of the same nationality?",
        "answer": "yes",
        "type": "comparison",
        "level": "hard",
        "supporting_facts": {"title": ["Scott Derrickson", "Ed Wood"], "sent_id": [0, 0]},
        "context": {
            "title": ["Scott Derrickson", "Ed Wood"],
            "sentences": [
                ["Scott Derrickson (born 1966) is an American director.", " He lives in Los Angeles."],
                ["Edward Davis Wood Jr. was an American filmmaker."],
            ],
        },
    }
    ds = load_dataset(write_json(tmp_path / "hotpot_dev.json", [record]))
    assert ds.fmt == "hotpotqa"
    assert ds.questions[0].evidence == ["Scott Derrickson", "Ed Wood"]
    texts = [d.text for d in ds.documents()]
    assert texts[0] == "Scott Derrickson (born 1966) is an American director. He lives in Los Angeles."
    assert ds.questions[0].evidence_texts == texts  # the gold passages' own texts, for grounded recall


def test_musique_from_question_paragraphs(tmp_path: Path) -> None:
    record = {
        "id": "2hop__1_2",
        "question": "Who founded the label that released Album X?",
        "answer": "Jane Roe",
        "answer_aliases": ["J. Roe", "Jane Roe"],
        "answerable": True,
        "paragraphs": [
            {"idx": 0, "title": "Album X", "paragraph_text": "Album X was released by Label Y.", "is_supporting": True},
            {"idx": 1, "title": "Label Y", "paragraph_text": "Label Y was founded by Jane Roe.", "is_supporting": True},
            {"idx": 2, "title": "Other", "paragraph_text": "Unrelated text.", "is_supporting": False},
        ],
    }
    ds = load_dataset(write_json(tmp_path / "musique_ans_v1.0_dev.json", [record, record | {"id": "2hop__3_4"}]))
    assert ds.fmt == "musique" and len(ds) == 2
    assert ds.questions[0].answers == ["Jane Roe", "J. Roe"]
    assert ds.questions[0].evidence == ["Album X", "Label Y"]
    docs = list(ds.documents())
    assert [d.title for d in docs] == ["Album X", "Label Y", "Other"]  # the repeated record adds nothing
    assert ds.questions[0].evidence_ids == [d.id for d in docs[:2]]
    assert ds.questions[0].evidence_texts == ["Album X was released by Label Y.", "Label Y was founded by Jane Roe."]


# ---------------------------------------------------------------- the other benchmarks


def test_multihoprag() -> None:
    ds = load("multihoprag")
    assert (ds.fmt, len(ds)) == ("multihoprag", 3)
    q = ds.questions[0]
    assert q.answers == ["Sam Bankman-Fried"]
    assert q.evidence == ["Sam Bankman-Fried's trial: the key moments", "FTX founder convicted of fraud"]
    assert q.meta["question_type"] == "inference_query"
    assert ds.questions[2].evidence == [] and ds.questions[2].meta["question_type"] == "null_query"
    docs = list(ds.documents())
    assert len(docs) == 3 and not any(d.presplit for d in docs)  # whole articles: the chunker splits them
    assert set(q.evidence) <= {d.title for d in docs}
    assert docs[0].meta["source"] == "The Verge"


def test_popqa_tsv_with_corpus() -> None:
    ds = load("popqa")
    assert (ds.fmt, len(ds)) == ("popqa", 2)
    q = ds.questions[0]
    assert q.id == "4222362"
    assert q.answers == ["politician", "political leader", "political figure", "polit.", "pol"]
    assert q.evidence == [] and q.meta["s_wiki_title"] == "George Rankin"
    assert [d.title for d in ds.documents()] == ["George Rankin", "John Mayne"]


def test_popqa_jsonl_with_retrieved_passages() -> None:
    ds = load("popqa_ctxs")
    assert ds.questions[1].answers == ["journalist", "journo"]
    docs = list(ds.documents())
    assert len(docs) == 2 and all(d.presplit for d in docs)  # the shared passage appears once


def test_quality_multiple_choice() -> None:
    ds = load("quality")
    assert (ds.fmt, len(ds)) == ("quality", 4)
    q = ds.questions[0]
    assert q.kind == "multiple_choice"
    assert q.choices[q.gold_choice or 0] == "He did not want a year on the lecture circuit"
    assert q.gold_choice == 1 and q.answers == [q.choices[1]]  # gold_label is 1-based
    assert q.evidence == ["Spaceman on a Spree"]
    assert ds.questions[2].id == "62139_UGJ8A4S4_1" and ds.questions[2].gold_choice == 3
    docs = list(ds.documents())
    assert [d.title for d in docs] == ["Spaceman on a Spree", "The Girl in His Mind"]  # two writers, one article
    assert not any(d.presplit for d in docs)


def test_alce_asqa() -> None:
    ds = load("alce")
    assert (ds.fmt, len(ds)) == ("alce", 2)
    q = ds.questions[0]
    assert q.kind == "long_form" and q.id == "-4557483386412396316"
    assert q.answers[0].startswith("Several actors")
    assert q.answer_sets == [["Jack Nicholson", "John Joseph Nicholson"], ["Heath Ledger"]]
    assert q.gold_sets == q.answer_sets
    assert q.evidence == ["Joker (character)"]
    docs = list(ds.documents())
    assert len(docs) == 3 and all(d.presplit for d in docs)  # a passage retrieved for both questions once
    assert docs[0].meta["id"] == "7361240"


def test_alce_long_answer_from_annotations(tmp_path: Path) -> None:
    records = json.loads((DATA / "alce" / "asqa_eval_gtr_top100.json").read_text(encoding="utf-8"))
    ds = load_dataset(write_json(tmp_path / "asqa.json", [records[1]]))
    assert ds.questions[0].answers == ["The Chicago Cubs last won the World Series in 2016, ending a 108-year drought."]


def test_narrativeqa_official_csv() -> None:
    ds = load("narrativeqa")
    assert (ds.fmt, len(ds)) == ("narrativeqa", 3)
    q = ds.questions[1]
    assert q.question == "What does Mark do, for a living?"  # a quoted CSV field with a comma
    assert q.answers == ["He is a student.", "A high school student"]
    assert q.evidence == ["Pump Up the Volume (film)"] and q.kind == "long_form"
    assert [x.id for x in ds.questions] == [
        "0025577043f5090cd603c6aea60f26e236195594-0",
        "0025577043f5090cd603c6aea60f26e236195594-1",
        "00950a3641e6a28b04a6fabf6334140e2deaa9fd-0",
    ]
    story, summary = ds.documents()
    assert story.title == "Pump Up the Volume (film)" and story.text.startswith("FADE IN:")
    assert story.meta["part"] == "story"  # the full text from tmp/<id>.content
    assert summary.title == "Wuthering Heights" and summary.meta["part"] == "summary"


def test_narrativeqa_hugging_face_jsonl() -> None:
    ds = load("narrativeqa_hf")
    q = ds.questions[0]
    assert q.question == "Where does Mark broadcast his station from?"
    assert q.answers == ["His parents' basement", "the basement"]
    assert q.evidence == ["Pump Up the Volume"]
    assert ds.questions[1].answers == ["Arizona"]  # duplicate answers collapse
    (doc,) = ds.documents()
    assert doc.title == "Pump Up the Volume" and doc.text.startswith("THE STORY.")


def test_ultradomain_contexts_and_queries() -> None:
    ds = load("ultradomain")
    assert (ds.fmt, len(ds)) == ("ultradomain", 2)
    assert all(q.kind == "abstract" and q.answers == [] for q in ds.questions)
    assert ds.questions[0].id == "mix-0" and ds.questions[0].meta["domain"] == "mix"
    docs = list(ds.documents())
    assert len(docs) == 2 and not any(d.presplit for d in docs)
    # Passing the contexts file finds its queries too.
    assert len(load_dataset(DATA / "ultradomain" / "mix_unique_contexts.json")) == 2


def test_ultradomain_raw_and_lightrag_questions() -> None:
    raw = load("ultradomain_raw")
    assert [q.id for q in raw.questions] == ["cs-0001", "cs-0002"]
    assert raw.questions[0].meta["reference_answers"][0].startswith("It explains")
    assert len(list(raw.documents())) == 1  # the two records share one context
    txt = load("ultradomain_txt")
    assert [q.question for q in txt.questions] == [
        "What factors determine a good location for beehives?",
        "How does climate shape honey production across regions?",
    ]


def test_generic_pair() -> None:
    ds = load("generic")
    assert (ds.fmt, len(ds)) == ("generic", 3)
    q1, q2, q3 = ds.questions
    assert q1.answers == ["Poland"] and q1.evidence == ["Marie Curie", "Warsaw"] and q1.meta == {"type": "bridge"}
    assert q2.answers == ["Pierre Curie", "Pierre"] and q2.evidence == ["Pierre Curie"]
    assert q3.kind == "multiple_choice" and q3.gold_choice == 1
    docs = list(ds.documents())
    assert [d.title for d in docs] == ["Marie Curie", "Warsaw", "Pierre Curie"] and all(d.presplit for d in docs)
    assert docs[0].meta["doc_id"] == 0
    assert q1.evidence_texts == [docs[0].text, docs[1].text] and q3.evidence_texts == []


def test_generic_by_name_in_data_dir_and_questions_json_dumps() -> None:
    ds = load_dataset("generic", data_dir=DATA)
    assert ds.name == "generic"
    json.dumps([q.to_dict() for q in ds.questions])


def test_every_hand_made_question_serialises() -> None:
    for folder in sorted(p.name for p in DATA.iterdir()):
        ds = load(folder)
        assert all(isinstance(q, Question) and q.question for q in ds.questions)
        json.dumps([q.to_dict() for q in ds.questions])


# ---------------------------------------------------------------- limit, explicit format, presplit


def test_limit_counts_questions_not_records() -> None:
    ds = load("quality", limit=3)
    assert [q.id for q in ds.questions] == ["62139_J05FWZR6_1", "62139_J05FWZR6_2", "62139_UGJ8A4S4_1"]
    assert len(list(ds.documents())) == 2  # the corpus is not cut
    assert len(load("generic", limit=1)) == 1
    assert len(load("generic", limit=50)) == 3
    with pytest.raises(ConfigError, match="limit"):
        load("generic", limit=0)


def test_explicit_format() -> None:
    ds = load_dataset(DATA / "generic" / "Question.jsonl", fmt="generic")
    assert len(ds) == 3
    with pytest.raises(SourceError, match=r"Question\.jsonl: line 1 has no 'paragraphs'"):
        load_dataset(DATA / "generic" / "Question.jsonl", fmt="musique")
    with pytest.raises(ConfigError, match="unknown dataset format"):
        load_dataset(DATA / "generic", fmt="squad")


def test_presplit_passages_stay_one_chunk(tmp_path: Path) -> None:
    long_text = " ".join(f"Sentence {i} of an expert-cut passage about topic {i % 7}." for i in range(400))
    folder = copy("generic", tmp_path)
    with (folder / "Corpus.jsonl").open("a", encoding="utf-8") as out:
        out.write(json.dumps({"title": "Long passage", "text": long_text}) + "\n")
    docs = list(load_dataset(folder).documents())
    assert len(docs) == 4
    tok = get_tokenizer("cl100k_base")
    long_doc = docs[-1]
    assert long_doc.presplit and tok.count(long_doc.text) > 1000
    assert len(chunk_document(long_doc, tok, size=200, overlap=20)) == 1
    # A whole document (not presplit) is chunked as usual.
    article = next(iter(load("quality").documents()))
    assert len(chunk_document(article, tok, size=20, overlap=0)) > 1


# ---------------------------------------------------------------- errors name the file and the field


def test_missing_answer_names_file_record_and_field(tmp_path: Path) -> None:
    good = {"id": "2hop__1", "question": "Q?", "answer": "A", "paragraphs": [{"title": "T", "paragraph_text": "x"}]}
    records = [good, good, good, {k: v for k, v in good.items() if k != "answer"}]
    path = write_json(tmp_path / "musique_train.json", records)
    with pytest.raises(SourceError, match=r"musique_train\.json: question 3 has no 'answer'$"):
        load_dataset(path)
    # Records beyond the limit are not parsed for questions.
    assert len(load_dataset(path, limit=3)) == 3


@pytest.mark.parametrize(
    ("folder", "file", "edit", "message"),
    [
        (
            "quality",
            "QuALITY.v1.0.1.htmlstripped.dev",
            lambda r: [r[0] | {"questions": [{k: v for k, v in r[0]["questions"][0].items() if k != "gold_label"}]}],
            r"htmlstripped\.dev: line 1 question 0 has no 'gold_label'",
        ),
        (
            "quality",
            "QuALITY.v1.0.1.htmlstripped.dev",
            lambda r: [r[0] | {"questions": [r[0]["questions"][0] | {"gold_label": 5}]}],
            r"line 1 question 0: 'gold_label' 5 is not in 1\.\.4",
        ),
        (
            "multihoprag",
            "MultiHopRAG.json",
            lambda r: [{k: v for k, v in r[0].items() if k != "query"}],
            r"MultiHopRAG\.json: question 0 has no 'query' \(or 'question'\)",
        ),
        (
            "alce",
            "asqa_eval_gtr_top100.json",
            lambda r: [r[0] | {"qa_pairs": [{"question": "q"}]}],
            r"asqa_eval_gtr_top100\.json: question 0 qa_pair 0 has no 'short_answers'",
        ),
        (
            "generic",
            "Question.jsonl",
            lambda r: [r[0] | {"answer": {"text": "x"}}],
            r"Question\.jsonl: line 1: 'answer' should be a str or int or float or list, found a dict",
        ),
        (
            "narrativeqa_hf",
            "narrativeqa_test.jsonl",
            lambda r: [{k: v for k, v in r[0].items() if k != "answers"}],
            r"narrativeqa_test\.jsonl: line 1 has no 'answers' \(or 'answer1'\)",
        ),
    ],
)
def test_malformed_records(tmp_path: Path, folder: str, file: str, edit: object, message: str) -> None:
    root = copy(folder, tmp_path)
    path = root / file
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        write_json(path, edit(json.loads(text)))  # type: ignore[operator]
    else:
        write_jsonl(path, edit([json.loads(line) for line in text.splitlines() if line.strip()]))  # type: ignore[operator]
    with pytest.raises(SourceError, match=message):
        load_dataset(root)


def test_popqa_possible_answers_must_be_a_json_list(tmp_path: Path) -> None:
    root = copy("popqa", tmp_path)
    tsv = root / "popqa.tsv"
    tsv.write_text(tsv.read_text(encoding="utf-8").replace('["journalist", "journo", "journalists"]', "journalist"))
    with pytest.raises(SourceError, match=r"popqa\.tsv: line 3: 'possible_answers' is not a JSON list"):
        load_dataset(root)


def test_missing_companion_corpus(tmp_path: Path) -> None:
    root = copy("multihoprag", tmp_path)
    (root / "corpus.json").unlink()
    with pytest.raises(SourceError, match=r"MultiHopRAG\.json: no corpus file beside it \(expected corpus\.json\)"):
        load_dataset(root)
    root = copy("generic", tmp_path)
    (root / "Corpus.jsonl").unlink()
    with pytest.raises(SourceError, match=r"Question\.jsonl: no corpus file beside it \(expected Corpus\.jsonl\)"):
        load_dataset(root)


def test_bad_corpus_passage_fails_when_read(tmp_path: Path) -> None:
    root = copy("generic", tmp_path)
    write_jsonl(root / "Corpus.jsonl", [{"title": "A", "text": "fine"}, {"title": "B", "summary": "no text"}])
    ds = load_dataset(root)
    with pytest.raises(SourceError, match=r"Corpus\.jsonl: line 2 has no 'text' \(or 'context', 'body'"):
        list(ds.documents())


def test_unreadable_files(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('[{"question": "q", "answer": ', encoding="utf-8")
    with pytest.raises(SourceError, match=r"broken\.json: not valid JSON \(Expecting value at line 1"):
        load_dataset(broken)
    lines = tmp_path / "q.jsonl"
    lines.write_text('{"question": "q", "answer": "a"}\n{oops\n', encoding="utf-8")
    with pytest.raises(SourceError, match=r"q\.jsonl: line 2: not valid JSON"):
        load_dataset(lines)
    empty = tmp_path / "empty.json"
    empty.write_text("  \n", encoding="utf-8")
    with pytest.raises(SourceError, match=r"empty\.json: empty file"):
        load_dataset(empty)
    odd = write_json(tmp_path / "odd.json", [{"foo": 1}])
    with pytest.raises(SourceError, match=r"odd\.json: unrecognised question layout \(question 0 has fields foo\)"):
        load_dataset(odd)


def test_unknown_name_and_ambiguous_folder(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"nope: no such file or directory, and not a dataset name \(.* has 2wiki"):
        load_dataset("nope", data_dir=DATA)
    folder = tmp_path / "two"
    folder.mkdir()
    write_json(folder / "train.json", [{"question": "q", "answer": "a"}])
    write_json(folder / "dev.json", [{"question": "q", "answer": "a"}])
    with pytest.raises(SourceError, match=r"several question files \(dev\.json, train\.json\); pass one of them"):
        load_dataset(folder)
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceError, match=r"empty: no question file found$"):
        load_dataset(tmp_path / "empty")
