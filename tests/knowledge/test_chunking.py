"""The chunker: deterministic, heading-aware, bounded, lossless for prose."""
import pytest

from engine.context import tokens
from engine.knowledge.chunking import HARD_MAX, MIN_TOKENS, TARGET_MAX, chunk, digest, index_line, normalize
from engine.knowledge.intake import MAX_PASSAGES_PER_SOURCE, MAX_SOURCE_BYTES

PARAGRAPH = ("The wind off the estuary carries salt and the smell of tar. Fishermen mend nets on the quay, "
             "and the bell of the customs house marks each hour. ")
DOC = (
    "# Setting\n\n" + PARAGRAPH * 6 + "\n\n## Westhaven\n\n" + PARAGRAPH * 8
    + "\n\n```python\n# not a heading\n\nprint('x')\n```\n\n### The Old Abbey\n\n" + PARAGRAPH * 10 + "\n"
)


def test_same_text_gives_the_same_passages_every_time():
    runs = [chunk(DOC) for _ in range(5)]
    first = runs[0]
    assert [p.index for p in first] == list(range(len(first)))
    for run in runs[1:]:
        assert [(p.heading, p.text, p.tokens, p.content_hash) for p in run] == \
               [(p.heading, p.text, p.tokens, p.content_hash) for p in first]


def test_one_line_is_one_passage_with_no_heading():
    (p,) = chunk("Just one line.")
    assert (p.index, p.heading, p.text) == (0, "", "Just one line.") and p.tokens > 0


def test_heading_trails_are_kept():
    doc = "".join(f"{h}\n\n{PARAGRAPH * 20}\n\n" for h in ("# Setting", "## Westhaven", "### The Old Abbey"))
    passages = chunk(doc)
    trails = {p.heading for p in passages}
    assert {"Setting", "Setting > Westhaven", "Setting > Westhaven > The Old Abbey"} <= trails
    assert "The Old Abbey" in passages[-1].line


def test_tiny_sections_are_packed_not_fragmented():
    doc = "\n\n".join(f"## Section {n}\n\nOne short line about section {n}." for n in range(40))
    passages = chunk(doc)
    assert len(passages) < 40
    assert all(p.tokens >= MIN_TOKENS for p in passages[:-1])
    for n in range(40):
        assert any(f"section {n}." in p.text for p in passages)
        assert any(f"Section {n}" in p.text or f"Section {n}" in p.heading for p in passages)


def test_a_long_paragraph_is_split_under_the_ceiling_keeping_its_heading():
    sentence = "The abbey bell rang for the seventh office while rain swept the cloister. "
    passages = chunk("# Abbey\n\n" + sentence * 400)
    assert len(passages) > 1
    assert all(p.tokens <= TARGET_MAX and p.heading == "Abbey" for p in passages)
    assert sentence.strip() in passages[0].text and sentence.strip() in passages[-1].text


def test_text_with_no_breaks_at_all_is_cut_and_nothing_is_lost():
    passages = chunk("x" * 60000)
    assert len(passages) > 1 and all(p.tokens <= TARGET_MAX for p in passages)
    assert "".join("".join(p.text.split()) for p in passages) == "x" * 60000


def test_unsegmented_script_fits_even_when_characters_cost_several_tokens():
    passages = chunk("旅人" * 3000)
    assert all(p.tokens <= TARGET_MAX for p in passages)
    assert "".join("".join(p.text.split()) for p in passages) == "旅人" * 3000


def test_unicode_chunks_and_hashes_stably():
    doc = "# Café de la Résistance\n\nLe voyageur entra.\n\nΟ ταξιδιώτης περίμενε.\n\n旅人は待った。\n"
    a, b = chunk(doc), chunk(doc)
    assert [p.content_hash for p in a] == [p.content_hash for p in b]
    joined = " ".join(p.heading + " " + p.text for p in a)
    assert "Résistance" in joined and "ταξιδιώτης" in joined and "旅人" in joined


def test_digest_ignores_encoding_accidents_not_content():
    import unicodedata

    name = "Café de la Résistance"
    assert digest(unicodedata.normalize("NFC", name)) == digest(unicodedata.normalize("NFD", name))
    assert digest("a\nb\n") == digest("a\r\nb\r\n") == digest("a   \nb\t\n")
    assert digest("a\nb\n") != digest("a\nc\n")
    assert normalize("  a \r\n\r\nb  ") == "a\n\nb"


def test_a_file_near_the_size_limit_stays_within_the_passage_limit():
    para = " ".join(f"Sentence {i} tells of the long road north and the towns along it." for i in range(12))
    doc = ("\n\n".join([para] * 1400))[: MAX_SOURCE_BYTES - 100]
    passages = chunk(doc)
    assert len(passages) <= MAX_PASSAGES_PER_SOURCE
    assert all(p.tokens <= TARGET_MAX for p in passages)
    assert len({p.index for p in passages}) == len(passages)


def test_fenced_code_is_one_block_and_its_hash_lines_are_not_headings():
    doc = "# Real Heading\n\n```python\n# not a heading\n\nx = 1\n\n\ny = 2\n```\n\nAfter the code.\n"
    passages = chunk(doc)
    assert all(p.heading in ("", "Real Heading") for p in passages)
    text = "\n".join(p.text for p in passages)
    assert "# not a heading\n\nx = 1\n\n\ny = 2" in text  # blank lines inside the fence survive


def test_tilde_fences_close_only_on_tildes():
    doc = "~~~\n```\n# still code\n~~~\n\n# Heading After\n\nbody text here\n"
    passages = chunk(doc)
    assert "# still code" in passages[0].text
    assert any(p.heading == "Heading After" or "Heading After" in p.text for p in passages)


def test_long_code_is_split_on_lines_keeping_newlines():
    code = "```\n" + "\n".join(f"value_{i} = compute({i}, 'alpha', 'beta')" for i in range(900)) + "\n```"
    passages = chunk(code)
    assert len(passages) > 1 and all(p.tokens <= TARGET_MAX for p in passages)
    assert "value_1 = compute(1, 'alpha', 'beta')\nvalue_2" in passages[0].text


def test_plain_text_mode_has_no_headings():
    paragraphs = "\n\n".join(PARAGRAPH * 5 for _ in range(20))
    passages = chunk(paragraphs, markdown=False)
    assert len(passages) > 1 and all(p.heading == "" and p.tokens <= TARGET_MAX for p in passages)
    (p,) = chunk("# not a heading\n\nsome text\n", markdown=False)
    assert "# not a heading" in p.text


@pytest.mark.parametrize("empty", ["", "   \n\n  \n", "\n"])
def test_empty_input_has_no_passages(empty):
    assert chunk(empty) == []


def test_headings_crossed_inside_a_passage_are_written_into_it():
    doc = "# A\n\nshort a.\n\n# B\n\nshort b.\n"
    (p,) = chunk(doc)
    assert p.heading == ""  # nothing shared between A and B
    assert p.text.startswith("## A") and "## B" in p.text and "short b." in p.text


def test_index_line_is_heading_then_text():
    assert index_line("A > B", "body") == "A > B\nbody"
    assert index_line("", "body") == "body"


def test_recounted_tokens_match_the_counter():
    for p in chunk(DOC):
        assert p.tokens == tokens.count(p.text) <= TARGET_MAX
    assert HARD_MAX < TARGET_MAX
