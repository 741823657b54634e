"""Relative time expressions are resolved against the moment they were said, in LoCoMo's style."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from mementograph.knowledge_graph.memory._dates import anchor_text, find_anchors, format_day

MONDAY = date(2023, 5, 8)


@pytest.mark.parametrize(
    ('text', 'when', 'expected'),
    [
        ('I went yesterday.', MONDAY, 'I went yesterday (7 May 2023).'),
        ('Done today, tonight too.', MONDAY, 'Done today (8 May 2023), tonight (8 May 2023) too.'),
        ('See you tomorrow!', MONDAY, 'See you tomorrow (9 May 2023)!'),
        ('It was the day before yesterday.', MONDAY, 'It was the day before yesterday (6 May 2023).'),
        ('Last week I ran.', MONDAY, 'Last week (the week before 8 May 2023) I ran.'),
        ('this week', MONDAY, 'this week (the week of 8 May 2023)'),
        ('next week', MONDAY, 'next week (the week after 8 May 2023)'),
        ('this past weekend', MONDAY, 'this past weekend (the weekend before 8 May 2023)'),
        ('this weekend', MONDAY, 'this weekend (the weekend of 8 May 2023)'),
        ('last month', MONDAY, 'last month (April 2023)'),
        ('this month', MONDAY, 'this month (May 2023)'),
        ('next month', MONDAY, 'next month (June 2023)'),
        ('last year', MONDAY, 'last year (2022)'),
        ('next year', MONDAY, 'next year (2024)'),
        ('last Saturday', MONDAY, 'last Saturday (the Saturday before 8 May 2023)'),
        ('last Fri', MONDAY, 'last Fri (the Friday before 8 May 2023)'),
        ('next Sunday', MONDAY, 'next Sunday (the Sunday after 8 May 2023)'),
        ('two days ago', MONDAY, 'two days ago (6 May 2023)'),
        ('3 weeks ago', MONDAY, '3 weeks ago (3 weeks before 8 May 2023)'),
        ('a month ago', MONDAY, 'a month ago (April 2023)'),
        ('five years ago', MONDAY, 'five years ago (2018)'),
        ("last year's show", MONDAY, "last year's (2022) show"),
    ],
)
def test_expressions_are_anchored(text: str, when: date, expected: str) -> None:
    assert anchor_text(text, when) == expected


def test_month_and_year_boundaries() -> None:
    new_year = date(2023, 1, 1)
    assert anchor_text('yesterday', new_year) == 'yesterday (31 December 2022)'
    assert anchor_text('last month', new_year) == 'last month (December 2022)'
    assert anchor_text('11 months ago', date(2023, 3, 15)) == '11 months ago (April 2022)'
    assert anchor_text('next month', date(2022, 12, 31)) == 'next month (January 2023)'
    assert anchor_text('tomorrow', date(2022, 12, 31)) == 'tomorrow (1 January 2023)'
    assert anchor_text('tomorrow', date(2023, 4, 30)) == 'tomorrow (1 May 2023)'


def test_leap_day() -> None:
    assert anchor_text('yesterday', date(2024, 3, 1)) == 'yesterday (29 February 2024)'
    assert anchor_text('tomorrow', date(2024, 2, 28)) == 'tomorrow (29 February 2024)'
    assert anchor_text('yesterday', date(2023, 3, 1)) == 'yesterday (28 February 2023)'
    assert anchor_text('two days ago', date(2024, 3, 1)) == 'two days ago (28 February 2024)'


def test_weekday_is_named_in_full_whatever_the_form() -> None:
    when = date(2023, 5, 25)  # a Thursday
    assert anchor_text('Last Tues I went', when) == 'Last Tues (the Tuesday before 25 May 2023) I went'
    assert anchor_text('last Thursday', when) == 'last Thursday (the Thursday before 25 May 2023)'
    assert anchor_text('LAST SUNDAY', when) == 'LAST SUNDAY (the Sunday before 25 May 2023)'


def test_a_datetime_is_read_by_its_date() -> None:
    stamp = datetime(2023, 5, 8, 23, 59, 30, tzinfo=UTC)
    assert anchor_text('yesterday', stamp) == 'yesterday (7 May 2023)'
    assert format_day(stamp.date()) == '8 May 2023'


def test_vague_expressions_are_left_alone() -> None:
    for text in ('the other day', 'a few days ago', 'recently', 'on Friday', 'a while back', 'weekends are fun'):
        assert anchor_text(text, MONDAY) == text
    assert anchor_text('no time', None) == 'no time'


def test_anchoring_is_idempotent_and_spans_are_exact() -> None:
    text = 'I painted it yesterday and we hike next month.'
    once = anchor_text(text, MONDAY)
    assert anchor_text(once, MONDAY) == once
    anchors = find_anchors(text, MONDAY)
    assert [(text[a.start : a.end], a.anchor) for a in anchors] == [
        ('yesterday', '7 May 2023'),
        ('next month', 'June 2023'),
    ]
    assert anchors[0].anchored == 'yesterday (7 May 2023)'


def test_words_that_only_contain_an_expression_do_not_match() -> None:
    assert anchor_text('the todays and yesterdays, a weekend-long lastweek', MONDAY) == (
        'the todays and yesterdays, a weekend-long lastweek'
    )


@pytest.mark.parametrize(
    ('text', 'expected'),
    [
        (
            'Gestern waren wir im Kino, morgen fahren wir nach Berlin. Heute Morgen war es kalt.',
            'Gestern (7 May 2023) waren wir im Kino, morgen (9 May 2023) fahren wir nach Berlin. '
            'Heute Morgen (8 May 2023) war es kalt.',
        ),
        ('Vor 3 Tagen und letzte Woche.', 'Vor 3 Tagen (5 May 2023) und letzte Woche (the week before 8 May 2023).'),
        (
            "Nous sommes allés au cinéma hier avec elle, et nous partons l'année prochaine.",
            "Nous sommes allés au cinéma hier (7 May 2023) avec elle, et nous partons l'année prochaine (2024).",
        ),
        ('Il y a 3 jours, ce soir.', 'Il y a 3 jours (5 May 2023), ce soir (8 May 2023).'),
        (
            'Ayer fui al cine y mañana vamos a Madrid con mi hermano, pero esta mañana llovió.',
            'Ayer (7 May 2023) fui al cine y mañana (9 May 2023) vamos a Madrid con mi hermano, pero esta mañana '
            'llovió.',
        ),
        ('Ieri, domani, il mese scorso.', 'Ieri (7 May 2023), domani (9 May 2023), il mese scorso (April 2023).'),
        ('Ontem, amanhã, no ano passado.', 'Ontem (7 May 2023), amanhã (9 May 2023), no ano passado (2022).'),
        (
            'Gisteren, morgen, volgende week.',
            'Gisteren (7 May 2023), morgen (9 May 2023), volgende week (the week after 8 May 2023).',
        ),
        ('Igår, i morgon, förra året.', 'Igår (7 May 2023), i morgon (9 May 2023), förra året (2022).'),
        ('Вчера, завтра, 3 дня назад.', 'Вчера (7 May 2023), завтра (9 May 2023), 3 дня назад (5 May 2023).'),
        ('Wczoraj, jutro, w zeszłym roku.', 'Wczoraj (7 May 2023), jutro (9 May 2023), w zeszłym roku (2022).'),
        ('Vor 2 Wochen, vor 3 Monaten.', 'Vor 2 Wochen (2 weeks before 8 May 2023), vor 3 Monaten (February 2023).'),
        ('Il y a 1 semaine, hace 2 meses.', 'Il y a 1 semaine (1 week before 8 May 2023), hace 2 meses (March 2023).'),
        # Chinese, Japanese and Korean write no space around them
        ('我们昨天讨论了，下周再开会。', '我们昨天 (7 May 2023)讨论了，下周 (the week after 8 May 2023)再开会。'),
        ('昨日は先月の話をしました。', '昨日 (7 May 2023)は先月 (April 2023)の話をしました。'),
        (
            '어제는 서울에, 다음 주에 부산에.',
            '어제 (7 May 2023)는 서울에, 다음 주 (the week after 8 May 2023)에 부산에.',
        ),
    ],
)
def test_expressions_of_other_languages_are_anchored(text: str, expected: str) -> None:
    assert anchor_text(text, MONDAY) == expected


def test_words_that_mean_something_else_elsewhere_are_left_alone() -> None:
    """German `Morgen` is "morning" and German `hier` "here"; `mañana` is also "morning" and an English word: the
    French `hier` and the Spanish `mañana` are read only in a text taken for French or Spanish."""
    for text in (
        'Hier ist es schön, jeden Morgen.',
        'The mañana attitude of the Morgen Stanley report.',
        'Hier is the French word we learned.',
    ):
        assert anchor_text(text, MONDAY) == text


@pytest.mark.parametrize(
    ('text', 'expected'),
    [
        ('Letzten Samstag', 'Letzten Samstag (the Saturday before 8 May 2023)'),
        (
            'samedi dernier, lundi prochain',
            'samedi dernier (the Saturday before 8 May 2023), lundi prochain (the Monday after 8 May 2023)',
        ),
        ('el próximo lunes', 'el próximo lunes (the Monday after 8 May 2023)'),
        ('na próxima segunda-feira', 'na próxima segunda-feira (the Monday after 8 May 2023)'),
        ('I lördags', 'I lördags (the Saturday before 8 May 2023)'),
        ('В прошлую субботу', 'В прошлую субботу (the Saturday before 8 May 2023)'),
        ('w zeszłą sobotę', 'w zeszłą sobotę (the Saturday before 8 May 2023)'),
        ('i lördag, el sábado', 'i lördag, el sábado'),  # "on Saturday": which one is not said
    ],
)
def test_weekdays_of_other_languages_are_anchored(text: str, expected: str) -> None:
    assert anchor_text(text, MONDAY) == expected
