"""Stop words of the languages besides English that people most often write to agents in, and which of them a text
is written in.

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
from typing import Final

__all__ = ('LANGUAGES', 'MIN_MARKERS', 'SHORT_WORDS', 'languages_of', 'stopwords_of')


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

_NOT_MARKERS: Final = _words(
    """à ale alla allen also als ante att aus aux bin car che chi com come comment como con contra dal dan das dat
    degli dei del della delle dello dem den der des det die dies dont door dos dove era est fare had han hans har
    has hat hay hoe ins las lei
    les los man mas med men met mia mig min mina mis mit mitt mon mot mucho nada nam nas nic non nos nun ono
    ons one over par para per plus pod poi por pour qual que sans sea sedan seine sem ser sia sig sin som son sous
    sue sur sus tem ten tes till todo ton tot tout tra una under uno van var vid von war was wat will"""
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

LANGUAGES: Final = tuple(_STOPWORDS)
"""The languages with stop words here, by ISO 639-1 code."""

MIN_MARKERS: Final = 3
"""Distinct markers of a language a text must hold to be taken for it: a German sentence of twenty words holds three
or more, and an English text of a few hundred may quote two (`sono`, `una`)."""
SHORT_WORDS: Final = 40
"""A text of fewer words needs one marker less: `Peux-tu vérifier si la tâche cron tourne encore ? Je ne vois pas de
nouveaux fichiers.` holds two. None of the 9,000 English turns and messages of this length in the shared data holds
two markers of one language."""

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


_ANY_MARKER: Final = frozenset().union(*_MARKERS.values())


@functools.cache
def stopwords_of(languages: tuple[str, ...]) -> frozenset[str]:
    """The stop words of `languages` together (a tuple from `languages_of`, so that it can be cached)."""
    return frozenset().union(*(_STOPWORDS[language] for language in languages))
