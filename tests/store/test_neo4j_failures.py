"""Bad input and bad days for the Neo4j backend: unreachable server, wrong credentials, a write aborted by the
server or cut off from it halfway. Each ends in a typed error, and a write either landed whole or not at all.

No mocks and no disruption of the shared server: aborts are real server-side `TERMINATE TRANSACTIONS`, and lost
connections go through a local TCP proxy this test owns and cuts.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any
from urllib.parse import urlsplit

import pytest
from neo4j import Driver, ManagedTransaction

from mementograph.knowledge_graph import (
    BlockRecord,
    EntityRecord,
    Eviction,
    MementoRecord,
    Mention,
    SessionEvent,
    entity_id_for,
    memento_id_for,
)
from mementograph.knowledge_graph.store import BlockNotFoundError, StoreUnavailableError, open_store
from mementograph.knowledge_graph.store._neo4j import Neo4jStore
from tests.builders import session_history
from tests.conftest import neo4j_uri_with_auth

pytestmark = pytest.mark.neo4j

LOCKED = EntityRecord(key='file:locked.py', name='locked.py', kind='file')


@pytest.fixture
def store(neo4j_store: Neo4jStore) -> Neo4jStore:
    return neo4j_store


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        return int(probe.getsockname()[1])


def test_unreachable_server_fails_fast_and_says_what_to_check(neo4j_server: dict[str, str]) -> None:
    neo4j_uri_with_auth(neo4j_server)
    uri = f'bolt://127.0.0.1:{_free_port()}'
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError) as caught:
        open_store(uri)
    message = str(caught.value)
    assert uri in message and 'server is running' in message and 'scripts/neo4j-server start' in message
    assert time.monotonic() - started < 15


def test_bad_credentials_say_where_credentials_come_from(neo4j_server: dict[str, str]) -> None:
    parts = urlsplit(neo4j_server['uri'])
    uri = f'{parts.scheme}://mementograph-nobody:not-the-password@{parts.hostname}:{parts.port}'
    with pytest.raises(StoreUnavailableError) as caught:
        open_store(uri)
    message = str(caught.value)
    assert 'rejected the credentials' in message and 'NEO4J_USERNAME' in message
    assert 'not-the-password' not in message  # the URI is reported without its secret


def test_a_missing_password_is_named(neo4j_server: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv('NEO4J_PASSWORD', raising=False)  # e.g. an MCP client that passes no environment
    with pytest.raises(StoreUnavailableError, match=r'^no Neo4j password was given \(set NEO4J_PASSWORD\); '):
        open_store(neo4j_server['uri'])


def test_a_misspelt_uri_option_is_refused(neo4j_server: dict[str, str]) -> None:
    with pytest.raises(ValueError, match=r"unknown store URI option query_timout in '.*': use database, query_limit, "):
        open_store(neo4j_server['uri'] + '?query_timout=1')


def test_a_password_in_a_malformed_uri_is_not_quoted() -> None:
    # refused before any connection is tried: no server needed
    for uri in ('neo4j://neo4j:hunter2@127.0.0.1:1?bogus=1', 'neo4jj://neo4j:hunter2@127.0.0.1:1'):
        with pytest.raises(ValueError) as refused:
            open_store(uri)
        assert (
            'hunter2' not in str(refused.value)
            and "'neo4j" in str(refused.value)
            and ':***@127.0.0.1:1' in str(refused.value)
        )


def test_a_query_bound_no_query_could_run_under_is_refused_at_open() -> None:
    # refused before any connection is tried: no server needed
    for option, message in (('query_limit=0', 'the row limit'), ('query_timeout=0', 'the timeout')):
        with pytest.raises(ValueError, match=rf'^store URI bolt://127\.0\.0\.1:1: {message} must be .*\?query_limit'):
            open_store(f'bolt://127.0.0.1:1?{option}')


def test_the_query_command_keeps_the_uris_row_limit(
    neo4j_server: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    from mementograph.cli import main

    parts = urlsplit(neo4j_server['uri'])
    uri = f'{parts.scheme}://{neo4j_server["user"]}:{neo4j_server["password"]}@{parts.hostname}:{parts.port}'
    assert main(['query', 'UNWIND range(1, 5) AS x RETURN x', '--store', f'{uri}?query_limit=2']) == 1
    assert 'more than 2 rows' in capsys.readouterr().err
    assert main(['query', 'UNWIND range(1, 5) AS x RETURN x', '--store', f'{uri}?query_limit=2', '--limit', '5']) == 0


def test_uri_credentials_are_used_and_hidden(neo4j_server: dict[str, str]) -> None:
    parts = urlsplit(neo4j_server['uri'])
    uri = f'{parts.scheme}://{neo4j_server["user"]}:{neo4j_server["password"]}@{parts.hostname}:{parts.port}'
    with open_store(uri) as opened:  # type: ignore[attr-defined]
        assert opened.uri == f'{parts.scheme}://{parts.hostname}:{parts.port}'
        assert opened.query('RETURN 1 AS one') == [{'one': 1}]


# -- a write that cannot finish ------------------------------------------------------------------------------------


def _seed(store: Neo4jStore, ns: str) -> None:
    """An entity the victim write will mention, written first so another transaction can hold its lock."""
    block = BlockRecord.from_messages(session_history(1), session_id='seed', namespace=ns, seq=0, tokens=10)
    store.write_eviction(
        Eviction(session_id='seed', namespace=ns, blocks=(block,), mentions=(Mention(block.id, LOCKED),))
    )


def _victim(ns: str, blocks: int = 60) -> Eviction:
    """A large eviction whose last statements need the locked entity: by the time it waits, it has written its
    blocks, mementos and NEXT chain (all uncommitted)."""
    records = [
        BlockRecord.from_messages(
            session_history(2, prefix=f'v{i}'), session_id='victim', namespace=ns, seq=i * 8, tokens=100, text=f'v{i}'
        )
        for i in range(blocks)
    ]
    mementos = [
        MementoRecord(
            id=memento_id_for(ns, 'victim', [b.id]),
            session_id='victim',
            namespace=ns,
            text='m',
            tokens=3,
            summarizes=(b.id,),
        )
        for b in records
    ]
    event = SessionEvent(
        session_id='victim', namespace=ns, kind='auto', payload=b'{}', sha256='x', block_ids=(records[0].id,)
    )
    return Eviction(
        session_id='victim', namespace=ns, blocks=tuple(records), mementos=tuple(mementos),
        mentions=tuple(Mention(b.id, LOCKED) for b in records), events=(event,),
    )  # fmt: skip


@contextmanager
def _entity_locked(driver: Driver, database: str | None, entity_id: str) -> Iterator[None]:
    with driver.session(database=database) as session:
        tx = session.begin_transaction()
        try:
            tx.run('MATCH (e:Entity {id: $id}) SET e.name = e.name', id=entity_id).consume()
            yield
        finally:
            tx.rollback()


def _blocked_write(driver: Driver, database: str | None, ns: str, deadline: float) -> str:
    """Poll the server until the victim's write transaction waits on the lock; its id."""
    query = (
        'SHOW TRANSACTIONS YIELD transactionId, metaData, status, currentQuery '
        "WHERE metaData.op = 'write_eviction' AND status STARTS WITH 'Blocked' AND currentQuery CONTAINS 'MENTIONS' "
        'RETURN transactionId'
    )
    while time.monotonic() < deadline:
        records, _, _ = driver.execute_query(query, database_=database)
        if records:
            return str(records[0]['transactionId'])
        time.sleep(0.05)  # a poll interval, not a synchronisation: the loop waits for the condition itself
    raise AssertionError('the victim write never reached the locked entity')


