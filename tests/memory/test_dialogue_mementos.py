"""Conversation blocks get dialogue mementos: both speakers' facts, verbatim, dates made absolute and accepted by
the judge exactly as the resolver derives them."""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone, tzinfo

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from mementograph._tokens import TokenCounter
from mementograph.knowledge_graph.memory import (
    DIMENSIONS,
    BlockInput,
    ExtractiveCompressor,
    LLMCompressor,
    LLMJudge,
    MementoEngine,
    RubricJudge,
    time_zone,
)
from mementograph.knowledge_graph.memory._dates import in_zone
from mementograph.knowledge_graph.memory._dialogue import derived_anchors, dialogue_memento, is_dialogue, model_view

from ._build import bash, block_of, debugging_block, observation, say, user

COUNTER = TokenCounter()
SESSION = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def turn(role: str, text: str, index: int) -> ModelMessage:
    stamp = SESSION + timedelta(seconds=30 * index)
    if role == 'user':
        return ModelRequest(parts=[UserPromptPart(text, timestamp=stamp)])
    return ModelResponse(parts=[TextPart(text)], timestamp=stamp)


def conversation(*texts: str) -> BlockInput:
    """A block of turns alternating between the user and the assistant, 30 s apart."""
    return BlockInput.from_messages(
        [turn('user' if i % 2 == 0 else 'assistant', text, i) for i, text in enumerate(texts)], COUNTER
    )


def chat() -> BlockInput:
    texts = [
        ('user', 'Caroline: Hey Mel! Good to see you! How have you been?'),
        ('assistant', "Melanie: Hey Caroline! Good to see you! I'm swamped with the kids & work. What's up with you?"),
        ('user', 'Caroline: I went to a LGBTQ support group yesterday and it was so powerful.'),
        ('assistant', 'Melanie: Wow, that sounds great! Thanks for sharing, Caroline. You are so brave!'),
        ('user', 'Caroline: Thanks, Mel! That means a lot. What did you do?'),
        ('assistant', "Melanie: Oh, nothing much, just the usual! It's been a busy few days, to be honest."),
        ('user', "Caroline: I hear you, Mel. Busy is good though! I'm glad you're doing well. Tell me more!"),
        (
            'assistant',
            'Melanie: Awesome! I ran a charity race for mental health last Saturday with my sister Anna. '
            'We are camping in the mountains next month.',
        ),
    ]
    return BlockInput.from_messages([turn(role, text, i) for i, (role, text) in enumerate(texts)], COUNTER)


@pytest.fixture(scope='module')
def memento() -> str:
    # a roomier target than the default, so that both speakers' statements fit
    return ExtractiveCompressor(counter=COUNTER, dialogue_ratio=0.3).extract(chat())


def test_dialogue_memento_keeps_both_speakers_facts_with_absolute_dates(memento: str) -> None:
    lines = memento.splitlines()
    assert 'Caroline: I went to a LGBTQ support group yesterday (7 May 2023) and it was so powerful.' in memento
    assert 'Melanie: I ran a charity race for mental health last Saturday (the Saturday before 8 May 2023)' in memento
    # every line is one speaker's verbatim sentences, in turn order, with no `RESULT:` label (no outcome to lead)
    assert all(line.startswith(('Caroline: ', 'Melanie: ')) for line in lines)
    assert memento.index('Caroline: I went') < memento.index('Melanie: I ran')


def test_chit_chat_is_left_out(memento: str) -> None:
    for chatter in ('Good to see you', 'Thanks', 'You are so brave', 'What did you do?', 'How have you been?'):
        assert chatter not in memento


def test_dialogue_memento_is_verified_and_small(memento: str) -> None:
    block = chat()
    verdict = RubricJudge(counter=COUNTER).check(block, memento)
    assert verdict.passed and verdict.invented == ()
    assert COUNTER.count_text(memento) < 0.5 * block.tokens


def test_judge_accepts_exactly_the_derived_anchors(memento: str) -> None:
    block = chat()
    assert 'yesterday (7 May 2023)' in derived_anchors(block.messages)
    judge = RubricJudge(counter=COUNTER)
    wrong_day = memento.replace('yesterday (7 May 2023)', 'yesterday (6 May 2023)')
    assert wrong_day != memento
    verdict = judge.check(block, wrong_day)
    assert not verdict.passed and 'anchor: (6 May 2023)' in verdict.invented
    # a right date after the wrong expression is not derived either
    moved = memento.replace('yesterday (7 May 2023)', 'yesterday').replace(
        'mental health', 'mental health (7 May 2023)'
    )
    assert not judge.check(block, moved).passed
    # the anchors are derived from the timestamps: without them the same memento invents dates
    bare = BlockInput((), block.text, block.tokens)
    assert not judge.check(bare, memento).passed


