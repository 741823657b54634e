"""Function words of the other languages people write in are no entities, while English words that look like them
(`die`, `war`, `art`) stay entities of English text."""

from __future__ import annotations

import pytest

from mementograph._languages import LANGUAGES, languages_of
from mementograph.knowledge_graph.entities import STOPWORDS, extract_entities, stopwords_for
from mementograph.knowledge_graph.recall import plan_query

SENTENCES = {
    'de': 'Wir haben die Datenbank gestern migriert, und die Tabelle ist jetzt größer als vorher.',
    'fr': 'Nous avons migré la base de données sur le serveur de Lyon, elle est maintenant plus rapide.',
    'es': 'Hemos migrado la base de datos al servidor de Madrid y ahora la tabla es más grande.',
    'it': 'Abbiamo migrato il database sul server di Milano e questo è molto più veloce di prima.',
    'pt': 'Nós migramos o banco de dados para o servidor de Lisboa e agora está muito mais rápido.',
    'nl': 'Wij hebben de database naar de server in Utrecht verplaatst en het is nu niet meer traag.',
    'sv': 'Vi har flyttat databasen till servern i Malmö och det är mycket snabbare än förut.',
    'ru': 'Мы перенесли базу данных на сервер в Москве, и теперь она работает быстрее.',
    'pl': 'Przenieśliśmy bazę danych na serwer w Krakowie i teraz jest bardzo szybka.',
}


@pytest.mark.parametrize(('language', 'text'), SENTENCES.items())
def test_a_sentence_is_taken_for_its_language(language: str, text: str) -> None:
    assert languages_of(text) == (language,)


def test_a_short_text_needs_fewer_markers() -> None:
    assert languages_of('Peux-tu vérifier si la tâche cron tourne encore ? Je ne vois pas de nouveaux fichiers.') == (
        'fr',
    )
    assert languages_of('Peux-tu vérifier si la tâche cron tourne ? Je ne vois rien.') == ()  # one marker only


@pytest.mark.parametrize(
    'text',
    [
        'The war in the gallery: die hard, art for art. I will come con carne, plus a comment on the sedan.',
        'del cache[key]  # TODO: plus one, per the comment; see los_angeles.csv and la_liga.json (mit license)',
        'Caroline: I went to a LGBTQ support group yesterday and it was so powerful.',
        'We had lunch on the Piazza della Repubblica, then saw the Palazzo delle Esposizioni.',
    ],
)
def test_english_and_code_are_taken_for_no_other_language(text: str) -> None:
    assert languages_of(text) == ()
    assert stopwords_for(text) is STOPWORDS


def test_every_language_has_its_stop_words() -> None:
    assert set(SENTENCES) == set(LANGUAGES)


def test_function_words_of_a_german_text_are_no_entities() -> None:
    keys = {entity.key for entity in extract_entities(SENTENCES['de'] + ' Das Skript lief 12 Minuten in München.')}
    for function_word in ('und', 'die', 'ist', 'wir', 'haben', 'als', 'der'):
        assert f'concept:{function_word}' not in keys
    assert 'name:das' not in keys and 'name:das skript' not in keys  # a sentence-opening article, not a name
    assert {'concept:migriert', 'name:datenbank', 'name:tabelle', 'name:skript', 'name:münchen'} <= keys


def test_words_that_are_function_words_elsewhere_stay_entities_of_english() -> None:
    keys = {entity.key for entity in extract_entities('The war museum: die-hard fans of art bought a gift for my son.')}
    assert {'concept:war', 'concept:die', 'concept:art', 'concept:gift', 'concept:son'} <= keys


def test_a_query_in_another_language_searches_its_content_words() -> None:
    plan = plan_query('Wann haben wir die Datenbank auf dem Server in München migriert?')
    assert 'datenbank' in plan.terms and 'migriert' in plan.terms
    assert not {'haben', 'wir', 'die', 'auf', 'dem'} & set(plan.terms)
    # an English query keeps words that are German function words
    assert 'war' in plan_query('which war museum did we visit').terms


def test_thanks_and_praise_of_another_language_are_no_entities() -> None:
    keys = {entity.key for entity in extract_entities('Danke, das ist super! Die Datenbank läuft wieder, toll.')}
    assert not {'concept:danke', 'concept:super', 'concept:toll'} & keys
    assert 'name:datenbank' in keys
    # in English, `super` stays a word (`super()` in code, "super bowl")
    assert 'concept:super' in {entity.key for entity in extract_entities('We watched the super bowl final.')}
