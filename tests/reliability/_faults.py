"""`FaultyStore` -- a real backend whose `write_eviction` fails at a chosen step, for fault-injection tests.

No fake storage: every read and every write that is not faulted goes to the real backend. The three steps are
the three moments a write can fail:

- `before`: the wrapper raises before the backend sees the eviction (a store that refuses the call).
- `inside`: the backend begins its real transaction, writes part of the eviction, then the transaction fails on
  the database side and is rolled back. SQLite: a temporary trigger on the wrapped connection `RAISE(ABORT)`s when
  the eviction's compaction event is inserted, after its blocks, mementos, mentions and pages went in. Neo4j: the
  backend's own eviction statements run in its own managed transaction, then a statement the server fails
  (`1 / 0`) aborts it. In both, the store's own error handling turns the failure into its typed error.
- `after`: the eviction commits, then the wrapper raises -- the caller cannot know the write landed (a connection
  lost while the commit's reply was on the wire).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from mementograph.knowledge_graph import Eviction
from mementograph.knowledge_graph.store import GraphStore, NotFoundError, SqliteStore

Step = Literal['before', 'inside', 'after']
STEPS: tuple[Step, ...] = ('before', 'inside', 'after')

_TRIGGER = 'mementograph_injected_fault'


class InjectedFault(RuntimeError):
    """Raised by `FaultyStore` itself (steps `before` and `after`)."""


@dataclass
class Injection:
    """One fault that was injected, and what the backend had done inside its transaction when it failed."""

    eviction: Eviction
    step: Step
    error: BaseException
    written_inside: int = 0
    """`inside` only: rows (SQLite) or records (Neo4j) the transaction had written before it failed."""
    present_after: int = -1
    """How many of the eviction's blocks the store held right after the failure."""


def _any(eviction: Eviction) -> bool:
    return True


@dataclass
class FaultyStore:
    """Delegates everything to `inner`; `write_eviction` fails at `step` for the first `times` evictions that
    `when` selects, then works again."""

    inner: GraphStore
    step: Step
    times: int = 1
    when: Callable[[Eviction], bool] = _any
    on_fault: Callable[[Injection], None] | None = None
    """Called right after each injected fault (before the caller sees the error)."""
    injections: list[Injection] = field(default_factory=list[Injection])
    writes: list[Eviction] = field(default_factory=list[Eviction])
    """Every eviction the backend committed, in order."""

    @property
    def uri(self) -> str:
        return self.inner.uri

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def write_eviction(self, eviction: Eviction) -> None:
        if len(self.injections) >= self.times or not self.when(eviction):
            self.inner.write_eviction(eviction)
            self.writes.append(eviction)
            return
        try:
            if self.step == 'before':
                raise InjectedFault('injected: the store refused the eviction before writing anything')
            if self.step == 'after':
                self.inner.write_eviction(eviction)
                self.writes.append(eviction)
                raise InjectedFault('injected: the eviction committed, then the reply was lost')
            self._fail_inside(eviction)
        except Exception as exc:
            if not self.injections or self.injections[-1].error is not exc:
                self.injections.append(Injection(eviction, self.step, exc))
            injection = self.injections[-1]
            injection.present_after = self._present(eviction)
            if self.on_fault is not None:
                self.on_fault(injection)
            raise

    def _present(self, eviction: Eviction) -> int:
        found = 0
        for block in eviction.blocks:
            try:
                self.inner.get_block(block.id, namespace=eviction.namespace, session_id=eviction.session_id)
            except NotFoundError:
                continue
            found += 1
        return found

    def _fail_inside(self, eviction: Eviction) -> None:
        if isinstance(self.inner, SqliteStore):
            self._fail_inside_sqlite(self.inner, eviction)
        else:
            self._fail_inside_neo4j(eviction)
        raise AssertionError('the injected fault did not fail the transaction')  # pragma: no cover

    def _fail_inside_sqlite(self, store: SqliteStore, eviction: Eviction) -> None:
        conn = store._conn  # the wrapper reaches past the API on purpose: it plays a failing disk/constraint
        with store._lock:
            before = conn.total_changes  # counts rows written by statements later rolled back too
            # TEMP: the trigger lives on this connection only and never reaches the file. The log writer appends
            # messages on the same connection, so the trigger ignores them.
            conn.execute(
                f'CREATE TEMP TRIGGER {_TRIGGER} BEFORE INSERT ON main.events '
                "WHEN NEW.kind <> 'message' BEGIN SELECT RAISE(ABORT, 'injected fault inside the transaction'); END"
            )
        try:
            store.write_eviction(eviction)
        except Exception as exc:
            with store._lock:
                written = conn.total_changes - before
                assert not conn.in_transaction, 'the backend left its transaction open'
            self.injections.append(Injection(eviction, 'inside', exc, written_inside=written))
            raise
        finally:
            with store._lock:
                conn.execute(f'DROP TRIGGER IF EXISTS temp.{_TRIGGER}')

    def _fail_inside_neo4j(self, eviction: Eviction) -> None:
        from mementograph.knowledge_graph.store._base import now_iso
        from mementograph.knowledge_graph.store._neo4j import Neo4jStore, _write_eviction

        store = self.inner
        assert isinstance(store, Neo4jStore)
        written: list[int] = []

        def work(tx: Any) -> None:
            _write_eviction(tx, eviction, now_iso())  # the backend's own statements, in its own transaction
            ids = [b.id for b in eviction.blocks] + [m.id for m in eviction.mementos]
            record = tx.run(
                'MATCH (n) WHERE (n:EvictedBlock OR n:Memento) AND n.id IN $ids RETURN count(n) AS n', ids=ids
            ).single()
            written.append(int(record['n']) if record else 0)
            tx.run('RETURN 1 / $zero AS boom', zero=0).consume()  # the server fails the transaction here

        try:
            store._write('write_eviction', work)
        except Exception as exc:
            self.injections.append(Injection(eviction, 'inside', exc, written_inside=written[-1] if written else 0))
            raise