def test_wrong_anchor_shapes_are_rejected_even_when_their_numbers_are_in_the_block() -> None:
    block = BlockInput.from_messages(
        [turn('user', 'Ann: We moved in 2022 and I started 12 May 2023 at the lab yesterday.', 0)], COUNTER
    )
    good = 'RESULT: Ann: I started 12 May 2023 at the lab yesterday (7 May 2023).'
    bad = 'RESULT: Ann: I started 12 May 2023 at the lab yesterday (the week before 12 May 2023).'
    judge = RubricJudge(counter=COUNTER)
    assert judge.check(block, good).invented == ()
    assert 'anchor: (the week before 12 May 2023)' in judge.check(block, bad).invented


def test_role_is_the_speaker_when_turns_are_unnamed() -> None:
    block = block_of(
        [
            user('Which database should the billing service use? We compared Postgres and DynamoDB last week.'),
            say('The team chose Postgres because the invoices need joins across 14 tables. Great question!'),
        ],
        COUNTER,
    )
    assert is_dialogue(block)
    memento = ExtractiveCompressor(counter=COUNTER).extract(block)
    assert memento.startswith(('user: ', 'assistant: '))
    assert 'assistant: ' in memento and '14 tables' in memento
    assert RubricJudge(counter=COUNTER).check(block, memento).passed


def test_a_dialogue_memento_leads_with_a_speaker_of_its_block() -> None:
    block = chat()
    judge = RubricJudge(counter=COUNTER)
    line = 'Caroline: I went to a LGBTQ support group yesterday (7 May 2023) and it was so powerful.'
    assert judge.check(block, line).dimensions['result_first'] == 1.0
    assert judge.check(block, f'RESULT: {line}').dimensions['result_first'] == 1.0
    # a line of nobody in the block, or an agent trace's memento without its label, does not lead
    stranger = judge.check(block, line.replace('Caroline', 'Bob'))
    assert stranger.dimensions['result_first'] == 0.0 and 'a line of one of its speakers' in stranger.feedback
    trace = debugging_block(COUNTER)
    assert judge.check(trace, 'assistant: the fix works').dimensions['result_first'] == 0.0


def test_agent_trace_blocks_are_not_dialogue() -> None:
    assert not is_dialogue(debugging_block(COUNTER))
    assert not is_dialogue(block_of([user('run it'), bash('ls', 'c1'), observation('c1', 'a.py', 0)], COUNTER))
    fenced = block_of([user('Fix this:\n```python\nx = 1\n```'), say('Done, it works now.')], COUNTER)
    assert not is_dialogue(fenced)
    assert not is_dialogue(BlockInput((), 'Caroline: hello there friend', 10))


def test_agent_trace_mementos_keep_their_format() -> None:
    memento = ExtractiveCompressor(counter=COUNTER).extract(debugging_block(COUNTER))
    assert 'COMMANDS:' in memento and ' -> exit 1' in memento
    assert not any(line.startswith(('user: ', 'assistant: ')) for line in memento.splitlines())


def test_judge_feedback_pins_a_missing_fact() -> None:
    block = chat()
    compressor = ExtractiveCompressor(counter=COUNTER, dialogue_ratio=0.15)
    first = compressor.extract(block)
    assert 'mountains' not in first
    feedback = 'rubric score 6/10\nMISSING (copy verbatim from the block):\n- identifier: camping in the mountains'
    refined = compressor.extract(block, feedback=feedback, previous=first)
    assert 'We are camping in the mountains next month (June 2023).' in refined
    assert RubricJudge(counter=COUNTER).check(block, refined).invented == ()


async def test_engine_verifies_dialogue_mementos() -> None:
    engine = MementoEngine(ExtractiveCompressor(counter=COUNTER), RubricJudge(counter=COUNTER), counter=COUNTER)
    result = await engine.make_memento(chat())
    assert result.verified and result.iterations == 0
    assert 'last Saturday (the Saturday before 8 May 2023)' in result.text
    assert result.tokens < chat().tokens


