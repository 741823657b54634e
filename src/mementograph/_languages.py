"""Stop words of the languages besides English that people most often write to agents in, which of them a text is
written in, and how they say when (`RELATIVE_DAYS`, `RELATIVE_SPANS`, `UNITS_AGO`, `MONTHS`).

English stop words are the entity extractor's own (`STOPWORDS`). A text in German gave `und`, `der` and `ist` as
concepts and page topics, and `Das Skript` as a name, because nothing said they were function words. Their lists
cannot simply join the English one: `die`, `war`, `hat`, `son` and `come` are English words, `del` is Python's and
`todo` is every codebase's. So a list applies only to a text that is in its language: one that holds at least
`MIN_MARKERS` of the language's markers (one less in a short text), the function words that English text and code
do not use. Checked on the shared LoCoMo, LongMemEval and agent-trajectory data: of their 5,565 sessions and
messages, the 8 taken for another language quote passages in it, such as a German lesson's `Ich verstehe nicht`.
"""

from __future__ import annotations

import functools
import re
from typing import Final

__all__ = (
    'LANGUAGES',
    'MIN_MARKERS',
    'MONTHS',
    'RELATIVE_DAYS',
    'RELATIVE_SPANS',
    'SHORT_WORDS',
    'UNITS_AGO',
    'WEEKDAY_AFTER',
    'WEEKDAY_BEFORE',
    'WEEKDAY_NUMBERS',
    'languages_of',
    'phrase_pattern',
    'stopwords_of',
    'unit_of',
)


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_STOPWORDS: Final[dict[str, frozenset[str]]] = {
    'de': _words(
        """aber alle allem allen aller alles als also am an ander andere anderem anderen anderer anderes auch auf aus
        bei beim bin bis bist da dabei dadurch daher damit dann darum das dass dein deine dem den denn der des dessen
        deshalb die dies diese diesem diesen dieser dieses doch dort du durch ein eine einem einen einer eines einige
        einigen er es etwas euch euer eure für gegen gewesen hab habe haben hat hatte hatten hier hin hinter ich ihm
        ihn ihnen ihr ihre ihrem ihren ihrer im in indem ins ist jede jedem jeden jeder jedes jetzt kann kein keine
        keinem keinen keiner können könnte man manche mein meine meinem meinen meiner mich mir mit muss musste nach
        nicht nichts noch nun nur ob oder ohne schon sehr sein seine seinem seinen seiner seit sich sie sind so solche
        soll sollte sondern sonst über um und uns unser unsere unter viel vom von vor wann war waren warum was weg
        weil weiter welche welchem welchen welcher wenn wer werde werden wie wieder will wir wird wirst wo wollen
        wollte wurde wurden würde würden zu zum zur zwar zwischen"""
    ),
    'fr': _words(
        """à ai aie alors as au aucun aussi autre aux avais avait avec avez avoir avons ayant bien c ça car ce ceci
        cela celle celles celui ces cet cette ceux chaque comme comment d dans de déjà des donc dont du elle elles
        en encore es est et étaient était étant été être eu eux fait faire fais j je jusqu l la le les leur leurs
        lui m ma mais me même mes moi mon n ne ni nos notre nous on ont ou où par pas peu peut plus pour pourquoi
        qu quand que quel quelle quelles quels qui s sa sans se ses si sien soi son sont sous suis sur t ta te tes
        toi ton tous tout toute toutes très tu un une vers vos votre vous y"""
    ),
    'es': _words(
        """a ahora al algo algunas algunos ante antes aquí así aunque bien como cómo con contra cual cuando cuándo de del desde donde dónde durante e el entonces
        él ella ellas ellos en entre era eran es esa esas ese eso esos esta está estaba estaban estado están estas
        este esto estos estoy fue fueron fui ha hace hacer había habían han has hasta hay hemos la las le les lo los me mi mí mis
        mucho muy más nada ni no nos nosotros o os otra otras otro otros para pero poco por porque qué que quien
        se sea ser si sí siempre sido sin sobre son su sus también tanto te tengo tiene tienen todo todos tu tú tus un una
        uno unos y ya yo"""
    ),
    'it': _words(
        """a abbiamo ad agli ai al alla alle allo anche avere aveva avevo c che chi ci come con cosa così cui da dal
        dalla dalle dei del della delle dello degli di dove e è ed era erano essere fa fare gli ha hai hanno ho i il
        in io l la le lei li lo loro lui ma mi mia mie miei mio molto ne nei nel nella nelle no noi non nostro
        nostra o per perché più poi quale quando quella quelle quello questa queste questo qui se sei si sia siamo
        siete sono su sua sue sui sul sulla suo suoi ti tra tu tua tuo tutti tutto un una uno vi voi"""
    ),
    'pt': _words(
        """a à ao aos as até com como da das de dela dele deles do dos e é ela elas ele eles em entre era essa esse
        esta está estão este eu foi foram há isso isto já lhe mais mas me meu minha muito na nas não nem no nos nós
        o os ou para pela pelas pelo pelos por qual quando que quem se sem ser seu seus sua suas são só também te
        tem têm tinha um uma você vocês"""
    ),
    'nl': _words(
        """aan al als bij dan dat de der deze die dit door een en er had heb hebben heeft het hij hoe hun ik in is je
        kan maar me met mij mijn na naar niet niets nog nu of om onder ons ook op over te tot u uit uw van veel voor
        was wat we wel werd wie wij wil worden zal ze zei zelf zich zij zijn zo zonder zou"""
    ),
    'sv': _words(
        """alla allt att av blev bli blir de dem den denna deras dess det detta du där efter ej eller en er era ett
        från för ha hade han hans har henne hennes hon honom hur här i icke ingen inom inte jag ju kan kunde man med
        mellan men mig min mina mitt mot mycket ni nu när någon något några och om oss på samma sedan sig sin sina
        själv skulle som så sådan till under upp ut utan vad var vara varit vi vid vilken vår våra vårt än är åt
        över"""
    ),
    'ru': _words(
        """а без более больше будет будто бы был была были было быть в вам вас ведь во вот впрочем все всегда всего
        всех всю вы где да даже для до другой его ее её ей ему если есть еще ещё же за зачем здесь и из или им иногда
        их к как какая какой когда конечно кто куда ли лучше между меня мне много может можно мой моя мы на над надо
        наконец нас не него нее неё ней нельзя нет ни нибудь никогда ним них ничего но ну о об один он она они опять
        от перед по под после потом потому почти при про раз разве с сам свою себе себя сейчас со совсем так также
        такой там тебя тем теперь то тогда того тоже только том тот три тут ты у уже уж хорошо хоть чего чем через
        что чтоб чтобы чуть эти этого этой этом этот эту я"""
    ),
    'pl': _words(
        """a aby ale bardziej bardzo bez bo być był była było byli będzie co czy dla dlaczego do gdy gdzie go i ich ile
        im ja jak jako je jednak jego jej jest jeszcze jeśli już ją które który która kto ma mi mnie może mu na nad
        nam nas nawet nie nic nich niż o od ona one oni ono oraz po pod potem przez przy się są ta tak także tam te
        tego tej ten teraz też to tu tutaj tych tylko tym u w we więc wszystko wtedy z za zawsze ze że żeby"""
    ),
}