def _transaction_gone(driver: Driver, database: str | None, tx_id: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        records, _, _ = driver.execute_query(
            'SHOW TRANSACTIONS YIELD transactionId WHERE transactionId = $id RETURN transactionId', id=tx_id,
            database_=database,
        )  # fmt: skip
        if not records:
            return
        time.sleep(0.05)
    raise AssertionError(f'transaction {tx_id} is still on the server')


def _in_thread(work: Any) -> tuple[threading.Thread, dict[str, BaseException | bool]]:
    outcome: dict[str, BaseException | bool] = {}

    def run() -> None:
        try:
            work()
            outcome['ok'] = True
        except BaseException as exc:
            outcome['error'] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def _assert_nothing_of_victim(store: Neo4jStore, ns: str, victim: Eviction) -> None:
    assert store.list_blocks(namespace=ns, session_id='victim', kind=None) == []
    assert store.list_mementos(namespace=ns, session_id='victim') == []
    assert store.read_events('victim', namespace=ns) == []
    assert [s.id for s in store.list_sessions(namespace=ns)] == ['seed']
    with pytest.raises(BlockNotFoundError):
        store.recover_block(victim.blocks[0].id, namespace=ns)

    def next_edges(tx: ManagedTransaction) -> int:
        record = tx.run(
            "MATCH (:EvictedBlock {namespace: $ns, session_id: 'victim'})-[r]-() RETURN count(r) AS n", ns=ns
        ).single(strict=True)
        return int(record['n'])

    assert store._read(next_edges) == 0


def test_write_aborted_by_the_server_is_rolled_back(store: Neo4jStore, unique_namespace: str) -> None:
    ns, driver, db = unique_namespace, store._driver, store._database
    _seed(store, ns)
    victim = _victim(ns)
    deadline = time.monotonic() + 60
    with _entity_locked(driver, db, entity_id_for(ns, LOCKED.key)):
        thread, outcome = _in_thread(lambda: store.write_eviction(victim))
        tx_id = _blocked_write(driver, db, ns, deadline)
        driver.execute_query('TERMINATE TRANSACTIONS $id', id=tx_id, database_=db)
    thread.join(60)

    error = outcome.get('error')
    assert isinstance(error, StoreUnavailableError), outcome
    assert 'aborted by the server' in str(error) and 'nothing of it was written' in str(error)
    _transaction_gone(driver, db, tx_id, deadline)
    _assert_nothing_of_victim(store, ns, victim)

    store.write_eviction(victim)  # the retry the message suggests lands whole
    assert len(store.list_blocks(namespace=ns, session_id='victim')) == len(victim.blocks)
    assert len(store.read_events('victim', namespace=ns)) == 1


class _Proxy:
    """A TCP forwarder to the real server that the test can cut, like a network failure or a server going away."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._listener = socket.create_server(('127.0.0.1', 0))
        self.port = int(self._listener.getsockname()[1])
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._cut = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                if self._cut:
                    client.close()
                    return
                upstream = socket.create_connection(self._target)
                self._sockets += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass

    def cut(self) -> None:
        with self._lock:
            self._cut = True
            with suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)  # wakes a blocked accept(); close() alone does not
            self._listener.close()
            for sock in self._sockets:
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()


@pytest.fixture
def proxied(neo4j_server: dict[str, str]) -> Iterator[tuple[Neo4jStore, _Proxy]]:
    neo4j_uri_with_auth(neo4j_server)
    parts = urlsplit(neo4j_server['uri'])
    proxy = _Proxy(parts.hostname or '127.0.0.1', parts.port or 7687)
    opened = open_store(f'bolt://127.0.0.1:{proxy.port}?retry_time=1')
    assert isinstance(opened, Neo4jStore)
    try:
        yield opened, proxy
    finally:
        proxy.cut()
        opened.close()


def test_connection_lost_mid_write_rolls_back(
    proxied: tuple[Neo4jStore, _Proxy], store: Neo4jStore, unique_namespace: str
) -> None:
    through_proxy, proxy = proxied
    ns, driver, db = unique_namespace, store._driver, store._database
    _seed(store, ns)
    victim = _victim(ns)
    deadline = time.monotonic() + 60
    with _entity_locked(driver, db, entity_id_for(ns, LOCKED.key)):
        thread, outcome = _in_thread(lambda: through_proxy.write_eviction(victim))
        tx_id = _blocked_write(driver, db, ns, deadline)
        proxy.cut()
        thread.join(60)
    error = outcome.get('error')
    assert isinstance(error, StoreUnavailableError), outcome
    assert f'bolt://127.0.0.1:{proxy.port}' in str(error) and 'nothing of it was written' in str(error)
    _transaction_gone(driver, db, tx_id, deadline)
    _assert_nothing_of_victim(store, ns, victim)


def test_server_gone_after_open_is_a_typed_error(proxied: tuple[Neo4jStore, _Proxy], unique_namespace: str) -> None:
    through_proxy, proxy = proxied
    assert through_proxy.list_sessions(namespace=unique_namespace) == []
    proxy.cut()
    with pytest.raises(StoreUnavailableError, match=f'cannot reach Neo4j at bolt://127.0.0.1:{proxy.port}'):
        through_proxy.list_sessions(namespace=unique_namespace)