def test_a_block_the_dialogue_path_cannot_fit_falls_back_to_the_agent_trace_path() -> None:
    block = BlockInput.from_messages(
        [turn('user', 'Caroline: I moved to Berlin in 2019 with my two cats and a grand piano.', 0)], COUNTER
    )
    assert is_dialogue(block)
    limit = block.tokens // 2
    assert dialogue_memento(block, budget=5, limit=limit, pinned=set(), count=COUNTER.count_text) == ''
    memento = ExtractiveCompressor(counter=COUNTER).extract(block)
    assert '2019' in memento and COUNTER.count_text(memento) < block.tokens
    assert RubricJudge(counter=COUNTER).check(block, memento).passed


def test_a_turn_with_two_spaces_after_its_speaker_leaves_every_line_named() -> None:
    """LoCoMo writes `John:  I was ...` at times: that one turn read as unnamed left every turn of its block to its
    role, so a line read `user: My sister Ann ...` (the name, at the turn's start, not in the sentence kept)."""
    block = BlockInput.from_messages(
        [
            turn('user', 'John: Hey Maria! How was your week?', 0),
            turn('assistant', 'Maria: Congrats! I started volunteering at the shelter on Fifth Street last week.', 1),
            turn('user', 'John:  Thanks! My sister Ann moved to Fort Wayne in March with her two dogs.', 2),
            turn('assistant', 'Maria: Wow! My brother Tom joins the shelter in June, he is a nurse.', 3),
        ],
        COUNTER,
    )
    memento = ExtractiveCompressor(counter=COUNTER, dialogue_ratio=0.6).extract(block)
    lines = memento.splitlines()
    assert all(line.startswith(('John: ', 'Maria: ')) for line in lines), memento
    assert 'John: My sister Ann moved to Fort Wayne in March' in memento
    assert RubricJudge(counter=COUNTER).check(block, memento).passed
    # what an LLM compressor or judge reads of the block names both speakers too
    assert model_view(block).splitlines()[1:3] == [
        'Maria: Congrats! I started volunteering at the shelter on Fifth Street last week (the week before 8 May 2023).',
        'John: Thanks! My sister Ann moved to Fort Wayne in March with her two dogs.',
    ]


@pytest.mark.parametrize(
    ('text', 'expected'),
    [
        (
            'Maria: Thanks! I appreciate your kind words. Gotta stay strong and keep making a difference, even in '
            'challenging times.',
            'RESULT: Maria: I appreciate your kind words.',
        ),
        ('Maria: I appreciate your kind words! Gotta stay strong, even in hard times.', None),  # named already
        (  # no names: the roles are the speakers, and a trace's lines carry none
            'Thanks! I appreciate your kind words. Gotta stay strong and keep making a difference, even in '
            'challenging times.',
            'RESULT: I appreciate your kind words.',
        ),
    ],
)
def test_a_conversation_on_the_agent_trace_path_says_who_said_its_lines(text: str, expected: str | None) -> None:
    """A closing turn too small for a dialogue memento takes the agent-trace path; its result line quotes a
    sentence past the turn's first, which held the name, so the line (and the page summary made of it) said
    nobody's words."""
    block = BlockInput.from_messages([turn('assistant', text, 0)], COUNTER)
    memento = ExtractiveCompressor(counter=COUNTER).extract(block)
    assert memento.startswith('RESULT: ')  # the agent-trace path
    if expected is None:
        assert memento.startswith('RESULT: Maria: ') and 'Maria: Maria:' not in memento
    else:
        assert memento == expected
    assert RubricJudge(counter=COUNTER).check(block, memento).passed
    assert COUNTER.count_text(memento) < block.tokens


def test_titles_do_not_end_a_sentence() -> None:
    block = block_of(
        [
            user('I see my neurologist, Dr. Johnson, on April 1st about the numbness in my left hand.'),
            say(
                'That is a good plan. An EMG test measures the electrical activity of muscles and nerves. '
                'It usually takes 30 to 60 minutes. Wear loose clothing and avoid lotions on the day of the test.'
            ),
        ],
        COUNTER,
    )
    memento = dialogue_memento(
        block, budget=block.tokens // 2, limit=block.tokens - 1, pinned=set(), count=COUNTER.count_text
    )
    assert 'user: I see my neurologist, Dr. Johnson, on April 1st about the numbness in my left hand.' in memento