_CHAT_WORDS: Final[dict[str, frozenset[str]]] = {
    'de': _words('danke dank bitte hallo tschüss super toll klasse prima genial cool genau klar okay ja nein schön'),
    'fr': _words('merci bonjour salut super génial parfait bravo formidable magnifique oui non'),
    'es': _words('gracias hola genial perfecto estupendo increíble felicidades vale sí claro bueno'),
    'it': _words('grazie ciao perfetto fantastico bravo complimenti certo sì bello'),
    'pt': _words('obrigado obrigada olá ótimo legal perfeito parabéns incrível sim claro'),
    'nl': _words('bedankt dankjewel hoi hallo leuk prima gefeliciteerd natuurlijk ja nee'),
    'sv': _words('tack hej kul härligt toppen grattis ja nej'),
    'ru': _words('спасибо привет отлично супер здорово класс хорошо поздравляю да нет'),
    'pl': _words('dzięki dziękuję cześć super świetnie dobrze gratulacje jasne tak'),
}
"""Thanks, greetings and praise: what a chat says around its facts, no more an entity or a memento's weight than a
function word. Not markers: `super`, `bravo` and `hallo` are English too."""

_NOT_MARKERS: Final = _words(
    """à ale alla allen also als ante att aus aux bin car che chi com come comment como con contra dal dan das dat
    degli dei del della delle dello dem den der des det die dies dont door dos dove era est fare had han hans har
    has hat hay hoe ins las lei les los man mas med men met mia mig min mina mis mit mitt mon mot mucho nada nam nas
    nic non nos nun ono ons one over par para per plus pod poi por pour qual que sans sea sedan seine sem ser sia sig
    sin som son sous sue sur sus tem ten tes till todo ton tot tout tra una under uno van var vid von war was wat
    will"""
)
"""Words of the lists above that English text or code also uses (`will`, `war`, `del`, `todo`, `plus`, `comment`,
`sedan`, `mit`): they are stop words of a text in their language, but say nothing of which language a text is in.
Most were found in more than two texts of the shared English data; the rest (`sans`, `uno`, `tout`) are English or
code words by sight, or particles of names (`Piazza della Repubblica`, `Ludwig von Mises`)."""

