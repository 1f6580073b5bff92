from indexes.text import contains_answer, has_answer, normalize_answer


def test_normalize_answer_is_squad_v1():
    assert normalize_answer("The  Eiffel-Tower, in PARIS!") == "eiffeltower in paris"


def test_has_answer_matches_whole_tokens_only():
    # nq-open-oracle: "atlantic ocean's shape is similar to which english alphabet" -> "S"
    assert not has_answer("The Atlantic Ocean is the second-largest of the world's oceans.", ["S"])
    assert has_answer("The ocean has the shape of the letter S.", ["S"])
    assert has_answer("He moved to New York City in 1990.", ["new york"])
    assert not has_answer("He moved to Newark in 1990.", ["new"])
    assert not has_answer("anything", [""])


def test_contains_answer_is_the_loose_substring_rule_of_best_subspan_em():
    assert contains_answer("The Atlantic Ocean is the second-largest of the world's oceans.", ["S"])
    assert contains_answer("Brathen", ["Brath"]) and not has_answer("Brathen", ["Brath"])


def test_the_ascii_fast_path_counts_what_the_general_rule_counts():
    import random

    from core.text import WORD, count_pieces, count_words, word_pieces

    rng = random.Random(3)
    every_ascii = "".join(map(chr, range(128)))
    # ASCII; beyond it without ideographs (word and non-word characters, a combining mark, a lone surrogate,
    # a capital whose lowercase is two characters); with ideographs (and word characters just outside their range)
    for alphabet in ("abcXYZ019 _-.,;\n\t\"'{}", "aé ßΩİ_1\u0301\u00a0\u2028\ud800١–“”’,.", "abc déf 中文 ÉCOLE ß_1 ,.㐀\u9fff",
                     every_ascii, every_ascii + "é中"):
        for _ in range(1000):
            text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))
            assert count_words(text) == len(WORD.findall(text.lower()))
            assert count_pieces(text) == len(word_pieces(text))


def test_has_answer_is_a_run_of_tokens_where_the_answer_is_only_a_substring():
    import random

    assert not has_answer("They renew Yorkshire's roads.", ["new york"])  # in the normal form, not as tokens
    assert has_answer("Renew York, New York.", ["new york"])

    def by_definition(text, answers):
        tokens = normalize_answer(text).split()
        targets = [normalize_answer(a).split() for a in answers]
        return any(t and any(tokens[i:i + len(t)] == t for i in range(len(tokens))) for t in targets)

    rng = random.Random(5)
    words = ["a", "an", "the", "new", "york", "renew", "yorks", "s", "S.", "N.Y.", "", " "]
    for _ in range(2000):
        text = " ".join(rng.choices(words, k=rng.randint(0, 12)))
        answers = [" ".join(rng.choices(words, k=rng.randint(0, 3))) for _ in range(rng.randint(0, 3))]
        assert has_answer(text, answers) == by_definition(text, answers)