def test_relative_dates_are_read_on_the_block_s_clock() -> None:
    """pydantic-ai stamps messages in UTC: 13:56 UTC on 8 May is already 9 May at UTC+11, where "yesterday" meant
    8 May. Compressor and judge read the same clock."""
    east = replace(chat(), zone=timezone(timedelta(hours=11)))
    memento = ExtractiveCompressor(counter=COUNTER, dialogue_ratio=0.3).extract(east)
    assert 'support group yesterday (8 May 2023)' in memento
    judge = RubricJudge(counter=COUNTER)
    assert judge.check(east, memento).passed
    assert not judge.check(chat(), memento).passed  # on UTC's clock, (8 May 2023) is invented


def test_time_zone_settings() -> None:
    assert time_zone(None) is None and time_zone('UTC') is None and time_zone('utc') is None
    assert time_zone('local') == 'local'
    paris = time_zone('Europe/Paris')
    assert isinstance(paris, tzinfo) and datetime(2023, 5, 8, 23, 30, tzinfo=UTC).astimezone(paris).day == 9
    with pytest.raises(ValueError, match=r"unknown time zone 'Mars/Olympus_Mons'.*IANA name"):
        time_zone('Mars/Olympus_Mons')
    late = datetime(2023, 5, 8, 23, 30, tzinfo=UTC)
    assert in_zone(late, None) is late and in_zone(late.replace(tzinfo=None), paris).day == 8  # naive: as it is


async def test_llm_compressor_and_judge_read_a_conversation_with_its_dates_resolved() -> None:
    prompts: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompts.append(str(messages[-1].parts[-1].content))  # type: ignore[union-attr]
        if '<memento>' in prompts[-1]:  # the judge's request
            args: dict[str, object] = dict.fromkeys(DIMENSIONS, 0) | {'missing': [], 'invented': [], 'feedback': ''}
        else:
            args = {'result': 'Caroline: went to a LGBTQ support group yesterday (7 May 2023).'}
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, args)])

    block = chat()
    memento = await LLMCompressor(FunctionModel(model)).compress(block)
    # the model read the turns with their speakers and the dates it may copy, not the undated rendering
    assert 'Caroline: I went to a LGBTQ support group yesterday (7 May 2023) and it was so powerful.' in prompts[0]
    assert 'yesterday (7 May 2023)' not in block.text and 'resolved for you' in prompts[0]
    # a copied anchor is the resolver's own: the rubric accepts it, where a date of the model's making is invented
    judge = RubricJudge(counter=COUNTER)
    assert judge.check(block, memento).invented == ()
    assert judge.check(block, memento.replace('7 May', '6 May')).invented != ()
    await LLMJudge(FunctionModel(model)).judge(block, memento)
    assert 'yesterday (7 May 2023)' in prompts[-1] and '<memento>' in prompts[-1]
    # an agent trace is read as rendered
    trace = debugging_block(COUNTER)
    await LLMCompressor(FunctionModel(model)).compress(trace)
    assert trace.text in prompts[-1] and 'resolved for you' not in prompts[-1]


def test_a_chinese_conversation_keeps_its_facts() -> None:
    """Chinese sentences end at `。` with no space after it, clauses at `，`, and a fact ends where it does (the path
    below was `migrate.py里面`, and then not found in a sentence that holds it): the block gets a dialogue memento
    of a size an English one would have, which keeps the path."""
    block = BlockInput.from_messages(
        [
            turn(
                'user',
                '我们昨天讨论了数据库迁移的问题。我觉得应该先备份所有的订单数据，然后再把表结构改成新的格式。'
                '迁移脚本放在scripts/migrate.py里面，运行时间大约需要四十分钟。',
                0,
            ),
            turn(
                'assistant',
                '好的，我同意先备份。备份命令是pg_dump -Fc orders > orders.dump，我已经在测试环境上试过了。'
                '下周一上午十点我们再开会确认最终的上线时间。',
                1,
            ),
        ],
        COUNTER,
    )
    result = asyncio.run(MementoEngine().make_memento(block))
    assert result.verified
    assert result.text.startswith('user: ') and 'RESULT:' not in result.text  # the dialogue path, not its fallback
    assert 'scripts/migrate.py' in result.text
    assert result.tokens <= 0.3 * block.tokens
    # sentences and clauses of one turn are joined as the turn writes them: no space after a CJK stop or comma
    assert re.search('[\u3002\uff0c][^ ]', result.text) and not re.search('[\u3002\uff0c] ', result.text), result.text