_MARKERS: Final[dict[str, frozenset[str]]] = {
    language: frozenset(word for word in words if word not in _NOT_MARKERS and (len(word) >= 3 or not word.isascii()))
    for language, words in _STOPWORDS.items()
}
"""What tells a language: its stop words but those of `_NOT_MARKERS` and the short ASCII ones (`er`, `je`, `op`
are English or code fragments too); `ça`, `på` and the Cyrillic ones are kept."""

_ANY_MARKER: Final = frozenset().union(*_MARKERS.values())

LANGUAGES: Final = tuple(_STOPWORDS)
"""The languages with stop words here, by ISO 639-1 code."""

MIN_MARKERS: Final = 3
"""Distinct markers of a language a text must hold to be taken for it: a German sentence of twenty words holds three
or more, and an English text of a few hundred may quote two (`sono`, `una`)."""
SHORT_WORDS: Final = 40
"""A text of fewer words needs one marker less: `Peux-tu vérifier si la tâche cron tourne encore ? Je ne vois pas de
nouveaux fichiers.` holds two. None of the 8,994 English turns and messages of this length in the shared data holds
two markers of one language."""

# Relative time in the same nine languages, and the days, weeks, months and years of Chinese, Japanese and Korean
# (English is `_dates`' and the query planner's own): comma-separated
# expressions (regular-expression pieces, matched ignoring case), read by `phrase_pattern`. Only words that mean
# nothing else: `morgen` in lower case only (`Morgen` is German for "morning"); French `hier` (German and Dutch for
# "here") and Spanish `mañana` ("morning", and an English word) are left to `_dates`, which reads them only in a text
# taken for their language.
RELATIVE_DAYS: Final[dict[int, str]] = {
    -2: (
        "前天, 一昨日, 그저께, vorgestern, avant-hier, anteayer, antes de ayer, altroieri, l'altro ieri, anteontem, eergisteren,"
        'i förrgår, позавчера, przedwczoraj'
    ),
    -1: '昨天, 昨日, 어제, gestern, hier soir, hier matin, ayer, ieri, ontem, gisteren, igår, i går, вчера, wczoraj',
    0: (
        "今天, 今日, 오늘, heute morgen, heute früh, heute abend, heute, aujourd'hui, ce matin, ce soir, hoy, esta noche, oggi,"
        'stamattina, stasera, hoje, esta noite, vandaag, vanmorgen, vanavond, idag, i dag, ikväll, i kväll,'
        'сегодня, dzisiaj, dziś'
    ),
    1: '明天, 明日, 내일, (?-i:morgen), demain, domani, amanhã, imorgon, i morgon, завтра, jutro',
    2: (
        '后天, 明後日, 모레, übermorgen, après-demain, pasado mañana, dopodomani, depois de amanhã, overmorgen, i övermorgon,'
        'послезавтра, pojutrze'
    ),
}
"""A day by its offset from the day the text was written (-1: `gestern`, `вчера`)."""
RELATIVE_SPANS: Final[dict[tuple[str, int], str]] = {
    ('week', -1): (
        '上周, 上星期, 上个星期, 先週, 지난주, 지난 주, letzte Woche, vergangene Woche, la semaine dernière, la semaine passée, la semana pasada,'
        'la settimana scorsa, la scorsa settimana, a semana passada, na semana passada, vorige week,'
        'afgelopen week, förra veckan, на прошлой неделе, w zeszłym tygodniu, w ubiegłym tygodniu'
    ),
    ('week', 0): (
        '这周, 本周, 这个星期, 今週, 이번 주, 이번주, diese Woche, cette semaine, esta semana, questa settimana, deze week, den här veckan, denna vecka,'
        'на этой неделе, w tym tygodniu'
    ),
    ('week', 1): (
        '下周, 下星期, 下个星期, 来週, 다음 주, 다음주, nächste Woche, la semaine prochaine, la semana que viene, la próxima semana, la settimana prossima,'
        'la prossima settimana, a próxima semana, na próxima semana, volgende week, nästa vecka,'
        'на следующей неделе, w przyszłym tygodniu'
    ),
    ('month', -1): (
        '上个月, 先月, 지난달, 지난 달, letzten Monat, vergangenen Monat, le mois dernier, le mois passé, el mes pasado, il mese scorso,'
        'lo scorso mese, o mês passado, no mês passado, vorige maand, afgelopen maand, förra månaden,'
        'в прошлом месяце, w zeszłym miesiącu, w ubiegłym miesiącu'
    ),
    ('month', 0): (
        '这个月, 本月, 今月, 이번 달, 이번달, diesen Monat, ce mois-ci, este mes, questo mese, este mês, deze maand, den här månaden, denna månad,'
        'в этом месяце, w tym miesiącu'
    ),
    ('month', 1): (
        '下个月, 来月, 다음 달, 다음달, nächsten Monat, le mois prochain, el mes que viene, el próximo mes, il mese prossimo, il prossimo mese,'
        'o próximo mês, no próximo mês, volgende maand, nästa månad, в следующем месяце, w przyszłym miesiącu'
    ),
    ('year', -1): (
        "去年, 昨年, 작년, letztes Jahr, letzten Jahr, vergangenes Jahr, l'année dernière, l'an dernier, el año pasado,"
        "l'anno scorso, o ano passado, no ano passado, vorig jaar, afgelopen jaar, förra året, в прошлом году,"
        'w zeszłym roku, w ubiegłym roku'
    ),
    (
        'year',
        0,
    ): "今年, 올해, dieses Jahr, cette année, este año, quest'anno, este ano, dit jaar, i år, в этом году, w tym roku",
    ('year', 1): (
        "明年, 来年, 내년, nächstes Jahr, l'année prochaine, l'an prochain, el año que viene, el próximo año, l'anno prossimo,"
        'il prossimo anno, o próximo ano, no próximo ano, volgend jaar, nästa år, в следующем году,'
        'w przyszłym roku'
    ),
}
"""A week, month or year by its offset from the one the text was written in (`('week', -1)`: `letzte Woche`)."""
UNITS_AGO: Final = (
    r'vor (?P<n>\d{1,3}) (?P<unit>Tag|Woche|Monat)\w*',
    r'il y a (?P<n>\d{1,3}) (?P<unit>jour|semaine|mois)\w*',
    r'hace (?P<n>\d{1,3}) (?P<unit>día|semana|mes)\w*',
    r'(?P<n>\d{1,3}) (?P<unit>giorn|settiman|mes)\w* fa',
    r'há (?P<n>\d{1,3}) (?P<unit>dia|semana|mês|mes)\w*',
    r'(?P<n>\d{1,3}) (?P<unit>dag|wek|maand)\w* geleden',
    r'för (?P<n>\d{1,3}) (?P<unit>dag|veck|månad)\w* sedan',
    r'(?P<n>\d{1,3}) (?P<unit>д|недел|месяц)\w* назад',
    r'(?P<n>\d{1,3}) (?P<unit>dn|dzie|tydzie|tygodn|miesi)\w* temu',
)
"""`N` days, weeks or months ago, one pattern a language: the count in `n`, the unit's stem in `unit` (`unit_of`)."""
_UNIT_STEMS: Final = {
    'day': ('tag', 'jour', 'día', 'giorn', 'dia', 'dag', 'д', 'dn', 'dzie'),
    'week': ('woche', 'semaine', 'semana', 'settiman', 'wek', 'veck', 'недел', 'tydzie', 'tygodn'),
    'month': ('monat', 'mois', 'mes', 'mês', 'maand', 'månad', 'месяц', 'miesi'),
}


