"""Tokenizer, question entities, mentions."""

from __future__ import annotations

import pytest

from assembler.retrieval.text import mentions, question_entities, specific_entities, tokens


def test_tokens_bigrams_for_japanese_words_for_english() -> None:
    assert tokens("麹造り") == ["麹造", "造り"]
    assert tokens("酒 は") == ["酒", "は"]
    assert tokens("ＡＢＣ Brewery of Kyoto") == ["abc", "brewery", "kyoto"]
    assert tokens("青嶺酒造はISO 9001") == ["青嶺", "嶺酒", "酒造", "造は", "iso", "9001"]


def test_english_entities() -> None:
    assert question_entities("Who was born earlier, Simone Bolelli or Caroline Wozniacki?") == [
        "Simone Bolelli",
        "Caroline Wozniacki",
    ]
    assert question_entities("Are Sutera and Rhodotypos both types of shrub?") == ["Sutera", "Rhodotypos"]
    assert question_entities("Where does Robert W. McElroy write?") == ["Robert W. McElroy"]
    assert question_entities("What is Caroline's identity?") == ["Caroline"]
    assert question_entities("which year?") == []


def test_japanese_entities_with_titles_and_quotes() -> None:
    assert question_entities("グスタフ・マーラーの誕生日は？", ["グスタフ・マーラー"]) == [
        "グスタフ・マーラー",
        "誕生日",
    ]
    assert question_entities("限定酒「青嶺 雫」はいつ発売されるか。")[:2] == ["限定酒", "青嶺 雫"]
    assert "何年" not in question_entities("創業は何年か")


def test_mentions_whole_words_case_folded() -> None:
    assert mentions("Rush", "Rush and RUSH, not Rushmore") == 2
    assert mentions("青嶺", "青嶺酒造の青嶺") == 2
    assert mentions("", "text") == 0


def test_specific_entities_drop_generic_and_unmentioned() -> None:
    texts = ["an American band"] * 10 + ["Neil Peart plays", "nothing"] + ["filler"] * 200
    assert specific_entities(["American", "Neil Peart", "Nobody"], texts) == ["Neil Peart"]
    assert specific_entities(["American"], texts, keep={"American"}) == ["American"]


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("Van Gogh painted which café?", ["Van Gogh"]),
        ("Who was older, Robert De Niro or Ludwig van Beethoven?", ["Robert De Niro", "Ludwig van Beethoven"]),
        ("When did de Gaulle meet von Braun?", ["de Gaulle", "von Braun"]),
        ("Which film did Von Trier direct in 2003?", ["Von Trier"]),
        ("What is the capital of the Netherlands?", ["Netherlands"]),  # "of the" never opens a name
        ("Is de facto a Latin phrase?", ["Latin"]),  # a particle before a lowercase word is no name
    ],
)
def test_a_leading_name_particle_stays_in_the_cue(question: str, expected: list[str]) -> None:
    assert question_entities(question) == expected