def test_a_speaker_named_in_any_alphabet_labels_its_lines() -> None:
    block = BlockInput.from_messages(
        [
            turn('user', "Élodie: J'ai inscrit ma fille à l'école Jules-Ferry, la rentrée est le 4 septembre.", 0),
            turn('assistant', 'Øystein: Très bien! Nous partons à Oslo le 12 septembre avec le train de nuit.', 1),
        ],
        COUNTER,
    )
    memento = asyncio.run(MementoEngine().make_memento(block)).text
    assert memento.startswith(('Élodie: ', 'Øystein: ')), memento
    assert not re.search(r'^(?:user|assistant): ', memento, re.MULTILINE)


def test_function_words_of_another_language_weigh_nothing() -> None:
    """A French sentence of function words (`je`, `elle`, `avec`, `nous`, `mais`) counted as many new words as one
    that states a fact; they now weigh nothing, as English ones do, so the fact is what the memento keeps."""
    block = conversation(
        'Camille: Salut Hugo, tu as des nouvelles de ta sœur pour samedi soir ?',
        'Hugo: Je ne sais pas si elle est avec nous ou avec eux, mais nous verrons bien. '
        'Le chauffe-eau du garage fuit, le plombier passe jeudi matin.',
        "Camille: D'accord, merci beaucoup pour ton aide, à bientôt !",
    )
    result = asyncio.run(MementoEngine().make_memento(block))
    assert result.verified
    assert 'le plombier passe jeudi matin' in result.text
    assert 'nous verrons bien' not in result.text


def test_a_german_conversation_gets_its_dates_anchored_and_verified() -> None:
    block = conversation(
        'Lena: Hallo Jonas! Wie geht es dir? Wie war dein Wochenende?',
        'Jonas: Hallo Lena! Danke, mir geht es gut. Es war sehr schön, wirklich.',
        'Lena: Das freut mich sehr. Erzähl doch mal, was habt ihr gemacht?',
        'Jonas: Gestern sind wir auf die Zugspitze gestiegen, und nächste Woche fahren wir zum Gardasee.',
        'Lena: Wow, das klingt toll! Viel Spaß euch beiden.',
    )
    result = asyncio.run(MementoEngine().make_memento(block))
    assert result.verified
    assert 'Gestern (7 May 2023) sind wir auf die Zugspitze gestiegen' in result.text
    assert RubricJudge(counter=COUNTER).check(block, result.text).invented == ()
    assert RubricJudge(counter=COUNTER).check(block, result.text.replace('7 May', '6 May')).invented != ()


def test_a_stretched_budget_takes_dense_sentences_and_leaves_small_talk_out() -> None:
    block = chat()
    flat = ExtractiveCompressor(counter=COUNTER, dialogue_ratio=0.15).extract(block)
    assert 'support group' not in flat and 'charity race' in flat
    stretched = ExtractiveCompressor(counter=COUNTER, dialogue_ratio=0.15, dialogue_stretch=3.0).extract(block)
    # past the target, the statements of fact go in; greetings and praise stay out whatever the room
    assert 'LGBTQ support group yesterday (7 May 2023)' in stretched
    assert 'camping in the mountains next month (June 2023)' in stretched
    assert 'Busy is good' not in stretched and 'so brave' not in stretched
    assert COUNTER.count_text(stretched) <= 3 * 0.15 * block.tokens
    assert RubricJudge(counter=COUNTER).check(block, stretched).passed
    # a sentence must be worth `dialogue_dense_value` to go past the target: none is worth 100 per token
    strict = ExtractiveCompressor(counter=COUNTER, dialogue_ratio=0.15, dialogue_stretch=3.0, dialogue_dense_value=100)
    assert strict.extract(block) == flat


@pytest.mark.parametrize('settings', [{'dialogue_stretch': 0.5}, {'dialogue_dense_value': -1.0}])
def test_stretch_settings_are_validated(settings: dict[str, float]) -> None:
    with pytest.raises(ValueError, match='dialogue_stretch must be >= 1'):
        ExtractiveCompressor(**settings)  # type: ignore[arg-type]