def unit_of(match: re.Match[str]) -> tuple[int, str]:
    """`(N, 'day' | 'week' | 'month')` of a `UNITS_AGO` match."""
    written = match.group('unit').lower()
    return int(match.group('n')), next(unit for unit, stems in _UNIT_STEMS.items() if written in stems)


WEEKDAY_NUMBERS: Final[dict[str, int]] = {
    name: number
    for number, names in enumerate(
        (
            'montag lundi lunes lunedì segunda maandag måndag måndags понедельник poniedziałek',
            'dienstag mardi martes martedì terça dinsdag tisdag tisdags вторник wtorek',
            'mittwoch mercredi miércoles mercoledì quarta woensdag onsdag onsdags среду среда środę środa',
            'donnerstag jeudi jueves giovedì quinta donderdag torsdag torsdags четверг czwartek',
            'freitag vendredi viernes venerdì sexta vrijdag fredag fredags пятницу пятница piątek',
            'samstag sonnabend samedi sábado sabato zaterdag lördag lördags субботу суббота sobotę sobota',
            'sonntag dimanche domingo domenica zondag söndag söndags воскресенье niedzielę niedziela',
        )
    )
    for name in names.split()
}
"""Weekday names of the nine languages, Monday 0, also as they read in "last Saturday" (`субботу`, `sobotę`, and
Swedish `i lördags`, which alone means last Saturday)."""
_DAY = '(?P<weekday>' + '|'.join(sorted(WEEKDAY_NUMBERS, key=len, reverse=True)) + ')(?:-feira)?'
WEEKDAY_BEFORE: Final = (
    f'(?:letzten|vergangenen) {_DAY}',
    f'{_DAY} (?:dernier|passé)',
    f'el {_DAY} pasado',
    f'{_DAY} scors[oa]',
    f'{_DAY} passad[oa]',
    f'(?:vorige|afgelopen) {_DAY}',
    f'i {_DAY}(?<=s)',
    f'в прошл(?:ый|ую|ое) {_DAY}',
    f'w (?:zeszły|zeszłą|ubiegły|ubiegłą) {_DAY}',
)
"""`last Saturday` in each language, the day in `weekday` (Swedish `i lördags`: its `-s` form only)."""
WEEKDAY_AFTER: Final = (
    f'nächsten {_DAY}',
    f'{_DAY} prochain',
    f'el {_DAY} que viene',
    f'el próximo {_DAY}',
    f'{_DAY} prossim[oa]',
    f'(?:il prossimo|la prossima) {_DAY}',
    f'(?:na próxima|no próximo) {_DAY}',
    f'volgende {_DAY}',
    f'nästa {_DAY}',
    f'в следующ(?:ий|ую|ее) {_DAY}',
    f'w (?:przyszły|przyszłą) {_DAY}',
)
"""`next Saturday` in each language, the day in `weekday`."""
MONTHS: Final[dict[str, tuple[str, tuple[str, ...]]]] = {
    language: (prepositions, tuple(names.split()))
    for language, prepositions, names in (
        ('de', 'im', 'januar februar märz april mai juni juli august september oktober november dezember'),
        ('fr', 'en', 'janvier février mars avril mai juin juillet août septembre octobre novembre décembre'),
        ('es', 'en', 'enero febrero marzo abril mayo junio julio agosto septiembre octubre noviembre diciembre'),
        ('it', 'a|in', 'gennaio febbraio marzo aprile maggio giugno luglio agosto settembre ottobre novembre dicembre'),
        ('pt', 'em', 'janeiro fevereiro março abril maio junho julho agosto setembro outubro novembro dezembro'),
        ('nl', 'in', 'januari februari maart april mei juni juli augustus september oktober november december'),
        ('sv', 'i', 'januari februari mars april maj juni juli augusti september oktober november december'),
        ('ru', 'в', 'январе феврале марте апреле мае июне июле августе сентябре октябре ноябре декабре'),
        (
            'pl',
            'w',
            'styczniu lutym marcu kwietniu maju czerwcu lipcu sierpniu wrześniu październiku listopadzie grudniu',
        ),
    )
}
"""Each language's preposition of "in March" and its twelve month names as they read after it (`im März`,
`в марте`, `w marcu`)."""


def phrase_pattern(expressions: str) -> str:
    """A regular expression of comma-separated `expressions` (spaces inside one kept), longest first, an apostrophe
    read as either a straight or a curly one, each a whole word (`\\b`: not `yesterdays`) but a Chinese, Japanese or
    Korean one, which touches the words around it as those languages write (`我们昨天讨论`, `어제는`). (A boundary
    class of their characters would do both in one pattern, but compiling it costs ~13 ms a pattern, at import.)"""
    ordered = sorted((part.strip() for part in expressions.split(',')), key=len, reverse=True)
    return '|'.join(
        part if part[0] >= '\u3000' else rf'\b(?:{part})\b'  # from U+3000 on: Chinese, Japanese, Korean
        for part in (p.replace("'", "['\\u2019]") for p in ordered)
    )


_SEPARATORS: Final = str.maketrans(
    {mark: ' ' for mark in '.,;:!?()[]{}"\'\u00ab\u00bb\u201c\u201d\u201e\u2019/\\<>=*#`|'}
)
"""Punctuation that touches words, made space: `und,` and `(nicht` are markers too. Splitting on it is 4x faster than
a word pattern (~75 against ~300 µs for 5 KB), and the extractor asks this of every block and memento."""


def languages_of(text: str) -> tuple[str, ...]:
    """The languages (besides English) `text` is written in, by the markers it holds: `()` for English or code."""
    words = text.lower().translate(_SEPARATORS).split()
    needed = MIN_MARKERS if len(words) >= SHORT_WORDS else MIN_MARKERS - 1
    distinct = set(words)
    if len(distinct & _ANY_MARKER) < needed:
        return ()
    return tuple(language for language in LANGUAGES if len(distinct & _MARKERS[language]) >= needed)


@functools.cache
def stopwords_of(languages: tuple[str, ...]) -> frozenset[str]:
    """The stop words of `languages` together (a tuple from `languages_of`, so that it can be cached)."""
    return frozenset().union(*(_STOPWORDS[language] | _CHAT_WORDS[language] for language in languages))
